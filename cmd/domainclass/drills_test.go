//go:build drills

package main

// The fault drills of docs/RELIABILITY.md: `go tool task drills` builds the
// binary once and runs `domainclass api` and `domainclass worker` as
// separate processes configured by the environment, as in production; the
// fake model, the webhook receivers and the load generators run here. Each
// drill records its outcomes (counts, not impressions) as rows of one
// table, which is printed at the end and written into docs/RELIABILITY.md
// when every drill ran. A row that misses its designed outcome fails the
// run but stays in the table.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
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
	"syscall"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier/llm/llmtest"
	"github.com/domainclass/domainclass/cli"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/db/dbtest"
)

// drills are the subtests of TestDrills, in table order. They run one after
// the other, so that each has the machine to itself.
var drills = []struct {
	name string
	run  func(*testing.T, *drillSet)
}{
	{"WorkerKilledMidBatch", drillWorkerKilled},
	{"PostgresRestartedUnderLoad", func(t *testing.T, s *drillSet) { drillPostgresRestart(t, s, false) }},
	{"PostgresCrashedUnderLoad", func(t *testing.T, s *drillSet) { drillPostgresRestart(t, s, true) }},
	{"LLMFailureModes", drillLLMFailures},
	{"WebhookReceiverDown", drillWebhookDown},
	{"ThreeWorkers", drillThreeWorkers},
	{"ListWorkerKilled", drillListWorkerKilled},
	{"WorkerKilledLease", drillWorkerKilledLease},
	{"PostgresDuringUpload", drillPostgresDuringUpload},
	{"PostgresWhileListDrains", drillPostgresWhileListDrains},
	{"EconomyWorkerKilled", drillEconomyWorkerKilled},
	{"ListBadHour", drillListBadHour},
	{"TrickledUploads", drillTrickledUploads},
	{"SlowDownloads", drillSlowDownloads},
	{"ScaleRequests", drillScaleRequests},
	{"ScaleTokens", drillScaleTokens},
	{"BudgetWorkerKilled", drillBudgetWorkerKilled},
	{"CallerAtBudget", drillCallerAtBudget},
	{"DatabaseOutageLog", drillDatabaseOutageLog},
}

func TestDrills(t *testing.T) {
	start := time.Now()
	s := &drillSet{}
	s.bin = buildBinary(t)
	t.Logf("built %s in %s", s.bin, time.Since(start).Round(time.Millisecond))

	ran := 0
	for _, drill := range drills {
		t.Run(drill.name, func(t *testing.T) {
			ran++
			began, finished := time.Now(), false
			defer func() {
				if !finished {
					s.add(outcome{Drill: drill.name, Measure: "drill ran to the end", Designed: "yes",
						Measured: "no: stopped early (see the test log)", Result: resultMiss})
				}
				t.Logf("%s took %s", drill.name, time.Since(began).Round(100*time.Millisecond))
			}()
			drill.run(t, s)
			finished = true
		})
	}

	elapsed := time.Since(start)
	block := s.markdown(machine(), elapsed)
	fmt.Printf("\n%s\n", block)
	if ran == len(drills) {
		if err := writeReliabilityDoc(block); err != nil {
			t.Errorf("error writing docs/RELIABILITY.md: %v", err)
		} else {
			t.Logf("docs/RELIABILITY.md updated")
		}
	} else {
		t.Logf("only some drills ran; docs/RELIABILITY.md is left as it is")
	}
}

// drillWorkerKilled: a worker process is killed with SIGKILL while it works
// through a batch; another one starts. River's rescuer gives the dead
// worker's running jobs back (after RESCUE_STUCK_AFTER, on the leader,
// which the new worker becomes once the dead one's lease runs out), and
// the rescued jobs skip every domain whose answer was stored.
func drillWorkerKilled(t *testing.T, s *drillSet) {
	const (
		drill   = "worker kill -9 mid-batch"
		jobs    = 240
		perJob  = 5
		pool    = 600
		latency = 100 * time.Millisecond
	)
	fake := llmtest.New(t, llmtest.Steady(true, 4, "Makes packaged food.", latency))
	settings := map[string]string{"JOB_TIMEOUT": "10s", "RESCUE_STUCK_AFTER": "10s", "CLAIM_WAIT": "3s"}
	d := newDeployment(t, s.bin, fake, dbtest.URL(), dbtest.Schema(t), settings)
	d.start(cli.RoleAPI)
	first := d.start(cli.RoleWorker)

	var ids []string
	distinct := map[string]bool{}
	for j := range jobs {
		var domains []string
		for k := range perJob {
			domain := fmt.Sprintf("kill%03d.com", (j*37+k*101)%pool) // jobs share domains
			domains = append(domains, domain)
			distinct[domain] = true
		}
		ids = append(ids, d.mustSubmit(domains))
	}

	// Kill once a quarter of the jobs have ended: the model is busy then.
	require.True(t, eventually(60*time.Second, func() bool { return d.ended(ids) >= jobs/4 }),
		"a quarter of the jobs did not end within a minute")
	inFlight := fake.InFlight()
	first.kill()
	killedAt := time.Now()
	endedAtKill := d.ended(ids)
	runningAtKill := d.count(`SELECT count(*) FROM river_job WHERE kind = 'classify' AND state = 'running'`)
	askedBefore := fake.Domains()
	stored := d.storedDomains()
	var lost []string // asked, but the answer died with the process
	for domain := range askedBefore {
		if !stored[domain] {
			lost = append(lost, domain)
		}
	}
	slices.Sort(lost)
	t.Logf("killed the worker with %d jobs of %d ended, %d model calls in flight, %d answers stored, %d asked and not stored",
		endedAtKill, jobs, inFlight, len(stored), len(lost))

	d.start(cli.RoleWorker)
	allEnded := eventually(3*time.Minute, func() bool { return d.ended(ids) == jobs })
	recovery := time.Since(killedAt)

	completed := 0
	for _, id := range ids {
		if v, ok := d.get(id); ok && v.Status == "COMPLETED" && v.Progress.Done == v.Progress.Total {
			completed++
		}
	}
	calls := fake.Domains()
	var total, beforeOK, beforeBad, lostAgain, othersBad int
	for domain := range distinct {
		n := calls[domain]
		total += n
		switch {
		case stored[domain] && n == 1:
			beforeOK++
		case stored[domain]:
			beforeBad++
		case slices.Contains(lost, domain) && n == 2:
			lostAgain++
		case !slices.Contains(lost, domain) && n != 1:
			othersBad++
		}
	}
	rescued := d.count(`SELECT count(*) FROM river_job WHERE kind = 'classify' AND errors::text LIKE '%Stuck job rescued%'`)

	s.check(t, drill, "jobs submitted / COMPLETED (API)", "all complete", allEnded && completed == jobs,
		"%d / %d", jobs, completed)
	s.figure(drill, "distinct domains / domain slots", "%d / %d", len(distinct), jobs*perJob)
	s.figure(drill, "at the kill", "%d jobs ended, %d running (%d rescued by River later), %d model calls in flight",
		endedAtKill, runningAtKill, rescued, inFlight)
	s.check(t, drill, "LLM calls per domain answered before the kill", "exactly 1", beforeBad == 0 && beforeOK == len(stored),
		"%s (%d domains, %d asked again)", ratio(beforeOK+2*beforeBad, beforeOK+beforeBad), len(stored), beforeBad)
	s.check(t, drill, "domains asked but not stored at the kill", "asked again once (the answer died with the process)",
		lostAgain == len(lost), "%d, of which %d asked exactly twice", len(lost), lostAgain)
	s.check(t, drill, "LLM calls per domain overall", "1 + (asked, not stored) / distinct",
		othersBad == 0 && total == len(distinct)+len(lost),
		"%s (%d calls for %d domains)", ratio(total, len(distinct)), total, len(distinct))
	missing, answers := d.withoutProvenance()
	s.check(t, drill, "model answers without their provenance", "none (written in the answer's own batch)",
		missing == 0 && answers > 0, "%d of %d", missing, answers)
	s.figure(drill, "kill → every job COMPLETED", "%s (JOB_TIMEOUT=10s, RESCUE_STUCK_AFTER=10s, CLAIM_WAIT=3s; LLM %s a call, 8 in flight)",
		recovery.Round(100*time.Millisecond), latency)
}

