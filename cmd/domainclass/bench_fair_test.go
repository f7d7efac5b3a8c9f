//go:build bench

package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier/llm/llmtest"
	"github.com/domainclass/domainclass/cli"
	"github.com/domainclass/domainclass/client"
	"github.com/domainclass/domainclass/wire"
)

// The fair-share bars, with one worker process, then two, then four, all
// sharing one provider account whose limit binds (LLM_ACCOUNT_RPM, below
// what even one process could send): interactive jobs beside a big list,
// and the lists of two callers, for the deployment. With four processes each
// has room for every chunk of two lists (LIST_WORKERS ÷ LIST_CHUNKS_IN_FLIGHT
// = 8 ÷ 4), fewer than the three lists of the two-caller steps; four chunks
// of a list in flight give each process some of it, as the default of 8 does
// on two processes.
// Knobs: BENCH_FAIR_WORKERS (the runs, default 1,2,4; none: only `all`),
// BENCH_FAIR_ACCOUNT_RPM (default 3600),
// BENCH_FAIR_SECONDS (interactive load per step, default 60),
// BENCH_FAIR_WINDOW (rate windows of the two-caller step, default 20s),
// BENCH_FAIR_STAGGER (how long caller A's list runs before B's, default 30s),
// BENCH_FAIR_ALL_ROWS (the list beside the probe in `all`, default 1000000),
// BENCH_FAIR_ALL=off (skip the `all` run).

type fairBench struct {
	t       *testing.T
	e       *e2e
	workers int
	ideal   float64 // min(C/L, rate) of all the worker processes
	app     *client.Client
	teamA   *client.Client
	teamB   *client.Client
	run     int
}

func benchFair(t *testing.T) []benchRow {
	var rows []benchRow
	// A subtest each, so that a run's processes are gone before the next
	// starts: before, the one-worker run's idle processes ran beside the
	// two-worker run, and those of all three beside `all`.
	run := func(name string, fn func(*testing.T) []benchRow) {
		t.Run(name, func(t *testing.T) { rows = append(rows, fn(t)...) })
	}
	for _, workers := range envInts("BENCH_FAIR_WORKERS", []int{1, 2, 4}) {
		if os.Getenv("BENCH_FAIR_WORKERS") == "none" {
			break
		}
		run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) []benchRow { return fairRun(t, workers) })
	}
	if os.Getenv("BENCH_FAIR_ALL") != "off" {
		run("all", fairAllRun)
	}
	return rows
}

