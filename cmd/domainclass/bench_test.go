//go:build bench

package main

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/classifier/llm"
	"github.com/domainclass/domainclass/classifier/llm/llmtest"
	"github.com/domainclass/domainclass/cli"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/db/dbtest"
	"github.com/domainclass/domainclass/internal/apikey"
	"github.com/domainclass/domainclass/internal/logging"
	"github.com/domainclass/domainclass/jobs"
)

// The benchmark harness: `go tool task bench`. It measures the service's
// bars on this machine (accept, drain, cached, memory), each against its
// comparison in the same run, prints one table and rewrites the table in
// docs/BENCHMARKS.md.
//
// Knobs (environment): BENCH_SECONDS (accept load per step, default 5),
// BENCH_LLM_LATENCY (default 200ms), BENCH_LLM_CONCURRENCY (default 16),
// BENCH_MEMORY_SIZES (default 1000,10000,100000).

type benchRow struct {
	Section, Measure, Value, Compared, Bar, Verdict string
}

func verdict(ok bool) string {
	if ok {
		return "meets"
	}
	return "MISSES"
}

func TestBench(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	start := time.Now()
	var rows []benchRow
	add := func(r ...benchRow) {
		rows = append(rows, r...)
		for _, x := range r {
			t.Logf("%-8s %-58s %-22s %-30s %s", x.Section, x.Measure, x.Value, x.Compared, x.Verdict)
		}
	}

	only := os.Getenv("BENCH_ONLY") // e.g. "accept" while profiling
	for _, part := range []struct {
		name string
		run  func(*testing.T) []benchRow
	}{{"accept", benchAccept}, {"drain", benchDrain}, {"cached", benchCached}, {"memory", benchMemory}, {"lists", benchLists},
		{"fair", benchFair}, {"economy", benchEconomy}, {"webhooks", benchWebhooks}, {"tracing", benchTracing},
		{"capacity", benchCapacity}, {"answered", benchAnswered}, {"batchstore", benchBatchStore}} {
		if only == "" || only == part.name {
			// A subtest each, so that a section's processes and their
			// connections are gone before the next section starts.
			var got []benchRow
			t.Run(part.name, func(t *testing.T) { got = part.run(t) })
			add(got...)
		}
	}

	table := renderTable(rows)
	fmt.Println()
	fmt.Print(table)
	fmt.Printf("\nbench took %s\n", time.Since(start).Round(time.Second))
	if path := os.Getenv("BENCH_DOC"); path != "" && only == "" {
		require.NoError(t, writeBetweenMarkers(path, "bench", machineLine()+"\n\n"+table))
	}
}

// --- accept -----------------------------------------------------------------

type loadStats struct {
	requests  int
	byStatus  map[int]int
	errors    int
	latencies []time.Duration
	elapsed   time.Duration
}

func (s loadStats) rate() float64 { return float64(s.requests) / s.elapsed.Seconds() }

// merge adds up two runs of the same load.
func merge(a, b loadStats) loadStats {
	m := loadStats{requests: a.requests + b.requests, errors: a.errors + b.errors, elapsed: a.elapsed + b.elapsed,
		byStatus: map[int]int{}, latencies: append(append([]time.Duration{}, a.latencies...), b.latencies...)}
	for _, s := range []loadStats{a, b} {
		for c, n := range s.byStatus {
			m.byStatus[c] += n
		}
	}
	return m
}

func (s loadStats) pct(p float64) time.Duration {
	if len(s.latencies) == 0 {
		return 0
	}
	slices.Sort(s.latencies)
	return s.latencies[min(len(s.latencies)-1, int(math.Ceil(p*float64(len(s.latencies))))-1)]
}