// drillPostgresRestart: Postgres stops and starts again while a load
// generator posts jobs: a clean restart (fast shutdown: sessions are told
// and cut), or a crash (immediate shutdown, crash recovery on start). The
// API answers 503 (never anything else) while it is down and 202 again
// once it is back, without a restart, and every job it answered 202
// completes.
func drillPostgresRestart(t *testing.T, s *drillSet, crash bool) {
	drill := "Postgres restarted under accept load"
	if crash {
		drill = "Postgres crashed under accept load"
	}
	const (
		rate    = 50 // POSTs a second, at most
		clients = 8
		phase   = 250 // answers per phase: before, during, after the outage
		latency = 100 * time.Millisecond
	)
	cluster := dbtest.NewCluster(t)
	// A slow model, so that jobs are running when Postgres stops.
	fake := llmtest.New(t, llmtest.Steady(false, 5, "Sells software.", latency))
	d := newDeployment(t, s.bin, fake, cluster.URL, "", nil)
	out, err := d.run("migrate")
	require.NoError(t, err, "domainclass migrate: %s", out)
	d.start(cli.RoleAPI)
	d.start(cli.RoleWorker)

	type response struct {
		status  int // 0: no response (connection error)
		err     string
		at      time.Time
		latency time.Duration
		jobID   string
	}
	var (
		mu        sync.Mutex
		responses []response
		seq       atomic.Int64
		wg        sync.WaitGroup
	)
	stop := make(chan struct{})
	stopLoad := sync.OnceFunc(func() { close(stop); wg.Wait() })
	t.Cleanup(stopLoad)
	tick := time.NewTicker(time.Second / rate)
	defer tick.Stop()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				began := time.Now()
				status, id, err := d.submit([]string{fmt.Sprintf("pg%05d.com", seq.Add(1))}, "")
				r := response{status: status, at: time.Now(), latency: time.Since(began), jobID: id}
				if err != nil {
					r.err = err.Error()
				}
				mu.Lock()
				responses = append(responses, r)
				mu.Unlock()
			}
		}()
	}

	// The phases end on counts of answers, not on timers: 202s before the
	// stop, 503s while Postgres is down, 202s again once it is back.
	answered := func(status int, since time.Time) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, r := range responses {
			if r.status == status && r.at.After(since) {
				n++
			}
		}
		return n
	}
	loadStart := time.Now()
	require.True(t, eventually(time.Minute, func() bool { return answered(http.StatusAccepted, loadStart) >= phase }),
		"%d jobs accepted before the stop", phase)
	stopAt := time.Now()
	if crash {
		cluster.Crash()
	} else {
		cluster.Stop()
	}
	require.True(t, eventually(time.Minute, func() bool { return answered(http.StatusServiceUnavailable, stopAt) >= phase }),
		"%d requests answered 503 while Postgres is down", phase)
	cluster.Start() // returns once it accepts connections
	backAt := time.Now()
	require.True(t, eventually(time.Minute, func() bool { return answered(http.StatusAccepted, backAt) >= phase }),
		"%d jobs accepted after Postgres is back", phase)
	stopLoad()
	loadEnd := time.Now()

	byStatus := map[int]int{}
	var accepted, acceptedBefore []string
	var first503, last503, first202After time.Time
	var max503 time.Duration
	var connErrs []string
	for _, r := range responses {
		byStatus[r.status]++
		switch r.status {
		case http.StatusAccepted:
			accepted = append(accepted, r.jobID)
			if r.at.Before(stopAt) {
				acceptedBefore = append(acceptedBefore, r.jobID)
			}
			if r.at.After(backAt) && (first202After.IsZero() || r.at.Before(first202After)) {
				first202After = r.at
			}
		case http.StatusServiceUnavailable:
			if first503.IsZero() || r.at.Before(first503) {
				first503 = r.at
			}
			if r.at.After(last503) {
				last503 = r.at
			}
			max503 = max(max503, r.latency)
		case 0:
			connErrs = append(connErrs, r.err)
		}
	}
	others := 0
	for status, n := range byStatus {
		if status != http.StatusAccepted && status != http.StatusServiceUnavailable {
			others += n
		}
	}
	if len(connErrs) > 0 {
		t.Logf("connection errors: %q", connErrs[:min(len(connErrs), 5)])
	}

	allEnded := eventually(3*time.Minute, func() bool { return d.ended(accepted) == len(accepted) })
	completed := 0
	for _, id := range accepted {
		if v, ok := d.get(id); ok && v.Status == "COMPLETED" {
			completed++
		}
	}
	// When the last job accepted before the stop completed (Postgres' clock
	// is this machine's).
	var lastBefore time.Time
	require.NoError(t, d.db.Pool.QueryRow(context.Background(),
		`SELECT max(completed_at) FROM classify_job WHERE id = ANY($1::uuid[])`, acceptedBefore).Scan(&lastBefore))
	retried := d.count(`SELECT count(*) FROM river_job WHERE kind = 'classify' AND cardinality(errors) > 0`)
	maxAttempt := d.count(`SELECT coalesce(max(attempt), 0) FROM river_job WHERE kind = 'classify'`)
	written := d.count(`SELECT count(*) FROM classify_job`)
	writtenEnded := d.count(`SELECT count(*) FROM classify_job WHERE status = 'COMPLETED'`)

	s.check(t, drill, "responses by status", "only 202 and 503", others == 0,
		"%d requests in %s: 202 × %d, 503 × %d, other statuses × %d, connection errors × %d",
		len(responses), loadEnd.Sub(loadStart).Round(100*time.Millisecond), byStatus[202], byStatus[503], others-byStatus[0], byStatus[0])
	window := "none"
	if !first503.IsZero() {
		window = fmt.Sprintf("%s (first %+.1fs, last %+.1fs from the stop)", last503.Sub(first503).Round(100*time.Millisecond),
			first503.Sub(stopAt).Seconds(), last503.Sub(stopAt).Seconds())
	}
	s.figure(drill, "API answered 503 for", "%s; Postgres down %s (stop → accepting)", window, backAt.Sub(stopAt).Round(100*time.Millisecond))
	firstBack := "never"
	if !first202After.IsZero() {
		firstBack = first202After.Sub(backAt).Round(time.Millisecond).String()
	}
	s.check(t, drill, "slowest 503; first 202 after Postgres is back", "503 within about a second; 202 again without a restart",
		max503 <= 1500*time.Millisecond && !first202After.IsZero(), "%s; %s", max503.Round(time.Millisecond), firstBack)
	s.check(t, drill, "202 jobs COMPLETED (API)", "all", allEnded && completed == len(accepted),
		"%d / %d; those accepted before the stop by %+.1fs from Postgres back; %d jobs retried after a database error (attempts ≤ %d)",
		completed, len(accepted), lastBefore.Sub(backAt).Seconds(), retried, maxAttempt)
	s.figure(drill, "jobs written but answered 503 (a commit that raced the stop)", "%d; written jobs COMPLETED: %d of %d",
		written-len(accepted), writtenEnded, written)
}

