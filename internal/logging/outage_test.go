package logging

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/db/dbtest"
)

// TestOutageLog: which lines an outage holds back, and what it says while
// it lasts and when it ends; a refused connection that is not the
// database's (a webhook receiver's, the model's) is no outage.
func TestOutageLog(t *testing.T) {
	t.Parallel()
	var out lines
	o := NewOutage(slog.NewTextHandler(&out, nil))
	o.reminder, o.period = 500*time.Millisecond, 10*time.Millisecond
	t.Cleanup(o.Close)
	var up atomic.Bool
	o.Watch(func(context.Context) error {
		if up.Load() {
			return nil
		}
		return db.ErrUnavailable
	})
	logger := slog.New(o.Handler())
	river := Library(logger, "warn")
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}

	logger.Warn("webhook delivery failed", "error", fmt.Errorf("POST https://hooks.example/x: %w", refused))
	river.Error("producer: Error fetching jobs", "err", "failed to connect to `user=app database=app`: dial error", "queue", "classify")
	river.Error("producer: Error fetching jobs", "err", "unexpected EOF", "queue", "list")
	river.Error("JobCompleter: Too many errors; giving up")
	logger.Warn("error reading queue stats", "error", fmt.Errorf("%w: %w", db.ErrUnavailable, refused))
	logger.Warn("error reading queue stats", "error", fmt.Errorf("%w: %w", db.ErrUnavailable, context.DeadlineExceeded))
	logger.Warn("webhook delivery failed", "error", fmt.Errorf("POST https://hooks.example/x: %w", refused))
	logger.Info("a job ended")
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "database still unreachable") },
		dbtest.Patience(), 10*time.Millisecond)
	require.Equal(t, 4, o.Suppressed())
	up.Store(true)
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "database reachable again") },
		dbtest.Patience(), 10*time.Millisecond)

	lines := out.lines()
	require.Len(t, lines, 6, "%s", out.String())
	require.Contains(t, lines[0], `level=WARN msg="webhook delivery failed"`, "not the database's: as it is")
	require.Regexp(t, `level=ERROR msg="database unreachable since \S+: failed to connect to `+"`"+`user=app database=app`+"`"+`: dial error"`, lines[1])
	require.Contains(t, lines[2], `msg="webhook delivery failed"`, "not the database's, during an outage too")
	require.Contains(t, lines[3], `msg="a job ended"`)
	require.Regexp(t, `level=WARN msg="database still unreachable since \S+ \(4 errors suppressed\)"`, lines[4])
	require.Regexp(t, `level=INFO msg="database reachable again after \S+ \(4 errors suppressed\)"`, lines[5])
	require.Zero(t, o.Suppressed())

	// Once it is back, the next failure is a new outage, said again.
	up.Store(false)
	river.Error("producer: Error fetching jobs", "err", "unexpected EOF")
	require.Contains(t, out.lines()[6], `msg="database unreachable since`)
}

// lines is a log the test reads while the outage's prober writes it.
type lines struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *lines) lines() []string {
	s := strings.TrimSpace(l.String())
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}