// load runs clients goroutines, each sending requests back to back for d
// (after a one-second warm-up that is not counted).
func load(clients int, d time.Duration, send func(c *http.Client, worker, i int) (int, error)) loadStats {
	transport := &http.Transport{MaxIdleConnsPerHost: clients, MaxIdleConns: clients, IdleConnTimeout: time.Minute}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: 30 * time.Second}
	run := func(d time.Duration) loadStats {
		var (
			mu  sync.Mutex
			all = loadStats{byStatus: map[int]int{}}
			wg  sync.WaitGroup
		)
		deadline := time.Now().Add(d)
		begin := time.Now()
		for w := range clients {
			wg.Go(func() {
				var lat []time.Duration
				codes := map[int]int{}
				errs := 0
				for i := 0; time.Now().Before(deadline); i++ {
					t0 := time.Now()
					code, err := send(client, w, i)
					lat = append(lat, time.Since(t0))
					if err != nil {
						errs++
					} else {
						codes[code]++
					}
				}
				mu.Lock()
				defer mu.Unlock()
				all.latencies = append(all.latencies, lat...)
				all.requests += len(lat)
				all.errors += errs
				for c, n := range codes {
					all.byStatus[c] += n
				}
			})
		}
		wg.Wait()
		all.elapsed = time.Since(begin)
		return all
	}
	run(time.Second)
	return run(d)
}