func fairRun(t *testing.T, workers int) []benchRow {
	t.Helper()
	latency := envDuration("BENCH_LLM_LATENCY", 200*time.Millisecond)
	c := envInt("BENCH_LLM_CONCURRENCY", 16)
	seconds := envDuration("BENCH_FAIR_SECONDS", 60*time.Second)
	window := envDuration("BENCH_FAIR_WINDOW", 20*time.Second)
	stagger := envDuration("BENCH_FAIR_STAGGER", 30*time.Second)
	ideal := float64(c) / latency.Seconds()
	account := envInt("BENCH_FAIR_ACCOUNT_RPM", 3600)
	env := map[string]string{
		"AUTH": "on", "LOG_LEVEL": "error",
		"LLM_MAX_CONCURRENCY": strconv.Itoa(c), "LLM_RATE_PER_MINUTE": strconv.Itoa(int(ideal*60) * 10),
		"LLM_ACCOUNT_RPM":        strconv.Itoa(account),
		"CALLER_RATE_PER_MINUTE": "1000000", "CALLER_MAX_QUEUED_DOMAINS": "1000000",
	}
	if workers == 4 {
		env["LIST_WORKERS"], env["LIST_CHUNKS_IN_FLIGHT"] = "8", "4"
	}
	for _, k := range []string{"LIST_DOMAIN_CONCURRENCY", "LIST_CHUNKS_IN_FLIGHT", "LIST_WORKERS"} {
		if v := os.Getenv("BENCH_" + k); v != "" {
			env[k] = v
		}
	}
	e := newE2E(t, llmtest.Steady(true, 4, "x", latency), env)
	// Processes of their own, as a deployment runs them (the fake model
	// and search serve from this one).
	api := e.startProcess(cli.RoleAPI)
	var workerURLs []string
	for range workers {
		workerURLs = append(workerURLs, e.startProcess(cli.RoleWorker).URL)
	}
	f := &fairBench{t: t, e: e, workers: workers, ideal: math.Min(ideal*float64(workers), float64(account)/60),
		app:   client.New(api.URL, e.apiKey("app")),
		teamA: client.New(api.URL, e.apiKey("team-a")),
		teamB: client.New(api.URL, e.apiKey("team-b")),
	}
	procs := fmt.Sprintf("%d worker", workers)
	if workers > 1 {
		procs += "s"
	}
	setting := fmt.Sprintf("%s, C=%d, L=%s each, account %d/min", procs, c, latency, account)
	if workers == 4 {
		setting += ", 2 lists a process"
	}

	// Interactive jobs, idle and beside a 100k-domain list.
	waits0 := interactiveWaits(t, workerURLs)
	idle := f.interactive(seconds)
	waits1 := interactiveWaits(t, workerURLs)
	big := f.upload(f.teamA, "big", 100_000)
	f.waitDraining(f.teamA, big)
	waits2 := interactiveWaits(t, workerURLs)
	calls0 := perProcess(t, workerURLs)
	var loaded []time.Duration
	bigDone, elapsed := f.progressDuring(f.teamA, big, func() { loaded = f.interactive(seconds) })
	waits3 := interactiveWaits(t, workerURLs)
	var unused, held float64 // requests/s left unused, and the account's part leased
	for i, p := range perProcess(t, workerURLs) {
		d := p.since(calls0[i], elapsed)
		t.Logf("jobs + list step, worker %d: list calls %.1f/s, interactive %.1f/s, unused %.1f/s, share %.2f",
			i+1, d.list, d.interactive, d.unused, d.held)
		unused, held = unused+d.unused, held+d.held
	}
	f.cancel(f.teamA, big)
	p95Idle, p95Loaded := percentile(idle, 0.95), percentile(loaded, 0.95)
	busy := (float64(bigDone) + float64(10*len(loaded))) / elapsed.Seconds()

	// Two callers' lists: A's starts, B's 30 s later; then A adds a second.
	bRows := 5000 * workers // B lasts past both windows at any worker count
	a1 := f.upload(f.teamA, "a1", 50_000)
	f.waitDraining(f.teamA, a1)
	time.Sleep(stagger) // B starts after A, 30 s by default as the bar says
	b := f.upload(f.teamB, "b", bRows)
	f.waitDraining(f.teamB, b)
	rA, rB, both := f.rates(window, []*client.Client{f.teamA}, []string{a1}, f.teamB, b)
	a2 := f.upload(f.teamA, "a2", 50_000)
	f.waitDraining(f.teamA, a2)
	rA2, rB2, three := f.rates(window, []*client.Client{f.teamA, f.teamA}, []string{a1, a2}, f.teamB, b)
	for _, id := range []string{a1, a2} {
		f.cancel(f.teamA, id)
	}
	f.cancel(f.teamB, b)
	ratio, ratio2 := rB/rA, rB2/rA2
	drain := min(busy, both, three) / f.ideal

	section := "fair"
	return []benchRow{
		{section, fmt.Sprintf("10-domain jobs at 1/s for %s, idle (%s): p95 completion", seconds, setting),
			ms(p95Idle), fmt.Sprintf("p50 %s, %d jobs", ms(percentile(idle, 0.5)), len(idle)), "-", "-"},
		{section, "  the same while a 100k-domain list drains: p95 completion",
			ms(p95Loaded), fmt.Sprintf("idle p95 %s (%.2f×); p50 %s; model calls that waited for a slot or the capacity > 0.25 s / > 0.5 s: idle %s, beside the list %s",
				ms(p95Idle), float64(p95Loaded)/float64(p95Idle), ms(percentile(loaded, 0.5)), waits1.since(waits0), waits3.since(waits2)),
			"≤ 2× idle", verdict(p95Loaded <= 2*p95Idle)},
		{section, fmt.Sprintf("caller B's list (%s) ÷ caller A's (50k, %s ahead): rows/s over %s", count(bRows), stagger, window),
			fmt.Sprintf("%.2f", ratio), fmt.Sprintf("B %.1f/s, A %.1f/s", rB, rA), "0.8–1.25", verdict(ratio >= 0.8 && ratio <= 1.25)},
		{section, "  the same with a second list of A's running: B ÷ A's two",
			fmt.Sprintf("%.2f", ratio2), fmt.Sprintf("B %.1f/s, A %.1f/s in all", rB2, rA2), "0.8–1.25", verdict(ratio2 >= 0.8 && ratio2 <= 1.25)},
		{section, "  domains/s in all, slowest of the three steps (jobs + list, two lists, three)",
			fmt.Sprintf("%.1f/s", min(busy, both, three)),
			fmt.Sprintf("min(C/L, account) = %.1f/s (%.0f%%); steps %.1f, %.1f, %.1f; the jobs + list step: the processes held %.1f%% of the account, and left %.1f requests/s of their shares unused (full buckets)",
				f.ideal, 100*drain, busy, both, three, 100*held, unused),
			"≥ 95%", verdict(drain >= 0.95)},
	}
}

