//go:build drills

package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier/llm/llmtest"
	"github.com/domainclass/domainclass/cli"
	"github.com/domainclass/domainclass/db/dbtest"
	"github.com/domainclass/domainclass/wire"
)

// drillSlowDownloads: one caller opens 24 downloads of a 15 MB result and
// reads them at 32 bytes a second through a 4 KiB receive buffer, as the
// review of issue 36 did (20 such downloads then held 20 API connections
// in ClientWrite, and other callers' requests and /readyz got 503s),
// against `domainclass all` with AUTH on: first with the default download
// bounds, then with them lifted (and the minimum rate too), so that
// holding no connection while writing is shown on its own. Another
// caller's accepts and job statuses are about as fast as on the idle
// service, and /readyz answers 200 throughout.
func drillSlowDownloads(t *testing.T, s *drillSet) {
	const (
		drill   = "a caller's 24 slow downloads"
		readers = 24
		probes  = 300 // 10-domain jobs of another caller, 20 a second, each read once at once
		rounds  = 3   // of probes/rounds idle, then as many with the downloads open
	)
	for _, phase := range []struct {
		name     string
		settings map[string]string
	}{
		{"default bounds", nil},
		{"bounds lifted", map[string]string{"CALLER_MAX_DOWNLOADS": "64", "LIST_DOWNLOADS_PER_PROCESS": "64",
			"LIST_MIN_RATE": "1", "LIST_RATE_WINDOW": "10m"}},
	} {
		fake := llmtest.New(t, llmtest.Steady(true, 4, "Makes packaged food.", 50*time.Millisecond))
		settings := map[string]string{"AUTH": "on"}
		maps.Copy(settings, phase.settings)
		// A cluster of its own: its pg_stat_activity is this deployment's.
		cluster := dbtest.NewCluster(t)
		d := newDeployment(t, s.bin, fake, cluster.URL, "", settings)
		out, err := d.run("migrate")
		require.NoError(t, err, "domainclass migrate: %s", out)
		reader, other := d.apiKey("reader"), d.apiKey("other")
		all := d.start(cli.RoleAll)
		base := all.URL

		// The reader's list: 36,000 rows of one domain with a 400-byte ref,
		// cancelled at once (its rows CANCELLED: no model work), a 15 MB CSV.
		id, size := bigResult(t, base, reader, 36_000)
		t.Logf("%s: the reader's result is %.1f MB", phase.name, float64(size)/1e6)

		// Idle and loaded in turns, so that the machine's own ups and downs
		// fall on both alike.
		ctx, stop := context.WithCancel(context.Background())
		ready := &readyWatch{}
		var watching sync.WaitGroup
		watching.Go(func() { ready.run(ctx, base) })
		var idle, loaded probed
		sr := &slowReaders{}
		var writing, active, reading int
		for round := range rounds {
			idle.add(probeLatencies(t, base, other, fmt.Sprintf("idle%d", round), probes/rounds))
			rctx, rstop := context.WithCancel(ctx)
			var wg sync.WaitGroup
			for range readers {
				wg.Go(func() { sr.run(rctx, strings.TrimPrefix(base, "http://"), reader, "/lists/"+id+"/results") })
			}
			// Every download the bounds let in is in progress.
			inProgress := int64(min(readers, cmpInt(phase.settings["CALLER_MAX_DOWNLOADS"], 4)))
			require.True(t, eventually(30*time.Second, func() bool { return sr.reading.Load() >= inProgress }),
				"%d downloads in progress", inProgress)
			wg.Go(func() {
				// What the API's connections do while the downloads are slow.
				tick := time.NewTicker(250 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-rctx.Done():
						return
					case <-tick.C:
					}
					writing = max(writing, d.count(`SELECT count(*) FROM pg_stat_activity
						WHERE application_name = 'domainclass-api' AND wait_event = 'ClientWrite'`))
					active = max(active, d.count(`SELECT count(*) FROM pg_stat_activity
						WHERE application_name = 'domainclass-api' AND state <> 'idle'`))
					reading = max(reading, int(sr.reading.Load()))
				}
			})
			loaded.add(probeLatencies(t, base, other, fmt.Sprintf("loaded%d", round), probes/rounds))
			rstop()
			wg.Wait()
		}
		stop()
		watching.Wait()

		s.check(t, drill, phase.name+": other callers' accept p99", "≤ 2× idle", loaded.ok(probes) && loaded.accept.p99() <= 2*idle.accept.p99(),
			"%s; %d of %d accepted", loaded.accept.versus(idle.accept), len(loaded.accept), probes)
		s.check(t, drill, phase.name+": other callers' job status p99", "≤ 2× idle", loaded.ok(probes) && loaded.status.p99() <= 2*idle.status.p99(),
			"%s; %d of %d read", loaded.status.versus(idle.status), len(loaded.status), probes)
		s.check(t, drill, phase.name+": /readyz, idle and loaded", "200 throughout", ready.bad.Load() == 0 && ready.ok.Load() > 0,
			"%d of %d answered 200 (every 100 ms)", ready.ok.Load(), ready.ok.Load()+ready.bad.Load())
		s.check(t, drill, phase.name+": API connections in ClientWrite while the downloads are slow", "0", writing == 0,
			"%d at most (API connections not idle: %d at most; every 250 ms); up to %d downloads open, answers %v",
			writing, active, reading, sr.answerCounts())
	}
}

// cmpInt is v as an int, or def when v is not one.
func cmpInt(v string, def int) int {
	var n int
	if _, err := fmt.Sscan(v, &n); err != nil || n <= 0 {
		return def
	}
	return n
}