// llmMode is one scripted failure of the model, for a few domains each.
type llmMode struct {
	name, prefix, designed string
	reply                  func(call int) llmtest.Reply
	// ok says whether one domain's measured outcome is the designed one.
	ok func(o llmOutcome) bool
}

// llmOutcome is what happened to one domain (one job of one domain).
type llmOutcome struct {
	jobStatus, domainStatus, domainError string
	calls, attempts, snoozes             int
	errors                               []string
	secondCallAfter                      time.Duration
}

// drillLLMFailures: every domain is scripted to meet one failure of the
// model; each mode has its designed outcome (docs/operating.md, "How a job runs").
func drillLLMFailures(t *testing.T, s *drillSet) {
	const (
		drill      = "LLM failure modes"
		perMode    = 4
		llmTimeout = 2 * time.Second
	)
	answer := llmtest.Answer(true, 4, "Makes household goods.")
	firstThen := func(r llmtest.Reply) func(int) llmtest.Reply {
		return func(call int) llmtest.Reply {
			if call == 1 {
				return r
			}
			return answer
		}
	}
	always := func(r llmtest.Reply) func(int) llmtest.Reply { return func(int) llmtest.Reply { return r } }
	// A transient failure is retried in the job (DOMAIN_ATTEMPTS,
	// jobs.DefaultDomainRetryBackoff): no River attempt is used.
	retried := func(o llmOutcome) bool {
		return o.jobStatus == "COMPLETED" && o.domainStatus == "COMPLETED" && o.calls == 2 && o.attempts == 1 && len(o.errors) == 0
	}
	failedOnce := func(reason string) func(o llmOutcome) bool {
		return func(o llmOutcome) bool {
			return o.jobStatus == "COMPLETED" && o.domainStatus == "FAILED" && strings.Contains(o.domainError, reason) &&
				o.calls == 1 && o.attempts == 1 && len(o.errors) == 0
		}
	}
	modes := []llmMode{{
		name: "500, then an answer", prefix: "e500", designed: "error → retried in the job, no attempt used → COMPLETED",
		reply: firstThen(llmtest.Status(http.StatusInternalServerError, nil)), ok: retried,
	}, {
		name: "429 Retry-After: 1, then an answer", prefix: "e429", designed: "snoozed 1 s, no attempt used → COMPLETED",
		reply: firstThen(llmtest.Status(http.StatusTooManyRequests, map[string]string{"Retry-After": "1"})),
		ok: func(o llmOutcome) bool {
			return o.jobStatus == "COMPLETED" && o.domainStatus == "COMPLETED" && o.calls == 2 && o.attempts == 1 &&
				o.snoozes == 1 && len(o.errors) == 0
		},
	}, {
		name: "200 with a body that is not JSON, then an answer", prefix: "ebody", designed: "error → retried in the job, no attempt used → COMPLETED",
		reply: firstThen(llmtest.Reply{Raw: "<html><body>upstream hiccup</body></html>"}), ok: retried,
	}, {
		name: "30 s stall (LLM_TIMEOUT=2s), then an answer", prefix: "stall", designed: "cut at 2 s → retried in the job → COMPLETED",
		reply: firstThen(llmtest.Reply{Delay: 30 * time.Second}),
		ok: func(o llmOutcome) bool {
			return retried(o) && o.secondCallAfter >= llmTimeout && o.secondCallAfter < 10*time.Second
		},
	}, {
		name: "garbage: not JSON", prefix: "etext", designed: "domain FAILED with the reason, job COMPLETED, not asked again",
		reply: always(llmtest.Reply{Content: "Sure! It is a great company."}), ok: failedOnce("unreadable model output"),
	}, {
		name: "garbage: not a clear yes or no", prefix: "emaybe", designed: "domain FAILED with the reason, job COMPLETED, not asked again",
		reply: always(llmtest.Reply{Content: `{"is_cpg": "maybe", "confidence": 3, "reasoning": "Hard to say."}`}),
		ok:    failedOnce("is not a clear yes or no"),
	}}

	byPrefix := map[string]llmMode{}
	for _, m := range modes {
		byPrefix[m.prefix] = m
	}
	fake := llmtest.New(t, func(r llmtest.Request) llmtest.Reply {
		prefix, _, _ := strings.Cut(r.Domain, "-")
		if m, ok := byPrefix[prefix]; ok {
			return m.reply(r.Call)
		}
		return answer
	})
	d := newDeployment(t, s.bin, fake, dbtest.URL(), dbtest.Schema(t), map[string]string{"LLM_TIMEOUT": llmTimeout.String()})
	d.start(cli.RoleAPI)
	d.start(cli.RoleWorker)

	jobOf := map[string]string{} // domain → job
	var ids []string
	for _, m := range modes {
		for i := range perMode {
			domain := fmt.Sprintf("%s-%d.com", m.prefix, i)
			id := d.mustSubmit([]string{domain})
			jobOf[domain] = id
			ids = append(ids, id)
		}
	}
	allEnded := eventually(2*time.Minute, func() bool { return d.ended(ids) == len(ids) })

	starts := map[string][]time.Time{}
	for i, r := range fake.Requests() {
		starts[r.Domain] = append(starts[r.Domain], fake.Starts()[i])
	}
	for _, m := range modes {
		var good int
		var statuses, callCounts, attempts, snoozes []string
		var sample, after string
		for i := range perMode {
			domain := fmt.Sprintf("%s-%d.com", m.prefix, i)
			o := d.llmOutcome(jobOf[domain], domain)
			o.calls = fake.Calls(domain)
			if st := starts[domain]; len(st) >= 2 {
				o.secondCallAfter = st[1].Sub(st[0])
				after = fmt.Sprintf("; 2nd call %.1fs after the 1st", o.secondCallAfter.Seconds())
			}
			if m.ok(o) {
				good++
			} else {
				t.Logf("%s: %s: %+v", m.name, domain, o)
			}
			statuses = append(statuses, o.domainStatus)
			callCounts = append(callCounts, strconv.Itoa(o.calls))
			attempts = append(attempts, strconv.Itoa(o.attempts))
			snoozes = append(snoozes, strconv.Itoa(o.snoozes))
			switch {
			case o.domainError != "":
				sample = "reason: " + o.domainError
			case len(o.errors) > 0:
				e := o.errors[0]
				if i := strings.Index(e, "LLM request failed: "); i >= 0 {
					e = e[i:]
				}
				sample = "River error: " + e
			}
		}
		measured := fmt.Sprintf("%d/%d as designed: domain %s, calls %s, attempts %s, snoozes %s%s",
			good, perMode, uniform(statuses), uniform(callCounts), uniform(attempts), uniform(snoozes), after)
		if sample != "" {
			measured += "; " + truncateRunes(sample, 90)
		}
		s.check(t, drill, m.name, m.designed, allEnded && good == perMode, "%s", measured)
	}
	completed := 0
	for _, id := range ids {
		if v, ok := d.get(id); ok && v.Status == "COMPLETED" {
			completed++
		}
	}
	s.check(t, drill, "jobs COMPLETED (API)", "all", completed == len(ids), "%d / %d", completed, len(ids))
}

