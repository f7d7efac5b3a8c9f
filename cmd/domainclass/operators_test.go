package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier/llm/llmtest"
	"github.com/domainclass/domainclass/cli"
	"github.com/domainclass/domainclass/db/dbtest"
)

// scrape returns the text of a /metrics page.
func scrape(t *testing.T, baseURL string) string {
	t.Helper()
	resp, err := http.Get(baseURL + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// metric returns the value of the series `name{labels}` (labels in
// Prometheus' sorted order), or 0 when it is absent.
func metric(t *testing.T, page, series string) float64 {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`)
	m := re.FindStringSubmatch(page)
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	return v
}

func TestOperators(t *testing.T) {
	t.Parallel()

	t.Run("MetricsMoveAsJobsRun", func(t *testing.T) {
		t.Parallel()
		release := make(chan struct{})
		e := newE2E(t, func(r llmtest.Request) llmtest.Reply {
			a := llmtest.Answer(r.Domain != "crm.io", 4, "x")
			if r.Domain == "slow.com" {
				a.Wait = release
			}
			return a
		}, nil)
		e.tune = func(c *Config) { c.Queue.QueueMetricsInterval = time.Millisecond }
		e.start(cli.RoleAPI)
		w := e.start(cli.RoleWorker)

		before := scrape(t, w.WorkerURL())
		require.Zero(t, metric(t, before, `domainclass_domain_results_total{classifier="cpg",outcome="completed",source="llm"}`))
		require.Contains(t, before, `domainclass_queue_jobs{queue="classify",state="running"} 0`)

		id := e.submit("acme.com", "crm.io", "slow.com")
		require.Eventually(t, func() bool {
			page := scrape(t, w.WorkerURL())
			return metric(t, page, `domainclass_queue_jobs{queue="classify",state="running"}`) == 1 &&
				metric(t, page, `domainclass_domain_results_total{classifier="cpg",outcome="completed",source="llm"}`) == 2 &&
				metric(t, page, `domainclass_llm_slots_in_use{class="interactive"}`) == 1
		}, dbtest.Patience(), 20*time.Millisecond, "while the job runs: running=1, two domains answered, slow.com's call holds a slot")
		require.Zero(t, metric(t, scrape(t, w.WorkerURL()), `domainclass_llm_slots_in_use{class="list"}`))
		close(release)
		e.wait(id, "COMPLETED", dbtest.Patience())
		e.wait(e.submit("acme.com"), "COMPLETED", dbtest.Patience())

		page := scrape(t, w.WorkerURL())
		require.Equal(t, 3.0, metric(t, page, `domainclass_domain_results_total{classifier="cpg",outcome="completed",source="llm"}`))
		require.Equal(t, 1.0, metric(t, page, `domainclass_domain_results_total{classifier="cpg",outcome="completed",source="cache"}`))
		require.Equal(t, 3.0, metric(t, page, `domainclass_llm_requests_total{status="200"}`))
		require.Equal(t, 3.0, metric(t, page, `domainclass_llm_request_duration_seconds_count`))
		require.Equal(t, 3.0, metric(t, page, `domainclass_llm_wait_seconds_count{class="interactive"}`), "a job's calls are interactive")
		require.Zero(t, metric(t, page, `domainclass_llm_wait_seconds_count{class="list"}`))
		require.Zero(t, metric(t, page, `domainclass_llm_slots_in_use{class="interactive"}`), "every slot given back")
		require.Equal(t, 360.0, metric(t, page, `domainclass_llm_tokens_total{kind="prompt"}`))
		require.Equal(t, 75.0, metric(t, page, `domainclass_llm_tokens_total{kind="completion"}`))
		require.Equal(t, 2.0, metric(t, page, `domainclass_jobs_ended_total{status="COMPLETED"}`))
		require.Eventually(t, func() bool {
			page := scrape(t, w.WorkerURL())
			return metric(t, page, `domainclass_queue_jobs{queue="classify",state="completed"}`) == 2 &&
				metric(t, page, `domainclass_queue_jobs{queue="classify",state="running"}`) == 0
		}, dbtest.Patience(), 20*time.Millisecond)

		api := scrape(t, e.api.APIURL())
		require.Equal(t, 2.0, metric(t, api, `domainclass_http_requests_total{code="202",method="POST",route="/domains/classify"}`))
		require.Positive(t, metric(t, api, `domainclass_http_requests_total{code="200",method="GET",route="/domains/classify/:job_id"}`))
		require.NotContains(t, api, "domainclass_llm_requests_total", "the api role runs no jobs")
	})

	t.Run("ExpiredIdempotencyKeysArePurged", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t, nil, nil)
		api := e.start(cli.RoleAPI)
		for _, key := range []string{"old", "new"} {
			req, _ := http.NewRequest(http.MethodPost, api.APIURL()+"/domains/classify", strings.NewReader(`{"domains":["a.com"]}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", key)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, http.StatusAccepted, resp.StatusCode)
		}
		_, err := api.DB.Pool.Exec(context.Background(), `UPDATE idempotency_key SET created_at = now() - interval '25 hours' WHERE key = 'old'`)
		require.NoError(t, err)
		e.start(cli.RoleWorker) // River's leader enqueues the purge at start, then hourly
		require.Eventually(t, func() bool {
			var keys []string
			rows, err := api.DB.Pool.Query(context.Background(), `SELECT key FROM idempotency_key ORDER BY key`)
			require.NoError(t, err)
			for rows.Next() {
				var k string
				require.NoError(t, rows.Scan(&k))
				keys = append(keys, k)
			}
			return len(keys) == 1 && keys[0] == "new"
		}, dbtest.Patience(), 50*time.Millisecond, "the expired key is purged, the fresh one kept")
	})

	t.Run("OneScrapeCostsAtMostOneQuery", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t, func(llmtest.Request) llmtest.Reply { return llmtest.Answer(true, 5, "x") }, nil)
		api := e.start(cli.RoleAPI)
		for range 5 {
			scrape(t, api.APIURL())
		}
		require.Equal(t, 1, api.QueueCollector.Queries(), "five scrapes within the queue metrics interval (5s) share one query")
	})

	t.Run("TwoWorkerProcessesNeverClassifyADomainTwice", func(t *testing.T) {
		t.Parallel()
		var calls atomic.Int64
		e := newE2E(t, func(r llmtest.Request) llmtest.Reply {
			calls.Add(1)
			a := llmtest.Answer(true, 4, "x")
			a.Delay = 20 * time.Millisecond
			return a
		}, map[string]string{"CLASSIFY_WORKERS": "4"})
		e.start(cli.RoleAPI)
		e.startProcess(cli.RoleWorker)
		e.startProcess(cli.RoleWorker)

		// 30 jobs of 5 domains drawn from 20: every domain is wanted by
		// several jobs, often at the same time.
		var ids []string
		for j := range 30 {
			var ds []string
			for k := range 5 {
				ds = append(ds, fmt.Sprintf("brand%02d.com", (j*7+k*3)%20))
			}
			ids = append(ids, e.submit(ds...))
		}
		for _, id := range ids {
			e.wait(id, "COMPLETED", dbtest.Patience())
		}
		domains := e.llm.Domains()
		require.Len(t, domains, 20)
		for d, n := range domains {
			require.Equal(t, 1, n, "%s was classified %d times", d, n)
		}
	})

	t.Run("SIGTERMLetsTheJobGoBackAndNothingIsLost", func(t *testing.T) {
		t.Parallel()
		hold := holdDomain("slow.com")
		e := newE2E(t, hold.reply, map[string]string{"SOFT_STOP_TIMEOUT": "1s"})
		e.start(cli.RoleAPI)

		// An idle worker stops at once.
		idle := e.startProcess(cli.RoleWorker)
		start := time.Now()
		require.NoError(t, idle.Process.Signal(syscall.SIGTERM))
		require.NoError(t, idle.Wait(), "exit code 0")
		t.Logf("shutdown of an idle worker: %s", time.Since(start).Round(time.Millisecond))

		busy := e.startProcess(cli.RoleWorker)
		id := e.submit("fast.com", "slow.com")
		require.Eventually(t, func() bool {
			status, _ := e.get(id).result("fast.com")
			return status == "COMPLETED" && e.llm.Calls("slow.com") == 1
		}, dbtest.Patience(), 20*time.Millisecond)
		start = time.Now()
		require.NoError(t, busy.Process.Signal(syscall.SIGTERM))
		require.NoError(t, busy.Wait(), "exit code 0 after a soft stop")
		elapsed := time.Since(start)
		t.Logf("shutdown of a worker with a job stuck in a model call (SOFT_STOP_TIMEOUT=1s): %s", elapsed.Round(time.Millisecond))
		require.GreaterOrEqual(t, elapsed, time.Second, "running jobs get the soft-stop timeout")
		require.Equal(t, "RUNNING", e.get(id).Status)

		hold.letGo()
		e.startProcess(cli.RoleWorker)
		v := e.wait(id, "COMPLETED", dbtest.Patience())
		require.Equal(t, 2, v.Progress.Done)
		require.Equal(t, 1, e.llm.Calls("fast.com"))
	})

	t.Run("JobsRetryRevivesADiscardedJob", func(t *testing.T) {
		t.Parallel()
		var broken atomic.Bool
		broken.Store(true)
		e := newE2E(t, func(r llmtest.Request) llmtest.Reply {
			if broken.Load() {
				return llmtest.Status(http.StatusBadGateway, nil)
			}
			return llmtest.Answer(true, 5, "Back.")
		}, map[string]string{"JOB_MAX_ATTEMPTS": "1", "RIVERUI_USER": "ops", "RIVERUI_PASSWORD": "pw"})
		e.start(cli.RoleAll)
		id := e.submit("acme.com", "beta.com")
		byUI := e.submit("gamma.com")
		v := e.wait(id, "FAILED", dbtest.Patience())
		require.Contains(t, v.Error, "gave up after 1 attempts")
		e.wait(byUI, "FAILED", dbtest.Patience())

		cli := func(args ...string) (int, string, string) {
			var out, errOut strings.Builder
			code := Run(context.Background(), args, e.environ(), nil, &out, &errOut)
			return code, out.String(), errOut.String()
		}
		var listed string
		require.Eventually(t, func() bool {
			_, listed, _ = cli("jobs", "list", "--state", "discarded")
			return strings.Contains(listed, id)
		}, dbtest.Patience(), 50*time.Millisecond)
		require.Contains(t, listed, "502 Bad Gateway")

		broken.Store(false)
		code, out, errOut := cli("jobs", "retry", id)
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, "retried job ")
		require.Contains(t, out, "now available, attempt 1 of 2")

		v = e.wait(id, "COMPLETED", dbtest.Patience())
		require.Empty(t, v.Error)
		require.Equal(t, 2, v.Progress.Done)

		// The River UI retry button posts to its API; the job picks up too.
		riverID := e.riverJobID(byUI)
		req, err := http.NewRequest(http.MethodPost, e.api.APIURL()+"/riverui/api/jobs/retry",
			strings.NewReader(fmt.Sprintf(`{"ids":["%d"]}`, riverID)))
		require.NoError(t, err)
		req.SetBasicAuth("ops", "pw")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		e.wait(byUI, "COMPLETED", dbtest.Patience())

		code, _, errOut = cli("jobs", "retry", "999999")
		require.Equal(t, 1, code)
		require.Contains(t, errOut, "job 999999: not found")
	})

	t.Run("ReadyzFollowsPostgres", func(t *testing.T) {
		t.Parallel()
		cluster := dbtest.NewCluster(t)
		e := newE2E(t, func(llmtest.Request) llmtest.Reply { return llmtest.Answer(true, 5, "x") },
			map[string]string{"DATABASE_URL": cluster.URL, "DATABASE_SCHEMA": ""})
		var out, errOut strings.Builder
		require.Equal(t, 0, Run(context.Background(), []string{"migrate"}, e.environ(), nil, &out, &errOut), errOut.String())
		api := e.start(cli.RoleAPI)
		w := e.start(cli.RoleWorker)
		ready := func(url string) int {
			resp, err := http.Get(url + "/readyz")
			require.NoError(t, err)
			resp.Body.Close()
			return resp.StatusCode
		}
		require.Equal(t, 200, ready(api.APIURL()))
		require.Equal(t, 200, ready(w.WorkerURL()))

		cluster.Stop()
		require.Eventually(t, func() bool {
			return ready(api.APIURL()) == 503 && ready(w.WorkerURL()) == 503
		}, dbtest.Patience(), 20*time.Millisecond)
		resp, err := http.Post(api.APIURL()+"/domains/classify", "application/json", strings.NewReader(`{"domains":["a.com"]}`))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)

		cluster.Start()
		require.Eventually(t, func() bool {
			return ready(api.APIURL()) == 200 && ready(w.WorkerURL()) == 200
		}, dbtest.Patience(), 50*time.Millisecond, "readyz recovers without a restart")
		e.wait(e.submit("acme.com"), "COMPLETED", dbtest.Patience())
	})
}

// riverJobID returns the River job of an app job.
func (e *e2e) riverJobID(appJobID string) int64 {
	e.t.Helper()
	var id int64
	require.NoError(e.t, e.api.DB.Pool.QueryRow(context.Background(),
		"SELECT river_job_id FROM classify_job WHERE id = $1", appJobID).Scan(&id))
	return id
}
