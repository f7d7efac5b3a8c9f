package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/wire"
)

// TestProgressLine: one line that retries do not break (issue 27: the
// bar's first frame read "1110667996 rows/s", and 159 "retrying in 2s"
// lines broke it).
func TestProgressLine(t *testing.T) {
	t.Parallel()
	clock := func(p *progress) func(time.Duration) {
		now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
		p.now = func() time.Time { return now }
		return func(d time.Duration) { now = now.Add(d) }
	}

	t.Run("OnATerminalEverythingIsDrawnOnOneLine", func(t *testing.T) {
		t.Parallel()
		var out strings.Builder
		p := newProgress(&out, "rows")
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
		p := newProgress(&out, "rows")
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

// TestListProgressLines: off a terminal, a list's progress is a line per
// change, with the rate of the last minute and the time left.
func TestListProgressLines(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	p := newProgress(&out, "rows")
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	p.now = func() time.Time { return now }
	status := func(done int) *wire.ListStatus {
		return &wire.ListStatus{Progress: wire.ListProgress{Done: done, Total: 50_000}}
	}
	p.list(status(180))
	now = now.Add(10 * time.Second)
	p.list(status(180))
	now = now.Add(10 * time.Second)
	p.list(status(880))
	now = now.Add(5 * time.Minute)
	p.list(status(20_000))
	now = now.Add(10 * time.Minute)
	p.list(status(50_000))
	require.Equal(t, "progress: 180/50000 rows done\n"+
		"progress: 880/50000 rows done, 35 rows/s, about 23m left\n"+
		"progress: 20000/50000 rows done, 64 rows/s, about 7m51s left\n"+
		"progress: 50000/50000 rows done, 50 rows/s\n", out.String(),
		"the rate is of the last minute of looks (here, since the look before)")

	for d, want := range map[time.Duration]string{0: "under a second", 40 * time.Second: "40s", 150 * time.Second: "2m30s",
		23*time.Minute + 10*time.Second: "23m", 65 * time.Minute: "1h05m", 26 * time.Hour: "26h00m"} {
		require.Equal(t, want, roughly(d), d)
	}
}

// TestListProgress_AStall: issue 36 saw `submit --wait` into a file print
// nothing while a list stood still for ten minutes (its last line said
// "about 3m37s left" all along), then "72h26m left" once it moved again.
// A still count says for how long, and why when the service says; after
// it, the rate starts again from the stall's end.
func TestListProgress_AStall(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	p := newProgress(&out, "rows")
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	p.now = func() time.Time { return now }
	poll := func(done int, waiting string) {
		p.list(&wire.ListStatus{Progress: wire.ListProgress{Done: done, Total: 60_000}, Waiting: waiting})
		now = now.Add(2 * time.Second)
	}
	poll(10_000, "")
	poll(10_500, "")
	why := "its work failed and is being retried with backoff: the model provider answered 503 Service Unavailable"
	for range 300 { // ten minutes still, polled every 2 s
		poll(10_600, why)
	}
	for range 5 {
		poll(10_600+250*5, "")
	}
	poll(11_100+250*5, "")
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	require.Equal(t, []string{
		"progress: 10000/60000 rows done",
		"progress: 10500/60000 rows done, 250 rows/s, about 3m18s left",
		"progress: 10600/60000 rows done, 150 rows/s, about 5m29s left",
		"progress: 10600/60000 rows done, no progress for 30s: " + why,
		"progress: 10600/60000 rows done, no progress for 1m30s: " + why,
		"progress: 10600/60000 rows done, no progress for 2m30s: " + why,
		"progress: 10600/60000 rows done, no progress for 3m30s: " + why,
		"progress: 10600/60000 rows done, no progress for 4m30s: " + why,
		"progress: 10600/60000 rows done, no progress for 5m30s: " + why,
		"progress: 10600/60000 rows done, no progress for 6m30s: " + why,
		"progress: 10600/60000 rows done, no progress for 7m30s: " + why,
		"progress: 10600/60000 rows done, no progress for 8m30s: " + why,
		"progress: 10600/60000 rows done, no progress for 9m30s: " + why,
		"progress: 11850/60000 rows done, 625 rows/s, about 1m17s left",
		"progress: 12350/60000 rows done, 146 rows/s, about 5m27s left",
	}, lines, "a line a minute while still, saying why; then the rate of the recovery, not of the stall")
}