func post(c *http.Client, url, key string, body []byte) (int, error) {
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

func tenDomains(worker, i int) []byte {
	var b strings.Builder
	b.WriteString(`{"domains": [`)
	for k := range 10 {
		if k > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"https://www.w%d-r%d-d%d.com/about"`, worker, i, k)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

func benchAccept(t *testing.T) []benchRow {
	ctx := context.Background()
	seconds := time.Duration(envInt("BENCH_SECONDS", 5)) * time.Second
	e := newE2E(t, nil, map[string]string{"AUTH": "on", "LOG_LEVEL": "error"})
	api := e.start(cli.RoleAPI)

	// 1000 callers (each client cycles through them), without a rate limit
	// in the way: what is measured is the accept path, limits checked.
	keys := make([]string, 1000)
	for i := range keys {
		key, hash := apikey.New()
		require.NoError(t, db.APIKeyInsert(ctx, api.DB.Pool, db.APIKey{Name: fmt.Sprintf("caller-%04d", i), Prefix: key[:8],
			RatePerMinute: 1_000_000}, hash))
		keys[i] = key
	}

	// The floor: a bare gin handler in this same binary that writes the body
	// in one single-row INSERT transaction, on a pool of the same size.
	floorDB, err := db.Open(ctx, db.Config{URL: dbtest.URL(), Schema: e.schema, MaxConns: api.DB.Pool.Config().MaxConns})
	require.NoError(t, err)
	defer floorDB.Close()
	_, err = floorDB.Pool.Exec(ctx, `CREATE TABLE bench_floor (id uuid PRIMARY KEY, body text NOT NULL, created_at timestamptz NOT NULL DEFAULT now())`)
	require.NoError(t, err)
	r := gin.New()
	r.POST("/floor", func(c *gin.Context) {
		body, _ := io.ReadAll(c.Request.Body)
		err := pgx.BeginFunc(c.Request.Context(), floorDB.Pool, func(tx pgx.Tx) error {
			_, err := tx.Exec(c.Request.Context(), `INSERT INTO bench_floor (id, body) VALUES ($1, $2)`, uuid.New(), string(body))
			return err
		})
		if err != nil {
			c.Status(http.StatusServiceUnavailable)
			return
		}
		c.Status(http.StatusAccepted)
	})
	// A second bare handler that only inserts River's job (InsertTx in its
	// own transaction): what River's insert costs, which accept must pay. It
	// has a schema of its own, so that its jobs do not grow the river_job
	// table (and its indexes) that accept inserts into.
	riverSchema := dbtest.Schema(t)
	riverDB, err := db.Open(ctx, db.Config{URL: dbtest.URL(), Schema: riverSchema, MaxConns: api.DB.Pool.Config().MaxConns})
	require.NoError(t, err)
	defer riverDB.Close()
	riverOnly, err := jobs.NewClient(riverDB.Pool, jobs.ClientConfig{Settings: jobs.DefaultSettings(), Schema: riverSchema})
	require.NoError(t, err)
	r.POST("/river", func(c *gin.Context) {
		_, _ = io.ReadAll(c.Request.Body)
		err := pgx.BeginFunc(c.Request.Context(), riverDB.Pool, func(tx pgx.Tx) error {
			_, err := riverOnly.InsertTx(c.Request.Context(), tx, jobs.ClassifyArgs{JobID: uuid.NewString()}, &river.InsertOpts{Queue: "bench_river_only"})
			return err
		})
		if err != nil {
			c.Status(http.StatusServiceUnavailable)
			return
		}
		c.Status(http.StatusAccepted)
	})
	floor := &http.Server{Handler: r}
	base := serveOnLoopback(t, floor)
	floorURL, riverURL := base+"/floor", base+"/river"
	acceptURL := api.APIURL() + "/domains/classify"

	var rows []benchRow
	for _, clients := range []int{50, 200} {
		floorLoad := func() loadStats {
			return load(clients, seconds, func(c *http.Client, w, i int) (int, error) { return post(c, floorURL, "", tenDomains(w, i)) })
		}
		riverLoad := func() loadStats {
			return load(clients, seconds, func(c *http.Client, w, i int) (int, error) { return post(c, riverURL, "", tenDomains(w, i)) })
		}
		acceptLoad := func() loadStats {
			return load(clients, seconds, func(c *http.Client, w, i int) (int, error) {
				return post(c, acceptURL, keys[(w*7919+i)%len(keys)], tenDomains(w, i))
			})
		}
		// A B C C B A: each runs once early and once late, so that drift
		// (tables growing, the machine's other load) falls on all alike.
		f1, rv1, a1 := floorLoad(), riverLoad(), acceptLoad()
		a2, rv2, f2 := acceptLoad(), riverLoad(), floorLoad()
		f, rv, a := merge(f1, f2), merge(rv1, rv2), merge(a1, a2)
		require.Zero(t, a.errors+f.errors+rv.errors, "connection errors under load")
		require.Equal(t, a.requests, a.byStatus[http.StatusAccepted], "every accept answered 202: %v", a.byStatus)
		require.Equal(t, rv.requests, rv.byStatus[http.StatusAccepted], "every River-only insert answered 202: %v", rv.byStatus)
		ratio := a.rate() / f.rate()
		rows = append(rows,
			benchRow{"accept", fmt.Sprintf("POST /domains/classify, 10 domains, %d clients: req/s", clients),
				fmt.Sprintf("%.0f/s", a.rate()), fmt.Sprintf("floor %.0f/s (%.0f%%)", f.rate(), 100*ratio),
				"≥ 50% of floor", verdict(ratio >= 0.5)},
			benchRow{"accept", fmt.Sprintf("  bare River InsertTx handler, %d clients: req/s", clients),
				fmt.Sprintf("%.0f/s", rv.rate()), fmt.Sprintf("floor %.0f/s (%.0f%%); accept is %.0f%% of it", f.rate(), 100*rv.rate()/f.rate(), 100*a.rate()/rv.rate()),
				"-", "-"},
			benchRow{"accept", fmt.Sprintf("POST /domains/classify, %d clients: p50 / p99", clients),
				fmt.Sprintf("%s / %s", ms(a.pct(0.5)), ms(a.pct(0.99))), fmt.Sprintf("floor %s / %s", ms(f.pct(0.5)), ms(f.pct(0.99))),
				barIf(clients == 200, "p99 ≤ 25 ms"), verdictIf(clients == 200, a.pct(0.99) <= 25*time.Millisecond)},
		)
	}

	// The queued-domains check against one caller's backlog: that caller
	// with 100k jobs (1M domains) queued, and another with none, 50 clients
	// each, alternated; the limit above both, so every request is checked
	// and accepted. All of one caller's accepts also queue for its one
	// counter row, in both steps alike.
	keyOf := map[string]string{}
	for _, name := range []string{"backlog", "fresh"} {
		key, hash := apikey.New()
		require.NoError(t, db.APIKeyInsert(ctx, api.DB.Pool, db.APIKey{Name: name, Prefix: key[:8],
			RatePerMinute: 1_000_000, MaxQueuedDomains: 100_000_000}, hash))
		keyOf[name] = key
	}
	_, err = api.DB.Pool.Exec(ctx, `
		INSERT INTO classify_job (id, caller, classifier, inputs, domains)
		SELECT gen_random_uuid(), 'backlog', 'cpg', d, d
		FROM generate_series(1, 100000) g,
		     LATERAL (SELECT array_agg('b' || g || '-' || k || '.com') AS d FROM generate_series(1, 10) k) a`)
	require.NoError(t, err)
	_, err = api.DB.Pool.Exec(ctx, `INSERT INTO caller_queue (caller, domains) VALUES ('backlog', 1000000)
		ON CONFLICT (caller) DO UPDATE SET domains = caller_queue.domains + 1000000`)
	require.NoError(t, err)
	_, err = api.DB.Pool.Exec(ctx, `ANALYZE classify_job`)
	require.NoError(t, err)
	callerLoad := func(name string) loadStats {
		return load(50, seconds, func(c *http.Client, w, i int) (int, error) {
			return post(c, acceptURL, keyOf[name], tenDomains(w+1000, i))
		})
	}
	n1, b1 := callerLoad("fresh"), callerLoad("backlog")
	b2, n2 := callerLoad("backlog"), callerLoad("fresh")
	none, backlog := merge(n1, n2), merge(b1, b2)
	require.Equal(t, backlog.requests, backlog.byStatus[http.StatusAccepted], "every accept answered 202: %v", backlog.byStatus)
	require.Equal(t, none.requests, none.byStatus[http.StatusAccepted], "every accept answered 202: %v", none.byStatus)
	backlogRatio := backlog.rate() / none.rate()
	rows = append(rows, benchRow{"accept",
		"one caller's accepts with 100k of its jobs queued ÷ with none, 50 clients: req/s",
		fmt.Sprintf("%.2f", backlogRatio), fmt.Sprintf("%.0f/s with the backlog, %.0f/s without", backlog.rate(), none.rate()),
		"≥ 0.9", verdict(backlogRatio >= 0.9)})
	return rows
}

func barIf(cond bool, bar string) string {
	if cond {
		return bar
	}
	return "-"
}

func verdictIf(cond, ok bool) string {
	if !cond {
		return "-"
	}
	return verdict(ok)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

func serveOnLoopback(t *testing.T, srv *http.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

// --- drain ------------------------------------------------------------------

func benchDrain(t *testing.T) []benchRow {
	latency := envDuration("BENCH_LLM_LATENCY", 200*time.Millisecond)
	c := envInt("BENCH_LLM_CONCURRENCY", 16)
	ideal := float64(c) / latency.Seconds()

	var rows []benchRow
	totalCalls, totalDistinct := 0, 0
	for _, run := range []struct {
		name      string
		perMinute int
	}{
		{"rate above C/L", int(ideal*60) * 10},
		{"rate below C/L", int(ideal * 60 * 3 / 8)},
	} {
		distinct := int(ideal * 8) // about 8 s of work at C/L
		if run.perMinute < int(ideal*60) {
			distinct = run.perMinute / 60 * 8
		}
		distinct -= distinct % 10
		res := drainOnce(t, c, latency, run.perMinute, distinct)
		totalCalls += res.calls
		totalDistinct += distinct
		limitPerSecond := float64(run.perMinute) / 60
		expected := math.Min(ideal, limitPerSecond)
		frac := res.perSecond / expected
		rows = append(rows,
			benchRow{"drain", fmt.Sprintf("C=%d, L=%s, %s (%d/min): distinct domains/s", c, latency, run.name, run.perMinute),
				fmt.Sprintf("%.1f/s", res.perSecond), fmt.Sprintf("min(C/L, rate) = %.1f/s (%.0f%%)", expected, 100*frac),
				"≥ 90% of C/L", verdict(frac >= 0.9)},
			benchRow{"drain", fmt.Sprintf("  most model calls started in any 1 s (%s)", run.name),
				fmt.Sprintf("%d", res.maxPerSecond), fmt.Sprintf("limit %.0f/s (token bucket, burst 1)", limitPerSecond),
				"never above the limit", verdict(float64(res.maxPerSecond) <= math.Ceil(limitPerSecond)+1)},
		)
	}
	rows = append(rows, benchRow{"cost", "model calls per distinct (domain, classifier), drain runs (every domain in 2 jobs)",
		fmt.Sprintf("%.2f", float64(totalCalls)/float64(totalDistinct)), fmt.Sprintf("%d calls, %d domains", totalCalls, totalDistinct),
		"= 1.00", verdict(totalCalls == totalDistinct)})
	return rows
}

type drainResult struct {
	perSecond    float64
	maxPerSecond int
	calls        int
}

// drainOnce queues jobs for distinct domains (each in two jobs, so that
// concurrent jobs share domains), starts a worker, and measures how fast the
// model calls drain them.
func drainOnce(t *testing.T, c int, latency time.Duration, perMinute, distinct int) drainResult {
	e := newE2E(t, llmtest.Steady(true, 4, "x", latency), map[string]string{
		"LLM_MAX_CONCURRENCY": strconv.Itoa(c), "LLM_RATE_PER_MINUTE": strconv.Itoa(perMinute),
		"LOG_LEVEL": "error", "CALLER_RATE_PER_MINUTE": "1000000", "CALLER_MAX_QUEUED_DOMAINS": "1000000",
	})
	api := e.start(cli.RoleAPI)
	jobsWanted := distinct * 2 / 10
	var ids []uuid.UUID
	for j := range jobsWanted {
		var ds []string
		for k := range 10 {
			// Domains 0..distinct-1, each in two jobs half the queue apart.
			ds = append(ds, fmt.Sprintf("drain-%d.com", (j*10+k)%distinct))
		}
		ids = append(ids, createJob(t, api, ds))
	}
	e.start(cli.RoleWorker)
	waitAllCompleted(t, api.DB, len(ids), 5*time.Minute)
	end := time.Now()

	starts := e.llm.Starts()
	require.NotEmpty(t, starts)
	first := slices.MinFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	maxWin := 0
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	for i, lo := 0, 0; i < len(starts); i++ {
		for starts[i].Sub(starts[lo]) >= time.Second {
			lo++
		}
		maxWin = max(maxWin, i-lo+1)
	}
	return drainResult{perSecond: float64(distinct) / end.Sub(first).Seconds(), maxPerSecond: maxWin, calls: e.llm.Total()}
}

// createJob writes a job as the API does (jobs.AcceptJob: River's job, then ours, in
// one transaction), without going through HTTP.
func createJob(t *testing.T, api *Main, domains []string) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	id := uuid.New()
	normalized, bad := classifier.NormalizeDomains(domains)
	require.Empty(t, bad)
	tx, err := api.DB.Pool.Begin(ctx)
	require.NoError(t, err)
	defer db.Rollback(ctx, tx)
	require.NoError(t, jobs.AcceptJob(ctx, tx, api.River, db.JobInsertParams{ID: id, Caller: "bench", Classifier: "cpg",
		Domains: normalized}, nil))
	require.NoError(t, tx.Commit(ctx))
	return id
}

func waitAllCompleted(t *testing.T, d *db.DB, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		var done int
		require.NoError(t, d.Pool.QueryRow(context.Background(), `SELECT count(*) FROM classify_job WHERE status = 'COMPLETED'`).Scan(&done))
		if done >= n {
			return
		}
		require.True(t, time.Now().Before(deadline), "only %d of %d jobs completed", done, n)
		time.Sleep(20 * time.Millisecond) // polling a count, with a deadline
	}
}

// --- cached path vs River's no-op throughput --------------------------------

func benchCached(t *testing.T) []benchRow {
	ctx := context.Background()
	const cachedJobs = 600
	e := newE2E(t, nil, map[string]string{"LOG_LEVEL": "error"})
	api := e.start(cli.RoleAPI)
	_, err := api.DB.Pool.Exec(ctx, `
		WITH p AS (
			INSERT INTO provenance (id, model, prompt_version, search, evidence)
			SELECT md5('cached-' || g)::uuid, 'bench', 'v1', 'homepage',
			       jsonb_build_array(jsonb_build_object('url', 'https://cached-' || g || '.com/', 'title', 'Cached ' || g,
			                                            'snippet', 'Makes and sells packaged goods under its own brands.'))
			FROM generate_series(0, $1 - 1) g
		)
		INSERT INTO result (domain, classifier, status, answer, confidence, reasoning, provenance_id, classified_at)
		SELECT 'cached-' || g || '.com', 'cpg', 'COMPLETED', true, 5, 'Cached.', md5('cached-' || g)::uuid, now()
		FROM generate_series(0, $1 - 1) g`, cachedJobs*10)
	require.NoError(t, err)
	for j := range cachedJobs {
		var ds []string
		for k := range 10 {
			ds = append(ds, fmt.Sprintf("cached-%d.com", j*10+k))
		}
		createJob(t, api, ds)
	}
	begin := time.Now()
	e.start(cli.RoleWorker)
	waitAllCompleted(t, api.DB, cachedJobs, 5*time.Minute)
	cachedPerSecond := float64(cachedJobs*10) / time.Since(begin).Seconds()
	require.Zero(t, e.llm.Total(), "every domain came from the cache")

	riverPerSecond := riverNoopThroughput(t, jobs.DefaultSettings().ClassifyWorkers, 2_000)
	ratio := cachedPerSecond / riverPerSecond
	return []benchRow{{"cached", fmt.Sprintf("cached domains/s (%d jobs of 10, CLASSIFY_WORKERS=%d)", cachedJobs, jobs.DefaultSettings().ClassifyWorkers),
		fmt.Sprintf("%.0f/s", cachedPerSecond), fmt.Sprintf("River no-op %.0f jobs/s (%.0f%%)", riverPerSecond, 100*ratio),
		"≥ 25% of River no-op", verdict(ratio >= 0.25)}}
}

type noopArgs struct{ N int }

func (noopArgs) Kind() string { return "bench_noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	done *atomic.Int64
}

func (w *noopWorker) Work(context.Context, *river.Job[noopArgs]) error {
	w.done.Add(1)
	return nil
}

// riverNoopThroughput burns down n pre-inserted no-op jobs with River's
// defaults and the classify queue's MaxWorkers, on a schema of the same
// database.
func riverNoopThroughput(t *testing.T, maxWorkers, n int) float64 {
	ctx := context.Background()
	schema := dbtest.Schema(t)
	d, err := db.Open(ctx, db.Config{URL: dbtest.URL(), Schema: schema, MaxConns: int32(maxWorkers + 10)})
	require.NoError(t, err)
	defer d.Close()
	var done atomic.Int64
	workers := river.NewWorkers()
	river.AddWorker(workers, &noopWorker{done: &done})
	client, err := river.NewClient(riverpgxv5.New(d.Pool), &river.Config{
		Schema: schema, Workers: workers, Queues: map[string]river.QueueConfig{jobs.QueueClassify: {MaxWorkers: maxWorkers}},
		Logger: logging.Library(DefaultConfig().NewLogger(io.Discard), "info"),
	})
	require.NoError(t, err)
	params := make([]river.InsertManyParams, n)
	for i := range params {
		params[i] = river.InsertManyParams{Args: noopArgs{N: i}, InsertOpts: &river.InsertOpts{Queue: jobs.QueueClassify}}
	}
	_, err = client.InsertManyFast(ctx, params)
	require.NoError(t, err)
	begin := time.Now()
	require.NoError(t, client.Start(ctx))
	deadline := time.Now().Add(2 * time.Minute)
	for done.Load() < int64(n) {
		require.True(t, time.Now().Before(deadline), "River burned down only %d of %d", done.Load(), n)
		time.Sleep(5 * time.Millisecond)
	}
	elapsed := time.Since(begin)
	require.NoError(t, client.Stop(ctx))
	return float64(n) / elapsed.Seconds()
}

// --- memory -----------------------------------------------------------------

func benchMemory(t *testing.T) []benchRow {
	ctx := context.Background()
	bin := filepath.Join(t.TempDir(), "domainclass")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Stderr = os.Stderr
	require.NoError(t, build.Run())

	var sizes []int
	for _, s := range strings.Split(cmp.Or(os.Getenv("BENCH_MEMORY_SIZES"), "1000,10000,100000"), ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		require.NoError(t, err)
		sizes = append(sizes, n)
	}
	rss := map[int]float64{}
	for _, n := range sizes {
		release := make(chan struct{})
		e := newE2E(t, func(llmtest.Request) llmtest.Reply {
			return llmtest.Reply{Wait: release} // hold every job, so all N stay queued
		}, map[string]string{"LOG_LEVEL": "error"})
		t.Cleanup(func() { close(release) })
		queueJobs(t, ctx, e, n)

		cmd := exec.Command(bin, "worker")
		cmd.Env = append(os.Environ(), e.environ()...)
		require.NoError(t, cmd.Start())
		c := llm.DefaultMaxConcurrency
		deadline := time.Now().Add(time.Minute)
		for e.llm.Total() < min(n, c) {
			require.True(t, time.Now().Before(deadline), "the worker never filled its model slots")
			time.Sleep(20 * time.Millisecond)
		}
		var peak float64
		for range 15 { // 3 s of samples, the busiest one counts
			peak = max(peak, vmRSS(t, cmd.Process.Pid))
			time.Sleep(200 * time.Millisecond)
		}
		rss[n] = peak
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	lo, hi := math.Inf(1), 0.0
	var parts []string
	for _, n := range sizes {
		lo, hi = math.Min(lo, rss[n]), math.Max(hi, rss[n])
		parts = append(parts, fmt.Sprintf("%s: %.1f MiB", count(n), rss[n]))
	}
	spread := (hi - lo) / lo
	return []benchRow{{"memory", "worker RSS with jobs queued (" + strings.Join(parts, ", ") + ")",
		fmt.Sprintf("%.1f–%.1f MiB", lo, hi), fmt.Sprintf("spread %+.0f%%", 100*spread), "flat (±20%)", verdict(spread <= 0.2)}}
}

func count(n int) string {
	if n >= 1000 {
		return fmt.Sprintf("%dk", n/1000)
	}
	return strconv.Itoa(n)
}

// queueJobs writes n one-domain jobs and their River jobs in bulk (COPY).
func queueJobs(t *testing.T, ctx context.Context, e *e2e, n int) {
	t.Helper()
	d, err := db.Open(ctx, db.Config{URL: dbtest.URL(), Schema: e.schema, MaxConns: 4})
	require.NoError(t, err)
	defer d.Close()
	client, err := jobs.NewClient(d.Pool, jobs.ClientConfig{Settings: jobs.DefaultSettings(), Schema: e.schema})
	require.NoError(t, err)
	jobRows := make([][]any, n)
	params := make([]river.InsertManyParams, n)
	for i := range jobRows {
		id := uuid.New()
		domain := fmt.Sprintf("queued-%d.com", i)
		jobRows[i] = []any{id, "bench", "cpg", []string{domain}, []string{domain}}
		params[i] = river.InsertManyParams{Args: jobs.ClassifyArgs{JobID: id.String()}}
	}
	_, err = d.Pool.CopyFrom(ctx, pgx.Identifier{"classify_job"}, []string{"id", "caller", "classifier", "inputs", "domains"}, pgx.CopyFromRows(jobRows))
	require.NoError(t, err)
	for i := 0; i < n; i += 10_000 {
		_, err := client.InsertManyFast(ctx, params[i:min(i+10_000, n)])
		require.NoError(t, err)
	}
}

func vmRSS(t *testing.T, pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			kb, err := strconv.ParseFloat(f[1], 64)
			require.NoError(t, err)
			return kb / 1024
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// --- output -----------------------------------------------------------------

func renderTable(rows []benchRow) string {
	var b strings.Builder
	b.WriteString("| section | measure | value | compared with (same run) | bar | verdict |\n|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", r.Section, r.Measure, r.Value, r.Compared, r.Bar, r.Verdict)
	}
	return b.String()
}

func machineLine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "model name") {
				model = strings.TrimSpace(strings.SplitN(line, ":", 2)[1])
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		f := strings.Fields(strings.SplitN(string(b), "\n", 2)[0])
		if kb, err := strconv.ParseFloat(f[1], 64); err == nil {
			mem = fmt.Sprintf("%.0f GiB", kb/1024/1024)
		}
	}
	var pg string
	if out, err := exec.Command("psql", "--version").Output(); err == nil {
		pg = strings.TrimSpace(string(out))
	}
	return fmt.Sprintf("Run %s on %d cores (%s), %s memory, %s, %s; command `go tool task bench`.",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), runtime.NumCPU(), model, mem, runtime.Version(), pg)
}

// writeBetweenMarkers replaces what stands between <!-- name:begin --> and
// <!-- name:end --> in path.
func writeBetweenMarkers(path, name, content string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	begin, end := "<!-- "+name+":begin -->", "<!-- "+name+":end -->"
	s := string(b)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %s … %s markers", path, begin, end)
	}
	return os.WriteFile(path, []byte(s[:i+len(begin)]+"\n"+content+"\n"+s[j:]), 0o644)
}