// interactive submits a job of 10 fresh domains every second for d, as the
// app's caller, and returns each job's time from accepted to completed (the
// API's own created_at and completed_at).
func (f *fairBench) interactive(d time.Duration) []time.Duration {
	f.t.Helper()
	ctx := context.Background()
	f.run++
	var (
		mu    sync.Mutex
		times []time.Duration
		wg    sync.WaitGroup
	)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for i := 0; i < int(d/time.Second); i++ {
		domains := make([]string, 10)
		for k := range domains {
			domains[k] = fmt.Sprintf("app-%d-%d-%d.com", f.run, i, k)
		}
		a, err := f.app.Classify(ctx, wire.ClassifyRequest{Domains: domains}, "")
		require.NoError(f.t, err)
		wg.Go(func() {
			for {
				r, err := f.app.Job(ctx, a.JobID)
				require.NoError(f.t, err)
				if r.Ended() {
					mu.Lock()
					times = append(times, r.CompletedAt.Sub(r.CreatedAt))
					mu.Unlock()
					return
				}
				time.Sleep(20 * time.Millisecond) // polling a status
			}
		})
		<-tick.C
	}
	wg.Wait()
	return times
}

func (f *fairBench) upload(c *client.Client, name string, n int) string {
	f.t.Helper()
	var b strings.Builder
	b.WriteString("domain\n")
	for i := range n {
		fmt.Fprintf(&b, "%s-%d-%d.com\n", name, f.workers, i)
	}
	body := b.String()
	a, err := c.UploadList(context.Background(), func() (io.ReadCloser, error) {
		return io.NopCloser(strings.NewReader(body)), nil
	}, client.ListOptions{ContentType: client.ListCSV})
	require.NoError(f.t, err)
	return a.ListID
}

func (f *fairBench) done(c *client.Client, id string) int {
	f.t.Helper()
	s, err := c.List(context.Background(), id)
	require.NoError(f.t, err)
	return s.Progress.Done
}

