//go:build drills

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier/llm/llmtest"
	"github.com/domainclass/domainclass/cli"
	"github.com/domainclass/domainclass/db/dbtest"
)

// drillTrickledUploads: one caller opens 60 uploads that promise 10 MB and
// send a byte a second, as the review of issue 22 did (all 36 connections
// then sat in COPY, and other callers got 503s), against `domainclass all`
// with AUTH on: first with the default upload bounds, then with them
// lifted, so that holding no connection while reading is shown on its
// own. Another caller's jobs are accepted about as fast as on the idle
// service, and complete.
func drillTrickledUploads(t *testing.T, s *drillSet) {
	const (
		drill  = "a caller trickling 60 uploads"
		probes = 200 // 10-domain jobs of another caller, 20 a second
	)
	for _, phase := range []struct {
		name     string
		settings map[string]string
	}{
		{"default bounds", nil},
		// Uploads in progress count toward the caller's active lists too.
		{"bounds lifted", map[string]string{"CALLER_MAX_UPLOADS": "64", "LIST_UPLOADS_PER_PROCESS": "64",
			"CALLER_MAX_ACTIVE_LISTS": "100", "LIST_MIN_RATE": "1", "LIST_RATE_WINDOW": "10m"}},
	} {
		fake := llmtest.New(t, llmtest.Steady(true, 4, "Makes packaged food.", 50*time.Millisecond))
		settings := map[string]string{"AUTH": "on"}
		for k, v := range phase.settings {
			settings[k] = v
		}
		// A cluster of its own: its pg_stat_activity is this deployment's.
		cluster := dbtest.NewCluster(t)
		d := newDeployment(t, s.bin, fake, cluster.URL, "", settings)
		out, err := d.run("migrate")
		require.NoError(t, err, "domainclass migrate: %s", out)
		trickler, other := d.apiKey("trickler"), d.apiKey("other")
		all := d.start(cli.RoleAll)
		base := all.URL

		idle, idleIDs := acceptLatencies(t, base, other, "idle", probes)
		ctx, stop := context.WithCancel(context.Background())
		tr := &trickles{}
		var wg sync.WaitGroup
		for range 60 {
			wg.Go(func() { tr.run(ctx, strings.TrimPrefix(base, "http://"), trickler) })
		}
		require.True(t, eventually(20*time.Second, func() bool { return tr.opened.Load() >= 60 }), "60 trickles opened")
		loaded, loadedIDs := acceptLatencies(t, base, other, "loaded", probes)
		reading := tr.reading.Load()
		copying := d.count(`SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query ILIKE 'copy%'`)
		stop()
		wg.Wait()

		ids := append(idleIDs, loadedIDs...)
		completed := eventually(2*time.Minute, func() bool { return d.ended(ids) == len(ids) })
		if len(loaded) == 0 || len(idle) == 0 {
			s.check(t, drill, phase.name+": other callers' accept p99", "≤ 2× idle", false,
				"%d of %d accepted idle, %d of %d while the uploads trickle", len(idle), probes, len(loaded), probes)
		} else {
			p99Idle, p99Loaded := quantile(idle, 0.99), quantile(loaded, 0.99)
			s.check(t, drill, phase.name+": other callers' accept p99", "≤ 2× idle", len(loaded) == probes && p99Loaded <= 2*p99Idle,
				"%.1f ms, idle %.1f ms (%.2f×); p50 %.1f ms, idle %.1f ms; %d of %d accepted", msOf(p99Loaded), msOf(p99Idle),
				float64(p99Loaded)/float64(p99Idle), msOf(quantile(loaded, 0.5)), msOf(quantile(idle, 0.5)), len(loaded), probes)
		}
		s.check(t, drill, phase.name+": other callers' jobs", "all accepted and COMPLETED", completed && len(ids) == 2*probes,
			"%d of %d ended (River works)", d.ended(ids), len(ids))
		s.check(t, drill, phase.name+": connections in COPY while the uploads trickle", "0", copying == 0,
			"%d; %d uploads being read, %v answers to the trickles", copying, reading, tr.answerCounts())
	}
}

// apiKey creates an API key for name with the binary and returns it.
func (d *deployment) apiKey(name string) string {
	d.t.Helper()
	out, err := d.run("apikey", "create", name)
	require.NoError(d.t, err, out)
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "dc_") {
			return strings.TrimSpace(line)
		}
	}
	d.t.Fatalf("no key in the output of apikey create:\n%s", out)
	return ""
}

// acceptLatencies submits n 10-domain jobs with key, 20 a second, and
// returns the latencies and ids of those accepted.
func acceptLatencies(t *testing.T, base, key, prefix string, n int) ([]time.Duration, []string) {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	var (
		lat []time.Duration
		ids []string
	)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for i := range n {
		<-tick.C
		var domains []string
		for k := range 10 {
			domains = append(domains, fmt.Sprintf("%s-%d-%d.com", prefix, i, k))
		}
		body, _ := json.Marshal(map[string]any{"domains": domains})
		req, err := http.NewRequest(http.MethodPost, base+"/domains/classify", bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+key)
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			t.Logf("accept %d: %v", i, err)
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Logf("accept %d: HTTP %d %s", i, resp.StatusCode, b)
			continue
		}
		lat = append(lat, time.Since(start))
		var a struct {
			JobID string `json:"job_id"`
		}
		require.NoError(t, json.Unmarshal(b, &a))
		ids = append(ids, a.JobID)
	}
	return lat, ids
}

// trickles are uploads that promise 10 MB and send a byte a second; each
// opens again a second after the server answers or closes it.
type trickles struct {
	opened  atomic.Int64 // sockets opened, ever
	reading atomic.Int64 // open and not answered
	mu      sync.Mutex
	answers map[int]int // status → how many
}

func (tr *trickles) run(ctx context.Context, addr, key string) {
	for ctx.Err() == nil {
		tr.once(ctx, addr, key)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (tr *trickles) once(ctx context.Context, addr, key string) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return
	}
	defer conn.Close()
	head := fmt.Sprintf("POST /lists HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: text/plain\r\n"+
		"Content-Length: 10000000\r\n\r\n", key)
	if _, err := conn.Write([]byte(head)); err != nil {
		return
	}
	tr.opened.Add(1)
	tr.reading.Add(1)
	defer tr.reading.Add(-1)
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		status := 0 // closed by the server without an answer
		switch {
		case err == nil:
			status = resp.StatusCode
		case ctx.Err() != nil:
			return // closed here, at the end
		}
		tr.mu.Lock()
		if tr.answers == nil {
			tr.answers = map[int]int{}
		}
		tr.answers[status]++
		tr.mu.Unlock()
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-answered:
			return
		case <-tick.C:
			if _, err := conn.Write([]byte("x")); err != nil {
				<-answered
				return
			}
		}
	}
}

// answerCounts is how the server answered the trickles, by status (0:
// it closed one without an answer).
func (tr *trickles) answerCounts() map[int]int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return maps.Clone(tr.answers)
}

// quantile is the q-quantile of lat, which is not empty.
func quantile(lat []time.Duration, q float64) time.Duration {
	s := slices.Clone(lat)
	slices.Sort(s)
	return s[min(len(s)-1, int(math.Ceil(q*float64(len(s))))-1)]
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
