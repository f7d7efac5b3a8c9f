package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestProgressLine: one line that retries do not break (issue 27: the
// bar's first frame read "1110667996 rows/s", and 159 "retrying in 2s"
// lines broke it).
func TestProgressLine(t *testing.T) {
	t.Parallel()
	clock := func(p *progressLine) func(time.Duration) {
		now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
		p.now = func() time.Time { return now }
		return func(d time.Duration) { now = now.Add(d) }
	}

	t.Run("OnATerminalEverythingIsDrawnOnOneLine", func(t *testing.T) {
		t.Parallel()
		var out strings.Builder
		p := newProgressLine(&out, "rows")
		p.tty = true
		tick := clock(p)
		p.set(333_000, 1_000_000, "") // a list a third done when the wait starts
		first := out.String()
		require.Equal(t, "\rprogress: 333000/1000000 rows done\x1b[K", first, "no rate before a second look")
		for range 159 {
			tick(2 * time.Second)
			p.retrying("503 Service Unavailable: The database is unavailable.", 2*time.Second)
		}
		tick(time.Second)
		p.set(333_500, 1_000_000, "")
		p.finish()
		frames := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\r")
		require.NotContains(t, strings.TrimSuffix(out.String(), "\n"), "\n", "one line, drawn again in place, until the end")
		require.Equal(t, "progress: 333000/1000000 rows done — API not answering for 5m16s, retrying: 503 Service Unavailable: The database is unavailable.\x1b[K",
			frames[len(frames)-2], "the retry's reason is on the line")
		require.Equal(t, "progress: 333500/1000000 rows done, 1.6 rows/s, about 118h07m left\x1b[K", frames[len(frames)-1])
	})

	t.Run("ElsewhereARetryIsALineAMinuteAtMost", func(t *testing.T) {
		t.Parallel()
		var out strings.Builder
		p := newProgressLine(&out, "rows")
		tick := clock(p)
		p.set(10, 100, "")
		for range 159 {
			tick(2 * time.Second)
			p.retrying("503 Service Unavailable: The database is unavailable.", 2*time.Second)
		}
		tick(time.Second)
		p.set(20, 100, "")
		require.Equal(t, "progress: 10/100 rows done\n"+
			"retrying: 503 Service Unavailable: The database is unavailable.\n"+
			"retrying (for 1m00s): 503 Service Unavailable: The database is unavailable.\n"+
			"retrying (for 2m00s): 503 Service Unavailable: The database is unavailable.\n"+
			"retrying (for 3m00s): 503 Service Unavailable: The database is unavailable.\n"+
			"retrying (for 4m00s): 503 Service Unavailable: The database is unavailable.\n"+
			"retrying (for 5m00s): 503 Service Unavailable: The database is unavailable.\n"+
			"progress: 20/100 rows done, 0.03 rows/s, about 43m left\n", out.String())
	})
}