// drillWebhookDown: jobs carry X-Callback-URL; one receiver answers 503
// (without Retry-After) and another refuses connections, until every
// delivery has failed at least twice; then both answer 204. Every job's
// delivery arrives once they are back, each attempt signed (Standard
// Webhooks) with the same webhook-id.
func drillWebhookDown(t *testing.T, s *drillSet) {
	const (
		drill   = "webhook receiver down"
		perKind = 8
	)
	secret := newWebhookSecret(t)
	wh, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	var up atomic.Bool
	rec := &hookRecorder{verify: wh}

	// Receiver 1 answers 503 while down.
	unavailable := &http.Server{Handler: rec.handler("503", up.Load), ReadHeaderTimeout: 5 * time.Second}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = unavailable.Serve(ln) }()
	t.Cleanup(func() { _ = unavailable.Close() })
	unavailableURL := "http://" + ln.Addr().String() + "/hooks"

	// Receiver 2 is not listening while down (connections are refused). Its
	// port is below the ephemeral range, so no outgoing connection takes it
	// in the meantime.
	refusedAddr := freeLowPort(t)
	refused := &http.Server{Handler: rec.handler("refused", func() bool { return true }), ReadHeaderTimeout: 5 * time.Second}
	t.Cleanup(func() { _ = refused.Close() })
	refusedURL := "http://" + refusedAddr + "/hooks"

	fake := llmtest.New(t, func(llmtest.Request) llmtest.Reply { return llmtest.Answer(true, 5, "Makes drinks.") })
	d := newDeployment(t, s.bin, fake, dbtest.URL(), dbtest.Schema(t), map[string]string{
		"WEBHOOK_SECRET": secret, "CALLBACK_ALLOW_PRIVATE": "true", "WEBHOOK_RETRY_SCHEDULE": "1s,2s,2s,4s",
	})
	d.start(cli.RoleAPI)
	d.start(cli.RoleWorker)

	downSince := time.Now()       // both receivers are down from the start
	kindOf := map[string]string{} // job → receiver
	var ids []string
	for i := range 2 * perKind {
		kind, url := "503", unavailableURL
		if i%2 == 1 {
			kind, url = "refused", refusedURL
		}
		status, id, err := d.submit([]string{fmt.Sprintf("hook%02d.com", i)}, url)
		require.NoError(t, err)
		require.Equal(t, http.StatusAccepted, status)
		kindOf[id] = kind
		ids = append(ids, id)
	}

	// Down until every delivery has failed at least twice.
	failures := func() map[string]int {
		out := map[string]int{}
		rows, err := d.db.Pool.Query(context.Background(),
			`SELECT args->>'job_id', coalesce(array_length(errors, 1), 0) FROM river_job WHERE kind = 'webhook'`)
		if err != nil {
			return out
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			var n int
			if rows.Scan(&id, &n) == nil {
				out[id] = n
			}
		}
		return out
	}
	require.True(t, eventually(90*time.Second, func() bool {
		f := failures()
		for _, id := range ids {
			if f[id] < 2 {
				return false
			}
		}
		return true
	}), "every delivery should have failed twice while the receivers are down")
	downFor := time.Since(downSince)
	rl, err := net.Listen("tcp", refusedAddr)
	require.NoError(t, err, "the refused receiver's port was taken meanwhile")
	go func() { _ = refused.Serve(rl) }()
	up.Store(true)
	backAt := time.Now()

	delivered := eventually(90*time.Second, func() bool {
		return d.count(`SELECT count(*) FROM river_job WHERE kind = 'webhook' AND state = 'completed'`) == len(ids)
	})
	lastDelivery := time.Duration(0)
	webhookIDs := d.webhookIDs()
	attempts := d.webhookAttempts()

	for _, kind := range []string{"503", "refused"} {
		var jobs, deliveries, onePerJob, sameID, seen, valid, failedAttempts, attemptsSum int
		for _, id := range ids {
			if kindOf[id] != kind {
				continue
			}
			jobs++
			reqs := rec.forJob(id)
			ok2xx := 0
			webhookIDsSeen := map[string]bool{}
			for _, r := range reqs {
				seen++
				if r.sigOK {
					valid++
				}
				webhookIDsSeen[r.webhookID] = true
				if r.status/100 == 2 {
					ok2xx++
					lastDelivery = max(lastDelivery, r.at.Sub(backAt))
				}
			}
			deliveries += ok2xx
			if ok2xx == 1 {
				onePerJob++
			}
			if len(webhookIDsSeen) == 1 && webhookIDsSeen[webhookIDs[id]] {
				sameID++
			}
			attemptsSum += attempts[id]
			failedAttempts += attempts[id] - 1
		}
		what := "answers 503 (no Retry-After)"
		if kind == "refused" {
			what = "refuses connections"
		}
		s.check(t, drill, "receiver "+what+": deliveries once back", "one per job", delivered && onePerJob == jobs,
			"%d jobs, %d deliveries, %d failed attempts before (River attempts %s per job)",
			jobs, deliveries, failedAttempts, ratio(attemptsSum, jobs))
		s.check(t, drill, "receiver "+what+": requests signed, same webhook-id", "every one",
			valid == seen && sameID == jobs, "%d requests reached it: %d signatures valid; %d/%d jobs one webhook-id (msg_<job>_<end>)",
			seen, valid, sameID, jobs)
	}
	s.figure(drill, "down for / back → last delivery", "%s / %s (WEBHOOK_RETRY_SCHEDULE=1s,2s,2s,4s: 5 attempts over ≈9 s)",
		downFor.Round(100*time.Millisecond), lastDelivery.Round(100*time.Millisecond))
}