// waitDraining returns once a list has answers and a few seconds more, so
// that its chunks have reached every worker.
func (f *fairBench) waitDraining(c *client.Client, id string) {
	f.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for f.done(c, id) == 0 {
		require.True(f.t, time.Now().Before(deadline), "list %s has no answer after 2 minutes", id)
		time.Sleep(50 * time.Millisecond) // polling a status, with a deadline
	}
	time.Sleep(5 * time.Second) // settle: the rates are read in steady state
}

// progressDuring returns how many rows of a list were answered while fn
// ran, and how long it ran.
func (f *fairBench) progressDuring(c *client.Client, id string, fn func()) (int, time.Duration) {
	before, start := f.done(c, id), time.Now()
	fn()
	return f.done(c, id) - before, time.Since(start)
}

// rates measures rows/s over window of the lists as (of one caller, in all)
// and of list b, and domains/s in all.
func (f *fairBench) rates(window time.Duration, as []*client.Client, aIDs []string, bc *client.Client, b string) (rA, rB, total float64) {
	f.t.Helper()
	doneA := func() (n int) {
		for i, id := range aIDs {
			n += f.done(as[i], id)
		}
		return n
	}
	a0, b0, start := doneA(), f.done(bc, b), time.Now()
	time.Sleep(window) // the measuring window
	a1, b1 := doneA(), f.done(bc, b)
	secs := time.Since(start).Seconds()
	require.Less(f.t, b1, f.mustRows(bc, b), "list B ended inside the window: make it longer than BENCH_FAIR_WINDOW allows")
	rA, rB = float64(a1-a0)/secs, float64(b1-b0)/secs
	return rA, rB, rA + rB
}

func (f *fairBench) mustRows(c *client.Client, id string) int {
	s, err := c.List(context.Background(), id)
	require.NoError(f.t, err)
	return s.Rows
}

func (f *fairBench) cancel(c *client.Client, id string) {
	f.t.Helper()
	_, err := c.CancelList(context.Background(), id)
	require.NoError(f.t, err)
}

// envInts reads a comma-separated list of numbers, def when unset or bad.
func envInts(name string, def []int) []int {
	var out []int
	for _, f := range strings.Split(os.Getenv(name), ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return def
		}
		out = append(out, n)
	}
	return out
}

