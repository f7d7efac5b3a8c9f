package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/cli"
	"github.com/domainclass/domainclass/db/dbtest"
)

// pgProxy forwards connections on loopback to Postgres, until it is cut:
// then every connection it held is closed and every new one is closed at
// once (counted), as a database host that went away would. It is how a
// test takes Postgres away from one service without stopping the cluster
// other tests share.
type pgProxy struct {
	target string
	ln     net.Listener

	mu      sync.Mutex
	cut     bool
	conns   map[net.Conn]struct{}
	refused atomic.Int64
}

func newPGProxy(t *testing.T, target string) *pgProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &pgProxy{target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() { _ = ln.Close(); p.setCut(true) })
	go p.serve()
	return p
}

func (p *pgProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.pipe(c)
	}
}

// track keeps c to close at the cut; false (and c closed) while cut.
func (p *pgProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *pgProxy) pipe(client net.Conn) {
	if !p.track(client) {
		p.refused.Add(1)
		return
	}
	server, err := net.Dial("tcp", p.target)
	if err != nil || !p.track(server) {
		_ = client.Close()
		return
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(server, client); done <- struct{}{} }()
	go func() { _, _ = io.Copy(client, server); done <- struct{}{} }()
	<-done
	_ = client.Close()
	_ = server.Close()
}

// setCut cuts (every connection closed, new ones refused) or restores.
func (p *pgProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			_ = c.Close()
		}
		clear(p.conns)
	}
}

// logLines is a log a test reads while the service writes it.
type logLines struct{ w lockedWriter }

func (l *logLines) lines() []string {
	s := strings.TrimSpace(l.w.String())
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// outageDrill runs a service (role all) through a proxy, cuts Postgres
// away until the proxy refused minRefused connections (and for at least
// cut), restores it, and returns the log lines written from the cut until
// the service said the database was back, and how many it said it held
// back.
func outageDrill(t *testing.T, cut time.Duration, minRefused int64) (during []string, suppressed int) {
	u, err := url.Parse(dbtest.URL())
	require.NoError(t, err)
	proxy := newPGProxy(t, u.Host)
	u.Host = proxy.ln.Addr().String()
	e := newE2E(t, nil, map[string]string{"DATABASE_URL": u.String()})
	cfg, err := LoadConfig(e.environ())
	require.NoError(t, err)
	var logs logLines
	m := NewMain(cfg, cli.RoleAll, slog.New(slog.NewTextHandler(&logs.w, &slog.HandlerOptions{Level: slog.LevelInfo})))
	m.TestOnly = true
	require.NoError(t, m.Run(context.Background()))
	e.mains, e.api = append(e.mains, m), m
	e.wait(e.submit("acme.com"), "COMPLETED", dbtest.Patience()) // it works through the proxy

	before := len(logs.lines())
	proxy.setCut(true)
	start := time.Now()
	require.Eventually(t, func() bool { return proxy.refused.Load() >= minRefused && time.Since(start) >= cut },
		cut+dbtest.Patience(), 20*time.Millisecond, "the service kept trying to reach Postgres")
	refused := proxy.refused.Load()
	proxy.setCut(false)
	back := regexp.MustCompile(`database reachable again after \S+ \((\d+) errors suppressed\)`)
	var m2 []string
	require.Eventually(t, func() bool {
		for _, l := range logs.lines()[before:] {
			if m2 = back.FindStringSubmatch(l); m2 != nil {
				return true
			}
		}
		return false
	}, dbtest.Patience(), 20*time.Millisecond, "the service says the database is back:\n%s", strings.Join(logs.lines()[before:], "\n"))
	for _, l := range logs.lines()[before:] {
		if back.MatchString(l) {
			break
		}
		during = append(during, l)
	}
	suppressed, _ = strconv.Atoi(m2[1])
	t.Logf("lines:\n%s", strings.Join(logs.lines()[before:], "\n"))
	t.Logf("Postgres cut for %s (%d connections refused): %d lines written, %d held back (%d lines without the collapse)",
		time.Since(start).Round(time.Millisecond), refused, len(during), suppressed, len(during)+suppressed)

	e.wait(e.submit("beta.com"), "COMPLETED", dbtest.Patience()) // and it works again
	return during, suppressed
}

// TestDatabaseOutageIsAFewLines (issue 36, a new user): a 60-s Postgres
// outage wrote 460 River "Error fetching jobs" lines, 7 "Too many errors;
// giving up" and 1,162 WARN lines. An outage reads as one line that says
// what is down and since when, and one when it is back; what fails
// meanwhile is counted. A drill (drills build tag) cuts it for 60 s.
func TestDatabaseOutageIsAFewLines(t *testing.T) {
	t.Parallel()
	during, suppressed := outageDrill(t, 0, 30)
	require.NotEmpty(t, during)
	require.Regexp(t, `level=ERROR msg="database unreachable since \S+: .+"`, during[0], "the first line says what is down and since when")
	require.LessOrEqual(t, len(during), 10, "an outage is a few lines:\n%s", strings.Join(during, "\n"))
	require.GreaterOrEqual(t, suppressed, 10, "the failures were counted, not printed")
	for _, l := range during[1:] {
		require.NotContains(t, l, "Error fetching jobs")
		require.NotContains(t, l, "database unreachable since", "one outage, said once")
	}
}