// drillThreeWorkers: three worker processes on one database share jobs
// whose domains overlap; the claim per domain makes sure each domain is
// asked about once.
func drillThreeWorkers(t *testing.T, s *drillSet) {
	const (
		drill   = "three workers"
		jobs    = 60
		perJob  = 5
		pool    = 40
		latency = 200 * time.Millisecond
	)
	fake := llmtest.New(t, llmtest.Steady(true, 4, "Makes cosmetics.", latency))
	d := newDeployment(t, s.bin, fake, dbtest.URL(), dbtest.Schema(t), map[string]string{"CLASSIFY_WORKERS": "4"})
	d.start(cli.RoleAPI)
	for range 3 {
		d.start(cli.RoleWorker)
	}
	var ids []string
	distinct := map[string]bool{}
	for j := range jobs {
		var domains []string
		for k := range perJob {
			domain := fmt.Sprintf("three%02d.com", (j*7+k*3)%pool)
			domains = append(domains, domain)
			distinct[domain] = true
		}
		ids = append(ids, d.mustSubmit(domains))
	}
	allEnded := eventually(2*time.Minute, func() bool { return d.ended(ids) == jobs })
	completed := 0
	for _, id := range ids {
		if v, ok := d.get(id); ok && v.Status == "COMPLETED" {
			completed++
		}
	}
	calls := fake.Domains()
	total, twice := 0, 0
	for domain := range distinct {
		total += calls[domain]
		if calls[domain] > 1 {
			twice++
		}
	}
	perWorker := d.counts(`SELECT count(*) FROM river_job WHERE kind = 'classify' GROUP BY attempted_by[array_upper(attempted_by, 1)] ORDER BY 1 DESC`)
	snoozed := d.count(`SELECT coalesce(sum((metadata->>'snoozes')::int), 0) FROM river_job WHERE kind = 'classify'`)
	fromCache := d.count(`SELECT count(*) FROM classify_job_domain WHERE source = 'cache'`)

	s.check(t, drill, "jobs COMPLETED (API)", "all", allEnded && completed == jobs, "%d / %d", completed, jobs)
	s.check(t, drill, "LLM calls per distinct domain", "1.00", total == len(distinct) && twice == 0,
		"%s (%d calls, %d domains, %d slots; %d domains asked twice)", ratio(total, len(distinct)), total, len(distinct), jobs*perJob, twice)
	s.figure(drill, "jobs per worker process; slots answered by another job's call", "%s; %d of %d (%d jobs snoozed to wait)",
		strings.Join(perWorker, " / "), fromCache, jobs*perJob, snoozed)
}