// fairAllRun is issue 26's deployment: `all` (the API and the workers in
// one process, as `go tool task up` runs it) with LLM_MAX_CONCURRENCY=32,
// and the interactive probe of fairRun, idle and while a list of
// BENCH_FAIR_ALL_ROWS (a million) rows drains, with the list's owner
// polling its status 50 times a second from a process of its own. Before the API had a pool of its
// own, 59 of 60 probes got 503 in the first minute.
func fairAllRun(t *testing.T) []benchRow {
	t.Helper()
	latency := envDuration("BENCH_LLM_LATENCY", 200*time.Millisecond)
	seconds := envDuration("BENCH_FAIR_SECONDS", 60*time.Second)
	n := envInt("BENCH_FAIR_ALL_ROWS", 1_000_000)
	const c = 32
	e := newE2E(t, llmtest.Steady(true, 4, "x", latency), map[string]string{
		"AUTH": "on", "LOG_LEVEL": "error",
		"LLM_MAX_CONCURRENCY": strconv.Itoa(c), "LLM_RATE_PER_MINUTE": strconv.Itoa(int(c/latency.Seconds()) * 60 * 10),
		"CALLER_RATE_PER_MINUTE": "1000000", "CALLER_MAX_QUEUED_DOMAINS": "1000000",
	})
	for _, k := range []string{"DB_MAX_CONNS", "LIST_WORKERS", "LIST_DOMAIN_CONCURRENCY"} {
		if v := os.Getenv("BENCH_" + k); v != "" {
			e.env[k] = v
		}
	}
	// A process of its own, as a user runs it: in this test process the
	// API would share its Go scheduler with the fake model's and the fake
	// search's servers and with the clients that measure it.
	all := e.startProcess(cli.RoleAll)
	keyA := e.apiKey("team-a")
	f := &fairBench{t: t, e: e, workers: 1, ideal: c / latency.Seconds(),
		app:   client.New(all.URL, e.apiKey("app")),
		teamA: client.New(all.URL, keyA),
	}
	var refused atomic.Int64 // answers the clients were told to retry (503s) or never got
	for _, cl := range []*client.Client{f.app, f.teamA} {
		cl.OnRetry = func(string, time.Duration) { refused.Add(1) }
	}

	waits0 := interactiveWaits(t, []string{all.URL})
	idle := f.interactive(seconds)
	waits1 := interactiveWaits(t, []string{all.URL})
	big := f.upload(f.teamA, "all", n)
	f.waitDraining(f.teamA, big)
	// The owner polls from a process of its own (bench_poller_test.go).
	p := startPoller(t, all.URL, keyA, big)
	var loaded []time.Duration
	cpu0 := readCPUWaits(t, all)
	pRan0, pQueued0 := threadTimes(p.cmd.Process.Pid)
	waits2 := interactiveWaits(t, []string{all.URL})
	drained, elapsed := f.progressDuring(f.teamA, big, func() { loaded = f.interactive(seconds) })
	waits3 := interactiveWaits(t, []string{all.URL})
	cpu := readCPUWaits(t, all).since(cpu0)
	pRan, pQueued := threadTimes(p.cmd.Process.Pid)
	status, retries := p.stop(t)
	refused.Add(int64(retries))
	f.cancel(f.teamA, big)
	within, served := statusWithin10ms(t, all.URL)
	waits := poolWaits(t, all.URL)
	p95Idle, p95Loaded, p99Status := percentile(idle, 0.95), percentile(loaded, 0.95), percentile(status, 0.99)
	setting := fmt.Sprintf("`all`, C=%d, L=%s", c, latency)
	return []benchRow{
		{"fair", fmt.Sprintf("%s: 10-domain jobs at 1/s beside a %s-row list draining: p95 completion", setting, count(n)),
			ms(p95Loaded), fmt.Sprintf("idle p95 %s (%.2f×); p50 %s; the list drained %.1f rows/s meanwhile; a job's model call waited for its slot %s on average (idle %s); %s",
				ms(p95Idle), float64(p95Loaded)/float64(p95Idle), ms(percentile(loaded, 0.5)), float64(drained)/elapsed.Seconds(),
				ms(waits3.mean(waits2)), ms(waits1.mean(waits0)), waits),
			"≤ 2× idle", verdict(p95Loaded <= 2*p95Idle)},
		{"fair", "  the same: answers retried (503) or not received, of the probe's and the list's polls",
			strconv.FormatInt(refused.Load(), 10), fmt.Sprintf("%d jobs, %d list polls", len(idle)+len(loaded), len(status)),
			"0", verdict(refused.Load() == 0)},
		{"fair", "  the same: GET /lists/{id} of the draining list, p99 (client, a process of its own)", ms(p99Status),
			fmt.Sprintf("p50 %s, max %s, %d requests; the poller's threads waited %.2f s per s run for a CPU; `all` meanwhile: %s",
				ms(percentile(status, 0.5)), ms(percentile(status, 1)), len(status), (pQueued-pQueued0).Seconds()/(pRan-pRan0).Seconds(), cpu),
			"≤ 10 ms", verdict(p99Status <= 10*time.Millisecond)},
		{"fair", "  the same, answered within 10 ms (server, the API's own histogram)",
			fmt.Sprintf("%.1f%%", 100*float64(within)/float64(served)), fmt.Sprintf("%d requests", served), "≥ 99%",
			verdict(float64(within) >= 0.99*float64(served))},
	}
}

// waitCounts are counts of a histogram of interactive model calls' waits
// (domainclass_llm_wait_seconds), summed over worker processes.
type waitCounts struct{ all, within250ms, within500ms, sum float64 }