// bigResult uploads a list of n rows of one domain, each with a 400-byte
// ref, with key, cancels it, and returns its id and its CSV's size.
func bigResult(t *testing.T, base, key string, n int) (string, int64) {
	t.Helper()
	var body bytes.Buffer
	body.WriteString("domain,ref\n")
	for i := range n {
		fmt.Fprintf(&body, "acme.com,ref-%06d-%s\n", i, strings.Repeat("x", 400))
	}
	client := &http.Client{Timeout: 2 * time.Minute}
	do := func(method, path string, body io.Reader, header ...string) ([]byte, int) {
		req, err := http.NewRequest(method, base+path, body)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+key)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return b, resp.StatusCode
	}
	b, code := do(http.MethodPost, "/lists", &body, "Content-Type", "text/csv")
	require.Equal(t, http.StatusAccepted, code, "%.300s", b)
	var a wire.ListAccepted
	require.NoError(t, json.Unmarshal(b, &a))
	b, code = do(http.MethodDelete, "/lists/"+a.ListID, nil)
	require.Equal(t, http.StatusOK, code, "%.300s", b)
	b, code = do(http.MethodGet, "/lists/"+a.ListID+"/results", nil)
	require.Equal(t, http.StatusOK, code)
	return a.ListID, int64(len(b))
}

// latencies are request durations.
type latencies []time.Duration

func (l latencies) p99() time.Duration { return quantile(l, 0.99) }

// versus says l's p99 and p50 against idle's.
func (l latencies) versus(idle latencies) string {
	if len(l) == 0 || len(idle) == 0 {
		return fmt.Sprintf("%d loaded, %d idle", len(l), len(idle))
	}
	return fmt.Sprintf("%.1f ms, idle %.1f ms (%.2f×); p50 %.1f ms, idle %.1f ms", msOf(l.p99()), msOf(idle.p99()),
		float64(l.p99())/float64(idle.p99()), msOf(quantile(l, 0.5)), msOf(quantile(idle, 0.5)))
}

// probed are another caller's accepts and the status reads of the jobs
// accepted.
type probed struct{ accept, status latencies }

func (p probed) ok(n int) bool { return len(p.accept) == n && len(p.status) == n }

func (p *probed) add(q probed) {
	p.accept = append(p.accept, q.accept...)
	p.status = append(p.status, q.status...)
}

// probeLatencies submits n 10-domain jobs with key, 20 a second, and reads
// each accepted job's status at once, returning both latencies.
func probeLatencies(t *testing.T, base, key, prefix string, n int) probed {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	send := func(method, path string, body []byte) ([]byte, int, time.Duration, error) {
		req, err := http.NewRequest(method, base+path, bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+key)
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return nil, 0, 0, err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		return b, resp.StatusCode, time.Since(start), err
	}
	var p probed
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for i := range n {
		<-tick.C
		var domains []string
		for k := range 10 {
			domains = append(domains, fmt.Sprintf("%s-%d-%d.com", prefix, i, k))
		}
		body, _ := json.Marshal(map[string]any{"domains": domains})
		b, code, took, err := send(http.MethodPost, "/domains/classify", body)
		if err != nil || code != http.StatusAccepted {
			t.Logf("accept %s %d: HTTP %d %v %.200s", prefix, i, code, err, b)
			continue
		}
		p.accept = append(p.accept, took)
		var a struct {
			JobID string `json:"job_id"`
		}
		require.NoError(t, json.Unmarshal(b, &a))
		b, code, took, err = send(http.MethodGet, "/domains/classify/"+a.JobID, nil)
		if err != nil || code != http.StatusOK {
			t.Logf("status %s %d: HTTP %d %v %.200s", prefix, i, code, err, b)
			continue
		}
		p.status = append(p.status, took)
	}
	return p
}

// readyWatch asks /readyz every 100 ms until ctx ends.
type readyWatch struct{ ok, bad atomic.Int64 }

func (r *readyWatch) run(ctx context.Context, base string) {
	client := &http.Client{Timeout: 5 * time.Second}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		resp, err := client.Get(base + "/readyz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		if err == nil && resp.StatusCode == http.StatusOK {
			r.ok.Add(1)
		} else if ctx.Err() == nil {
			r.bad.Add(1)
		}
	}
}

// slowReaders are downloads read 64 bytes every 2 s (32 bytes a second)
// through a 4 KiB receive buffer; each opens again a second after the
// server refuses, ends or cuts it.
type slowReaders struct {
	opened  atomic.Int64 // sockets opened, ever
	reading atomic.Int64 // answered 200 and being read
	mu      sync.Mutex
	answers map[string]int // "200 cut", "429", … → how many
}

func (sr *slowReaders) run(ctx context.Context, addr, key, path string) {
	for ctx.Err() == nil {
		sr.once(ctx, addr, key, path)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (sr *slowReaders) once(ctx context.Context, addr, key, path string) {
	dialer := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
		return cmp.Or(err, serr)
	}}
	conn, err := dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", path, key); err != nil {
		return
	}
	sr.opened.Add(1)
	resp, err := http.ReadResponse(bufio.NewReaderSize(conn, 16), nil)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		sr.count(fmt.Sprint(resp.StatusCode))
		return
	}
	sr.reading.Add(1)
	defer sr.reading.Add(-1)
	buf := make([]byte, 64)
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		if _, err := io.ReadFull(resp.Body, buf); err != nil {
			if ctx.Err() == nil {
				sr.count("200, then cut off")
			}
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (sr *slowReaders) count(answer string) {
	sr.mu.Lock()
	defer sr.mu.Unlock()
	if sr.answers == nil {
		sr.answers = map[string]int{}
	}
	sr.answers[answer]++
}

// answerCounts is how the downloads ended, by answer.
func (sr *slowReaders) answerCounts() map[string]int {
	sr.mu.Lock()
	defer sr.mu.Unlock()
	return maps.Clone(sr.answers)
}