// --- deployments: the binary as separate processes ---

// buildBinary builds cmd/domainclass once for the run.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "domainclass")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// deployment is one database (a schema, or a cluster of its own) with
// api and worker processes of the binary on it.
type deployment struct {
	t      *testing.T
	bin    string
	env    map[string]string
	db     *db.DB // the drill's own handle, for counting
	logDir string
	procs  []*binProc
	api    *binProc
	client *http.Client
}

func newDeployment(t *testing.T, bin string, fake *llmtest.Server, dbURL, schema string, settings map[string]string) *deployment {
	t.Helper()
	d := &deployment{t: t, bin: bin, logDir: t.TempDir(), client: &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 32},
	}}
	d.env = map[string]string{
		"DATABASE_URL": dbURL, "DATABASE_SCHEMA": schema,
		"HTTP_ADDR": "127.0.0.1:0", "WORKER_ADDR": "127.0.0.1:0",
		"OPENAI_API_KEY": "sk-drill", "OPENAI_BASE_URL": fake.BaseURL(), "OPENAI_MODEL": "drill-model",
		"SEARCH_PROVIDER": "none", "AUTH": "off", "LOG_LEVEL": "warn", "LOG_FORMAT": "text",
		"LLM_RATE_PER_MINUTE":    "60000",
		"CALLER_RATE_PER_MINUTE": "1000000", "CALLER_MAX_QUEUED_DOMAINS": "1000000",
		"SOFT_STOP_TIMEOUT": "1s", "BUSY_SNOOZE": "1s",
	}
	for k, v := range settings {
		d.env[k] = v
	}
	var err error
	d.db, err = db.Open(context.Background(), db.Config{URL: dbURL, Schema: schema, MaxConns: 4, ApplicationName: "drills"})
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, p := range d.procs {
			p.kill()
		}
		d.db.Close()
		if t.Failed() {
			for _, p := range d.procs {
				t.Logf("--- last lines of %s ---\n%s", filepath.Base(p.logPath), tail(p.logPath, 30))
			}
		}
	})
	return d
}

// environ is the processes' whole environment: nothing is inherited but
// PATH, HOME and TMPDIR, so a developer's OPENAI_API_KEY or DATABASE_URL
// never leaks into a drill.
func (d *deployment) environ() []string {
	var out []string
	for _, k := range []string{"PATH", "HOME", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			out = append(out, k+"="+v)
		}
	}
	for k, v := range d.env {
		out = append(out, k+"="+v)
	}
	return out
}

// run runs a command of the binary to its end (migrate).
func (d *deployment) run(args ...string) (string, error) {
	cmd := exec.Command(d.bin, args...)
	cmd.Env = d.environ()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// binProc is a running `domainclass <role>`.
type binProc struct {
	cmd     *exec.Cmd
	URL     string
	logPath string
	once    sync.Once
}

// start runs `domainclass <role>` and returns once it serves.
func (d *deployment) start(role string) *binProc {
	d.t.Helper()
	p := &binProc{logPath: filepath.Join(d.logDir, fmt.Sprintf("%d-%s.log", len(d.procs)+1, role))}
	f, err := os.Create(p.logPath)
	require.NoError(d.t, err)
	d.t.Cleanup(func() { _ = f.Close() })
	serving := make(chan string, 1)
	p.cmd = exec.Command(d.bin, role)
	p.cmd.Env = d.environ()
	p.cmd.Stdout = &serveWatcher{w: f, serving: serving}
	p.cmd.Stderr = f
	require.NoError(d.t, p.cmd.Start())
	d.procs = append(d.procs, p)
	select {
	case p.URL = <-serving:
	case <-time.After(30 * time.Second):
		d.t.Fatalf("domainclass %s did not start serving:\n%s", role, tail(p.logPath, 20))
	}
	if role == cli.RoleAPI && d.api == nil {
		d.api = p
	}
	return p
}

// kill sends SIGKILL and reaps the process.
func (p *binProc) kill() {
	p.once.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		_ = p.cmd.Wait()
	})
}

// serveWatcher copies a process's stdout to its log and reports the URL of
// its "... on http://..." line.
type serveWatcher struct {
	w       io.Writer
	serving chan string
	line    []byte
}

func (s *serveWatcher) Write(p []byte) (int, error) {
	s.line = append(s.line, p...)
	for {
		i := bytes.IndexByte(s.line, '\n')
		if i < 0 {
			break
		}
		line := string(s.line[:i])
		s.line = s.line[i+1:]
		if j := strings.Index(line, " on http://"); j >= 0 {
			select {
			case s.serving <- line[j+len(" on "):]:
			default:
			}
		}
	}
	return s.w.Write(p)
}