// mean is the mean wait of the calls since before.
func (w waitCounts) mean(before waitCounts) time.Duration {
	if n := w.all - before.all; n > 0 {
		return time.Duration((w.sum - before.sum) / n * float64(time.Second))
	}
	return 0
}

func (w waitCounts) since(before waitCounts) string {
	n := w.all - before.all
	return fmt.Sprintf("%.0f / %.0f of %.0f", n-(w.within250ms-before.within250ms), n-(w.within500ms-before.within500ms), n)
}

// interactiveWaits reads the interactive calls' wait histogram of each
// worker process and adds them up.
func interactiveWaits(t *testing.T, urls []string) waitCounts {
	t.Helper()
	var w waitCounts
	const name = "domainclass_llm_wait_seconds"
	for _, u := range urls {
		for _, line := range metricLines(t, u) {
			series, value, ok := strings.Cut(line, " ")
			v, err := strconv.ParseFloat(value, 64)
			if !ok || err != nil || !strings.Contains(series, `class="interactive"`) {
				continue
			}
			switch {
			case strings.HasPrefix(series, name+"_count"):
				w.all += v
			case strings.HasPrefix(series, name+"_sum"):
				w.sum += v
			case strings.HasPrefix(series, name+"_bucket") && strings.Contains(series, `le="0.25"`):
				w.within250ms += v
			case strings.HasPrefix(series, name+"_bucket") && strings.Contains(series, `le="0.5"`):
				w.within500ms += v
			}
		}
	}
	return w
}

// processCalls are a worker process's counters: its model calls by class,
// the requests of its share it left unused, and its share times the
// seconds it held it.
type processCalls struct{ list, interactive, unused, held float64 }

// since is the counters' rates from before to p, over d.
func (p processCalls) since(before processCalls, d time.Duration) processCalls {
	s := d.Seconds()
	return processCalls{list: (p.list - before.list) / s, interactive: (p.interactive - before.interactive) / s,
		unused: (p.unused - before.unused) / s, held: (p.held - before.held) / s}
}

// perProcess reads each worker process's counters.
func perProcess(t *testing.T, urls []string) []processCalls {
	t.Helper()
	out := make([]processCalls, len(urls))
	for i, u := range urls {
		for _, line := range metricLines(t, u) {
			series, value, _ := strings.Cut(line, " ")
			var field *float64
			switch series {
			case `domainclass_llm_wait_seconds_count{class="list"}`:
				field = &out[i].list
			case `domainclass_llm_wait_seconds_count{class="interactive"}`:
				field = &out[i].interactive
			case `domainclass_llm_budget_unused_total{kind="requests"}`:
				field = &out[i].unused
			case `domainclass_llm_budget_share_seconds_total`:
				field = &out[i].held
			default:
				continue
			}
			v, err := strconv.ParseFloat(value, 64)
			require.NoError(t, err, line)
			*field = v
		}
	}
	return out
}

// poolWaits reads a process's pool metrics: for each pool, the acquires
// that waited for a connection and how long they waited in all.
func poolWaits(t *testing.T, base string) string {
	t.Helper()
	waits, seconds := map[string]float64{}, map[string]float64{}
	for _, line := range metricLines(t, base) {
		for prefix, m := range map[string]map[string]float64{
			"domainclass_db_pool_acquire_waits_total{":        waits,
			"domainclass_db_pool_acquire_wait_seconds_total{": seconds,
		} {
			if rest, ok := strings.CutPrefix(line, prefix+`pool="`); ok {
				name, value, _ := strings.Cut(rest, `"} `)
				m[name], _ = strconv.ParseFloat(value, 64)
			}
		}
	}
	var parts []string
	for _, name := range []string{cli.RoleAPI, cli.RoleWorker, "lists"} {
		parts = append(parts, fmt.Sprintf("%s %.0f (%.1f s)", name, waits[name], seconds[name]))
	}
	return "pool waits " + strings.Join(parts, ", ")
}