func (d *deployment) submit(domains []string, callbackURL string) (status int, jobID string, err error) {
	body, _ := json.Marshal(map[string]any{"domains": domains})
	req, err := http.NewRequest(http.MethodPost, d.api.URL+"/domains/classify", bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	if callbackURL != "" {
		req.Header.Set("X-Callback-URL", callbackURL)
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, "", err
	}
	if resp.StatusCode == http.StatusAccepted {
		var v jobView
		if err := json.Unmarshal(b, &v); err != nil || v.JobID == "" {
			return resp.StatusCode, "", fmt.Errorf("a 202 without a job id: %s", b)
		}
		return resp.StatusCode, v.JobID, nil
	}
	return resp.StatusCode, "", nil
}

func (d *deployment) mustSubmit(domains []string) string {
	d.t.Helper()
	status, id, err := d.submit(domains, "")
	require.NoError(d.t, err)
	require.Equal(d.t, http.StatusAccepted, status)
	return id
}

// get reads a job through the API.
func (d *deployment) get(id string) (jobView, bool) {
	var v jobView
	resp, err := d.client.Get(d.api.URL + "/domains/classify/" + id)
	if err != nil {
		return v, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return v, false
	}
	return v, json.NewDecoder(resp.Body).Decode(&v) == nil
}

// ended counts the jobs among ids that are COMPLETED or FAILED.
func (d *deployment) ended(ids []string) int {
	var n int
	if err := d.db.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM classify_job WHERE id = ANY($1::uuid[]) AND status IN ('COMPLETED', 'FAILED')`, ids).Scan(&n); err != nil {
		return -1
	}
	return n
}

// count runs a query of one integer; -1 when it fails. It tries three
// times: after a Postgres restart the pool's first try finds a dead
// connection.
func (d *deployment) count(query string) int {
	var (
		n   int
		err error
	)
	for range 3 {
		if err = d.db.Pool.QueryRow(context.Background(), query).Scan(&n); err == nil {
			return n
		}
	}
	d.t.Logf("count %q: %v", query, err)
	return -1
}

// counts runs a query of one integer column.
func (d *deployment) counts(query string) []string {
	rows, err := d.db.Pool.Query(context.Background(), query)
	require.NoError(d.t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n int
		require.NoError(d.t, rows.Scan(&n))
		out = append(out, strconv.Itoa(n))
	}
	require.NoError(d.t, rows.Err())
	return out
}

// withoutProvenance counts the answers a model made (fresh or cached: in
// the shared results, jobs' rows and lists' rows) that do not point at a
// stored provenance record, and the answers in all.
func (d *deployment) withoutProvenance() (missing, answers int) {
	err := d.db.Pool.QueryRow(context.Background(), `
		WITH a AS (
			SELECT provenance_id FROM result WHERE status = 'COMPLETED'
			UNION ALL SELECT provenance_id FROM classify_job_domain WHERE source IN ('llm', 'cache') AND status = 'COMPLETED'
			UNION ALL SELECT provenance_id FROM list_row WHERE source IN ('llm', 'cache') AND status = 'COMPLETED'
		)
		SELECT count(*) FILTER (WHERE p.id IS NULL), count(*) FROM a LEFT JOIN provenance p ON p.id = a.provenance_id`).
		Scan(&missing, &answers)
	require.NoError(d.t, err)
	return missing, answers
}

// storedDomains is every domain with an answer in the shared results.
func (d *deployment) storedDomains() map[string]bool {
	rows, err := d.db.Pool.Query(context.Background(), `SELECT domain FROM result WHERE status = 'COMPLETED'`)
	require.NoError(d.t, err)
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var domain string
		require.NoError(d.t, rows.Scan(&domain))
		out[domain] = true
	}
	require.NoError(d.t, rows.Err())
	return out
}

// llmOutcome reads a one-domain job's outcome: the app job, the domain, and
// its River job's attempts, snoozes and errors.
func (d *deployment) llmOutcome(jobID, domain string) llmOutcome {
	var o llmOutcome
	v, _ := d.get(jobID)
	o.jobStatus = v.Status
	for _, r := range v.Results {
		if r.Domain == domain {
			o.domainStatus, o.domainError = r.Status, r.Error
		}
	}
	var errs []byte
	err := d.db.Pool.QueryRow(context.Background(), `
		SELECT r.attempt, coalesce((r.metadata->>'snoozes')::int, 0), coalesce(array_to_json(r.errors), '[]')::text
		FROM river_job r JOIN classify_job j ON j.river_job_id = r.id WHERE j.id = $1`, jobID).
		Scan(&o.attempts, &o.snoozes, &errs)
	require.NoError(d.t, err)
	var list []struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(errs, &list)
	for _, e := range list {
		o.errors = append(o.errors, e.Error)
	}
	return o
}

// webhookIDs is the designed webhook-id of each job's end.
func (d *deployment) webhookIDs() map[string]string {
	rows, err := d.db.Pool.Query(context.Background(), `SELECT id::text, completed_at FROM classify_job WHERE completed_at IS NOT NULL`)
	require.NoError(d.t, err)
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id string
		var at time.Time
		require.NoError(d.t, rows.Scan(&id, &at))
		out[id] = "msg_" + id + "_" + strconv.FormatInt(at.UnixMicro(), 10)
	}
	require.NoError(d.t, rows.Err())
	return out
}

// webhookAttempts is how many times each job's delivery was tried.
func (d *deployment) webhookAttempts() map[string]int {
	rows, err := d.db.Pool.Query(context.Background(), `SELECT args->>'job_id', attempt FROM river_job WHERE kind = 'webhook'`)
	require.NoError(d.t, err)
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		require.NoError(d.t, rows.Scan(&id, &n))
		out[id] = n
	}
	require.NoError(d.t, rows.Err())
	return out
}

// hookRecorder is the webhook receivers' record of every request.
type hookRecorder struct {
	verify *standardwebhooks.Webhook
	mu     sync.Mutex
	reqs   []hookRequest
}

type hookRequest struct {
	receiver, jobID, webhookID string
	status                     int
	sigOK                      bool
	at                         time.Time
}

// handler answers 204 when up() and 503 (without Retry-After) otherwise.
func (h *hookRecorder) handler(receiver string, up func() bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var payload struct {
			JobID string `json:"job_id"`
		}
		_ = json.Unmarshal(body, &payload)
		status := http.StatusNoContent
		if !up() {
			status = http.StatusServiceUnavailable
		}
		h.mu.Lock()
		h.reqs = append(h.reqs, hookRequest{
			receiver: receiver, jobID: payload.JobID, webhookID: r.Header.Get("webhook-id"), status: status,
			sigOK: h.verify.Verify(body, r.Header) == nil, at: time.Now(),
		})
		h.mu.Unlock()
		w.WriteHeader(status)
	})
}

func (h *hookRecorder) forJob(id string) []hookRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []hookRequest
	for _, r := range h.reqs {
		if r.jobID == id {
			out = append(out, r)
		}
	}
	return out
}

// freeLowPort returns a free loopback address with a port below the
// ephemeral range (32768 and up on Linux).
func freeLowPort(t *testing.T) string {
	t.Helper()
	for range 100 {
		addr := fmt.Sprintf("127.0.0.1:%d", 20000+rand.IntN(10000))
		ln, err := net.Listen("tcp", addr)
		if err == nil {
			require.NoError(t, ln.Close())
			return addr
		}
	}
	t.Fatal("no free port between 20000 and 30000")
	return ""
}

// --- the table ---

const (
	resultPass = "pass"
	resultMiss = "MISS"
)

// drillSet collects the rows of one run.
type drillSet struct {
	bin  string
	mu   sync.Mutex
	rows []outcome
}

// outcome is one row: a measure of a drill, what it should be, what it
// was, and whether that is the designed outcome ("" for a figure that has
// no bar).
type outcome struct {
	Drill, Measure, Designed, Measured, Result string
}

func (s *drillSet) add(o outcome) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rows = append(s.rows, o)
}

// check records a row with a designed outcome; a miss fails the test but
// the drill goes on, so that the table holds every figure.
func (s *drillSet) check(t *testing.T, drill, measure, designed string, ok bool, format string, args ...any) {
	t.Helper()
	o := outcome{Drill: drill, Measure: measure, Designed: designed, Measured: fmt.Sprintf(format, args...), Result: resultPass}
	if !ok {
		o.Result = resultMiss
		t.Errorf("%s: %s: want %s, measured %s", drill, measure, designed, o.Measured)
	}
	s.add(o)
}

// figure records a measured figure that has no pass or miss.
func (s *drillSet) figure(drill, measure, format string, args ...any) {
	s.add(outcome{Drill: drill, Measure: measure, Designed: "—", Measured: fmt.Sprintf(format, args...), Result: "—"})
}

// markdown is the block written into docs/RELIABILITY.md: when, where, and
// the table.
func (s *drillSet) markdown(machine string, elapsed time.Duration) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	pass, miss := 0, 0
	for _, r := range s.rows {
		switch r.Result {
		case resultPass:
			pass++
		case resultMiss:
			miss++
		}
	}
	fmt.Fprintf(&b, "Measured %s with `go tool task drills` on %s. The drills took %s (building the binary included); %d outcomes as designed, %d missed.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), machine, elapsed.Round(time.Second), pass, miss)
	b.WriteString("| drill | measure | designed | measured | result |\n|---|---|---|---|---|\n")
	for _, r := range s.rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", cell(r.Drill), cell(r.Measure), cell(r.Designed), cell(r.Measured), r.Result)
	}
	return b.String()
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// machine describes where the drills ran, read from /proc.
func machine() string {
	cores, model := 0, ""
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			k, v, _ := strings.Cut(line, ":")
			switch strings.TrimSpace(k) {
			case "processor":
				cores++
			case "model name":
				if model == "" {
					model = strings.TrimSpace(v)
				}
			}
		}
	}
	mem := "unknown memory"
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				if kb, err := strconv.ParseFloat(f[1], 64); err == nil {
					mem = fmt.Sprintf("%.1f GiB memory", kb/(1<<20))
				}
			}
		}
	}
	pg := "PostgreSQL"
	if conn, err := db.Open(context.Background(), db.Config{URL: dbtest.URL(), MaxConns: 1}); err == nil {
		var v string
		if conn.Pool.QueryRow(context.Background(), "SHOW server_version").Scan(&v) == nil {
			pg += " " + strings.Fields(v)[0]
		}
		conn.Close()
	}
	cpu := fmt.Sprintf("%d cores", cores)
	if model != "" {
		cpu += " (" + model + ")"
	}
	return fmt.Sprintf("%s, %s, %s/%s, %s, %s", cpu, mem, runtime.GOOS, runtime.GOARCH, runtime.Version(), pg)
}

const (
	docBegin = "<!-- drills:begin -->"
	docEnd   = "<!-- drills:end -->"
)

// writeReliabilityDoc replaces what is between the markers of
// docs/RELIABILITY.md with block.
func writeReliabilityDoc(block string) error {
	path := filepath.Join("..", "..", "docs", "RELIABILITY.md")
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	doc := string(b)
	i, j := strings.Index(doc, docBegin), strings.Index(doc, docEnd)
	if i < 0 || j < i {
		return errors.New("the markers " + docBegin + " and " + docEnd + " are missing")
	}
	doc = doc[:i+len(docBegin)] + "\n" + block + doc[j:]
	return os.WriteFile(path, []byte(doc), 0o644)
}

// --- small helpers ---

// eventually polls cond until it holds or within has passed.
func eventually(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		<-tick.C
	}
}

func ratio(a, b int) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", float64(a)/float64(b))
}

// uniform is "x" when every value is x, else the values joined with "/".
func uniform(vals []string) string {
	for _, v := range vals {
		if v != vals[0] {
			return strings.Join(vals, "/")
		}
	}
	if len(vals) == 0 {
		return ""
	}
	return vals[0]
}

func truncateRunes(s string, n int) string {
	r := []rune(strings.Join(strings.Fields(s), " "))
	if len(r) <= n {
		return string(r)
	}
	return string(r[:n]) + "…"
}

// tail is the last n lines of a file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
