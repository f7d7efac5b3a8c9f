package jobs_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/classifier/llm/llmtest"
	"github.com/domainclass/domainclass/db/dbtest"
	"github.com/domainclass/domainclass/jobs"
	"github.com/domainclass/domainclass/wire"
)

// newSecret returns a fresh Standard Webhooks secret.
func newSecret(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

// webhookOpts configures the webhook worker of a test bundle.
type webhookOpts struct {
	// refusePrivate leaves the guarded dialer on: loopback receivers are
	// refused at connect time.
	refusePrivate bool
	settings      func(*jobs.Settings)
}

// webhookBundle is the webhook side of a test bundle.
type webhookBundle struct {
	secret string

	mu       sync.Mutex
	outcomes []string
}

func (w *webhookBundle) Outcomes() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.outcomes...)
}

// testWebhookSettings retry fast, so that a schedule plays out in seconds.
func testWebhookSettings(s *jobs.Settings) {
	s.WebhookRetrySchedule = []time.Duration{10 * time.Millisecond, 10 * time.Millisecond}
	s.WebhookTimeout = dbtest.Patience() // a hang guard: a loopback receiver on a busy machine may take seconds
}

func (o *webhookOpts) register(t *testing.T, b *testBundle, workers *river.Workers,
	settings jobs.Settings, logger *slog.Logger) *webhookBundle {
	t.Helper()
	wb := &webhookBundle{secret: newSecret(t)}
	key, err := jobs.ParseWebhookSecret(wb.secret)
	require.NoError(t, err)
	river.AddWorker(workers, &jobs.WebhookWorker{
		DB: b.db.Pool, Client: jobs.WebhookClient(!o.refusePrivate, settings.WebhookTimeout), Key: key,
		UserAgent: "domainclass/test", Settings: settings, Logger: logger,
		OnDelivery: func(outcome string) {
			wb.mu.Lock()
			defer wb.mu.Unlock()
			wb.outcomes = append(wb.outcomes, outcome)
		},
	})
	return wb
}

// delivery is one request a receiver got.
type delivery struct {
	header http.Header
	body   []byte
	at     time.Time
}

// receiver is a webhook endpoint on loopback. answer writes the response
// to the nth request (from 1); nil answers 204.
type receiver struct {
	srv    *httptest.Server
	answer func(n int, w http.ResponseWriter, r *http.Request)

	mu  sync.Mutex
	got []delivery
}

func newReceiver(t *testing.T, answer func(n int, w http.ResponseWriter, r *http.Request)) *receiver {
	t.Helper()
	rc := &receiver{answer: answer}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got = append(rc.got, delivery{header: r.Header.Clone(), body: body, at: time.Now()})
		n := len(rc.got)
		rc.mu.Unlock()
		if rc.answer == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		rc.answer(n, w, r)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) URL() string { return rc.srv.URL + "/hooks/domainclass?token=abc" }

func (rc *receiver) deliveries() []delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]delivery(nil), rc.got...)
}

// answerStatuses answers the nth request with statuses[n-1], then 200.
func answerStatuses(statuses ...int) func(int, http.ResponseWriter, *http.Request) {
	return func(n int, w http.ResponseWriter, _ *http.Request) {
		if n <= len(statuses) {
			w.WriteHeader(statuses[n-1])
			_, _ = w.Write([]byte("nope"))
			return
		}
		w.WriteHeader(http.StatusOK)
	}
}

// webhookJobs lists the River webhook jobs.
func (b *testBundle) webhookJobs(t *testing.T) []*rivertype.JobRow {
	t.Helper()
	res, err := b.client.JobList(context.Background(), river.NewJobListParams().Kinds("webhook").First(100))
	require.NoError(t, err)
	return res.Jobs
}

// waitWebhook polls until there are n webhook jobs, all in state, and
// returns them.
func (b *testBundle) waitWebhook(t *testing.T, n int, state rivertype.JobState) []*rivertype.JobRow {
	t.Helper()
	var rows []*rivertype.JobRow
	require.Eventually(t, func() bool {
		rows = b.webhookJobs(t)
		if len(rows) != n {
			return false
		}
		for _, r := range rows {
			if r.State != state {
				return false
			}
		}
		return true
	}, dbtest.Patience(), 20*time.Millisecond, "want %d webhook jobs %s", n, state)
	return rows
}

// requireVerified checks a delivery with the Standard Webhooks reference
// library and returns its payload.
func requireVerified(t *testing.T, secret string, d delivery) map[string]any {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	require.NoError(t, wh.Verify(d.body, d.header), "delivery must verify")
	var payload map[string]any
	require.NoError(t, json.Unmarshal(d.body, &payload))
	return payload
}

func webhookArgs(t *testing.T, row *rivertype.JobRow) jobs.WebhookArgs {
	t.Helper()
	var a jobs.WebhookArgs
	require.NoError(t, json.Unmarshal(row.EncodedArgs, &a))
	return a
}

func TestWebhookWorker_Work(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("DeliversTheSignedReport", func(t *testing.T) {
		t.Parallel()
		b := setup(t, byDomain(nil), setupOpts{webhook: &webhookOpts{}})
		rc := newReceiver(t, nil)
		id := b.submitWithCallback(t, rc.URL(), "acme.com", "crm.io")
		job := b.waitJob(t, id, classifier.StatusCompleted)
		rows := b.waitWebhook(t, 1, rivertype.JobStateCompleted)

		got := rc.deliveries()
		require.Len(t, got, 1)
		d := got[0]
		payload := requireVerified(t, b.webhook.secret, d)
		require.Equal(t, "application/json", d.header.Get("Content-Type"))
		require.Equal(t, "domainclass/test", d.header.Get("User-Agent"))
		wantID := webhookArgs(t, rows[0]).WebhookID()
		require.Equal(t, wantID, d.header.Get("webhook-id"))
		require.True(t, strings.HasPrefix(wantID, "msg_"+id.String()+"_"), wantID)
		require.NotContains(t, wantID, ".", "Standard Webhooks ids must not contain dots")
		ts := d.header.Get("webhook-timestamp")
		require.InDelta(t, float64(d.at.Unix()), float64(mustAtoi(t, ts)), 5, "webhook-timestamp is the attempt's time")

		// The body is GET /domains/classify/{id} plus type and timestamp.
		require.Equal(t, "classification.completed", payload["type"])
		require.Equal(t, job.CompletedAt.UTC().Format(time.RFC3339Nano), payload["timestamp"])
		delete(payload, "type")
		delete(payload, "timestamp")
		report, err := json.Marshal(wire.NewJobReport(job, "is_cpg"))
		require.NoError(t, err)
		var want map[string]any
		require.NoError(t, json.Unmarshal(report, &want))
		require.Equal(t, want, payload)
		require.Equal(t, "COMPLETED", payload["status"])
		require.Equal(t, []string{jobs.WebhookDelivered}, b.webhook.Outcomes())

		// The verifier is not a no-op: a changed body, id or timestamp, or
		// another secret, fails.
		wh, err := standardwebhooks.NewWebhook(b.webhook.secret)
		require.NoError(t, err)
		tampered := bytes.Replace(d.body, []byte(`"COMPLETED"`), []byte(`"FAILED"`), 1)
		require.NotEqual(t, d.body, tampered)
		require.ErrorIs(t, wh.Verify(tampered, d.header), standardwebhooks.ErrNoMatchingSignature)
		otherID := d.header.Clone()
		otherID.Set("webhook-id", "msg_other")
		require.ErrorIs(t, wh.Verify(d.body, otherID), standardwebhooks.ErrNoMatchingSignature)
		otherTS := d.header.Clone()
		otherTS.Set("webhook-timestamp", itoa(mustAtoi(t, ts)-1))
		require.ErrorIs(t, wh.Verify(d.body, otherTS), standardwebhooks.ErrNoMatchingSignature)
		other, err := standardwebhooks.NewWebhook(newSecret(t))
		require.NoError(t, err)
		require.ErrorIs(t, other.Verify(d.body, d.header), standardwebhooks.ErrNoMatchingSignature)
	})

	t.Run("JobWithoutCallbackQueuesNoWebhook", func(t *testing.T) {
		t.Parallel()
		b := setup(t, byDomain(nil), setupOpts{webhook: &webhookOpts{}})
		b.waitJob(t, b.submit(t, "acme.com"), classifier.StatusCompleted)
		require.Empty(t, b.webhookJobs(t))
	})

	t.Run("RetriesUntilDeliveredWithTheSameID", func(t *testing.T) {
		t.Parallel()
		b := setup(t, byDomain(nil), setupOpts{webhook: &webhookOpts{}})
		rc := newReceiver(t, answerStatuses(500, 500))
		b.submitWithCallback(t, rc.URL(), "acme.com")
		row := b.waitWebhook(t, 1, rivertype.JobStateCompleted)[0]

		got := rc.deliveries()
		require.Len(t, got, 3)
		for _, d := range got {
			requireVerified(t, b.webhook.secret, d)
			require.Equal(t, got[0].header.Get("webhook-id"), d.header.Get("webhook-id"))
			require.Equal(t, got[0].body, d.body, "every attempt sends the same body")
		}
		require.Equal(t, 3, row.Attempt)
		require.Len(t, row.Errors, 2)
		require.Contains(t, row.Errors[0].Error, "answered 500: \"nope\"")
		require.NotContains(t, row.Errors[0].Error, "token=abc", "the query string may hold a secret")
		require.Equal(t, []string{jobs.WebhookFailed, jobs.WebhookFailed, jobs.WebhookDelivered}, b.webhook.Outcomes())
	})

	t.Run("GoneStopsDeliveries", func(t *testing.T) {
		t.Parallel()
		b := setup(t, byDomain(nil), setupOpts{webhook: &webhookOpts{}})
		rc := newReceiver(t, answerStatuses(http.StatusGone))
		b.submitWithCallback(t, rc.URL(), "acme.com")
		row := b.waitWebhook(t, 1, rivertype.JobStateCancelled)[0]
		require.Equal(t, 1, row.Attempt)
		require.Contains(t, row.Errors[0].Error, "410 Gone")
		require.Len(t, rc.deliveries(), 1, "no further attempt after 410")
		require.Equal(t, []string{jobs.WebhookGone}, b.webhook.Outcomes())
	})

	t.Run("SlowReceiverTimesOutAndIsRetried", func(t *testing.T) {
		t.Parallel()
		b := setup(t, byDomain(nil), setupOpts{webhook: &webhookOpts{settings: func(s *jobs.Settings) {
			s.WebhookTimeout = 300 * time.Millisecond
		}}})
		rc := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
			if n == 1 {
				<-r.Context().Done() // hangs until the sender gives up
				return
			}
			w.WriteHeader(http.StatusOK)
		})
		b.submitWithCallback(t, rc.URL(), "acme.com")
		row := b.waitWebhook(t, 1, rivertype.JobStateCompleted)[0]
		require.Equal(t, 2, row.Attempt)
		require.Contains(t, row.Errors[0].Error, "Client.Timeout exceeded")
		got := rc.deliveries()
		require.Len(t, got, 2)
		requireVerified(t, b.webhook.secret, got[1])
		require.Equal(t, []string{jobs.WebhookFailed, jobs.WebhookDelivered}, b.webhook.Outcomes())
	})

	// Found by a hostile review: 40 jobs with a callback that never answers
	// took all 20 webhook workers, and another caller's webhook came 26.9 s
	// late. Here 5 workers: without the per-receiver bound, the hanging
	// receiver would take all 5 and the healthy one would wait for good.
	t.Run("AHangingReceiverHoldsAtMostItsShareOfWorkers", func(t *testing.T) {
		t.Parallel()
		b := setup(t, byDomain(nil), setupOpts{webhook: &webhookOpts{settings: func(s *jobs.Settings) {
			// The hanging receiver must hold its deliveries for longer than
			// the test waits for the healthy one: a timeout that freed a
			// worker first would let the healthy delivery through without
			// the bound.
			s.WebhookWorkers, s.WebhookPerHost, s.WebhookTimeout = 5, 4, 2*dbtest.Patience()
		}}})
		release := make(chan struct{})
		var inFlight, most atomic.Int32
		hanging := newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
			n := inFlight.Add(1)
			defer inFlight.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			select {
			case <-release:
			case <-r.Context().Done():
			}
		})
		defer close(release)
		for i := range 10 {
			b.submitWithCallback(t, hanging.URL(), fmt.Sprintf("hang%d.com", i))
		}
		require.Eventually(t, func() bool { return inFlight.Load() == 4 }, dbtest.Patience(), 10*time.Millisecond,
			"the hanging receiver gets its 4 deliveries")
		healthy := newReceiver(t, nil)
		b.submitWithCallback(t, healthy.URL(), "acme.com")
		require.Eventually(t, func() bool { return len(healthy.deliveries()) == 1 }, dbtest.Patience(), 10*time.Millisecond,
			"the healthy receiver is served while the other hangs")
		require.EqualValues(t, 4, most.Load(), "never more than WebhookPerHost at once to one receiver")
		require.Contains(t, b.webhook.Outcomes(), jobs.WebhookDeferred, "the other deliveries to it wait")
		require.Len(t, hanging.deliveries(), 4, "and send nothing meanwhile")
	})

	t.Run("SoftStopMidDeliveryIsNoFailure", func(t *testing.T) {
		t.Parallel()
		b := setup(t, byDomain(nil), setupOpts{
			settings: func(s *jobs.Settings) { s.SoftStopTimeout = 200 * time.Millisecond },
			webhook:  &webhookOpts{},
		})
		rc := newReceiver(t, func(_ int, _ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
		b.submitWithCallback(t, rc.URL(), "acme.com")
		require.Eventually(t, func() bool { return len(rc.deliveries()) == 1 }, dbtest.Patience(), 10*time.Millisecond)
		stopCtx, cancel := context.WithTimeout(ctx, dbtest.Patience())
		defer cancel()
		require.NoError(t, b.client.Stop(stopCtx))
		row := b.webhookJobs(t)[0]
		require.Equal(t, rivertype.JobStateAvailable, row.State, "put back for the next worker")
		require.Equal(t, 0, row.Attempt, "a stopping worker uses up no attempt")
		require.Empty(t, row.Errors)
		require.Empty(t, b.webhook.Outcomes())
	})

	t.Run("ThrottledWaitsAsAskedWithoutUsingAnAttempt", func(t *testing.T) {
		t.Parallel()
		b := setup(t, byDomain(nil), setupOpts{webhook: &webhookOpts{}})
		rc := newReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
			switch n {
			case 1:
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusTooManyRequests)
			case 2:
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusServiceUnavailable)
			default:
				w.WriteHeader(http.StatusOK)
			}
		})
		b.submitWithCallback(t, rc.URL(), "acme.com")
		row := b.waitWebhook(t, 1, rivertype.JobStateCompleted)[0]
		require.Equal(t, 1, row.Attempt, "a throttle must not use up an attempt")
		require.Empty(t, row.Errors)
		got := rc.deliveries()
		require.Len(t, got, 3)
		require.GreaterOrEqual(t, got[1].at.Sub(got[0].at), 900*time.Millisecond, "Retry-After is honoured")
		require.GreaterOrEqual(t, got[2].at.Sub(got[1].at), 900*time.Millisecond, "Retry-After is honoured")
		require.Equal(t, []string{jobs.WebhookThrottled, jobs.WebhookThrottled, jobs.WebhookDelivered}, b.webhook.Outcomes())
	})

	t.Run("EndlessThrottlingStillReachesTheEndOfTheSchedule", func(t *testing.T) {
		t.Parallel()
		b := setup(t, byDomain(nil), setupOpts{webhook: &webhookOpts{settings: func(s *jobs.Settings) {
			s.WebhookMaxThrottles = 2
			s.WebhookRetrySchedule = []time.Duration{10 * time.Millisecond}
		}}})
		rc := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
		})
		b.submitWithCallback(t, rc.URL(), "acme.com")
		row := b.waitWebhook(t, 1, rivertype.JobStateDiscarded)[0]
		require.Len(t, rc.deliveries(), 4, "2 throttles honoured, then 2 attempts")
		require.Len(t, row.Errors, 2)
		require.Equal(t, []string{jobs.WebhookThrottled, jobs.WebhookThrottled, jobs.WebhookFailed, jobs.WebhookDiscarded},
			b.webhook.Outcomes())
	})

	t.Run("AListEndDeliversItsStatusNotItsRows", func(t *testing.T) {
		t.Parallel()
		b := setup(t, byDomain(nil), setupOpts{webhook: &webhookOpts{}})
		rc := newReceiver(t, nil)
		tx, err := b.db.Pool.Begin(ctx)
		require.NoError(t, err)
		l := acceptList(t, tx, b.client, listSettings(2, 2), rc.URL(), "a.com", "b.com", "localhost", "a.com")
		require.NoError(t, tx.Commit(ctx))
		row := b.waitWebhook(t, 1, rivertype.JobStateCompleted)[0]
		require.Equal(t, l.ID.String(), webhookArgs(t, row).ListID)
		got := rc.deliveries()
		require.Len(t, got, 1)
		payload := requireVerified(t, b.webhook.secret, got[0])
		require.True(t, strings.HasPrefix(got[0].header.Get("webhook-id"), "msg_"+l.ID.String()+"_"))
		require.Equal(t, "list.completed", payload["type"])
		require.Equal(t, "COMPLETED", payload["status"])
		require.Equal(t, "/lists/"+l.ID.String()+"/results", payload["results_url"])
		require.Equal(t, map[string]any{"done": 4.0, "total": 4.0, "completed": 3.0, "failed": 0.0, "rejected": 1.0,
			"cancelled": 0.0, "override": 0.0, "known": 0.0, "cache": 0.0, "llm": 3.0}, payload["progress"])
		require.NotContains(t, payload, "results", "the rows are fetched from results_url")
		require.Equal(t, payload["completed_at"], payload["timestamp"])
		completedAt, err := time.Parse(time.RFC3339Nano, payload["completed_at"].(string))
		require.NoError(t, err)
		expiresAt, err := time.Parse(time.RFC3339Nano, fmt.Sprint(payload["expires_at"]))
		require.NoError(t, err, "the status says until when the results can be downloaded")
		require.Equal(t, completedAt.Add(jobs.DefaultListRetention), expiresAt)
	})

	t.Run("AnOversizedReportIsSentWithoutEvidenceThenWithoutResults", func(t *testing.T) {
		t.Parallel()
		// A provider that shows the model 200 pages, each with an address
		// at the cap: 400 KB of evidence for one domain.
		pages := searchFunc(func(context.Context, string) (classifier.Evidence, error) {
			ev := classifier.Evidence{Provider: "many"}
			for i := range 200 {
				u := fmt.Sprintf("https://acme.com/%03d/", i)
				ev.Sources = append(ev.Sources, classifier.EvidenceItem{URL: u + strings.Repeat("a", classifier.EvidenceURLMaxBytes-len(u)), Title: "Acme"})
			}
			return ev, nil
		})
		b := setup(t, byDomain(nil), setupOpts{webhook: &webhookOpts{}, search: pages})
		setOverride(t, b.db.Pool, "huge.com", true, 5, "ops", strings.Repeat("Makes snacks. ", 25_000)) // a 350 KB note
		rc := newReceiver(t, nil)
		evidenceJob := b.submitWithCallback(t, rc.URL(), "acme.com", "crm.io")
		b.waitWebhook(t, 1, rivertype.JobStateCompleted)
		noteJob := b.submitWithCallback(t, rc.URL(), "huge.com", "crm.io")
		b.waitWebhook(t, 2, rivertype.JobStateCompleted)

		byJob := map[string]map[string]any{}
		for _, d := range rc.deliveries() {
			require.LessOrEqual(t, len(d.body), jobs.WebhookMaxBodyBytes, "a delivery's body is bounded")
			p := requireVerified(t, b.webhook.secret, d)
			byJob[p["job_id"].(string)] = p
		}
		p := byJob[evidenceJob.String()]
		require.Equal(t, wire.OmittedEvidence, p["omitted"], "the evidence is left out first")
		results := p["results"].([]any)
		require.Len(t, results, 2, "the answers are all there")
		for _, r := range results {
			require.Equal(t, true, r.(map[string]any)["is_cpg"])
			require.NotContains(t, r, "evidence")
		}
		p = byJob[noteJob.String()]
		require.Equal(t, wire.OmittedResults, p["omitted"], "then the results: GET the job for them")
		require.Empty(t, p["results"])
		require.Equal(t, "COMPLETED", p["status"])
		require.Equal(t, map[string]any{"total": 2.0, "done": 2.0}, p["progress"])
		require.Equal(t, []string{jobs.WebhookDelivered, jobs.WebhookDelivered}, b.webhook.Outcomes())
	})

	t.Run("FailedJobIsDeliveredWithItsError", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(llmtest.Request) llmtest.Reply { return llmtest.Status(http.StatusServiceUnavailable, nil) },
			setupOpts{settings: func(s *jobs.Settings) { s.MaxAttempts = 1 }, webhook: &webhookOpts{}})
		rc := newReceiver(t, nil)
		id := b.submitWithCallback(t, rc.URL(), "acme.com")
		b.waitJob(t, id, classifier.StatusFailed)
		b.waitWebhook(t, 1, rivertype.JobStateCompleted)
		got := rc.deliveries()
		require.Len(t, got, 1)
		payload := requireVerified(t, b.webhook.secret, got[0])
		require.Equal(t, "FAILED", payload["status"])
		require.Contains(t, payload["error"], "gave up after 1 attempts")
		require.Contains(t, payload["error"], "503 Service Unavailable")
		require.Equal(t, id.String(), payload["job_id"])
	})

	t.Run("RedeliveredJobQueuesNoSecondWebhook", func(t *testing.T) {
		t.Parallel()
		b := setup(t, byDomain(nil), setupOpts{webhook: &webhookOpts{}})
		rc := newReceiver(t, nil)
		job := b.waitJob(t, b.submitWithCallback(t, rc.URL(), "acme.com"), classifier.StatusCompleted)
		b.waitWebhook(t, 1, rivertype.JobStateCompleted)

		// The classify job runs again after it ended (as after a rescue, a
		// redelivery or an operator's retry).
		_, err := b.client.JobRetry(ctx, job.RiverJobID)
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			row := b.riverJob(t, job)
			return row.Attempt == 2 && row.State == rivertype.JobStateCompleted
		}, dbtest.Patience(), 20*time.Millisecond)
		require.Len(t, b.webhookJobs(t), 1, "exactly one webhook per job end")
		require.Len(t, rc.deliveries(), 1)
	})

	t.Run("TwoRunsOfOneJobEndingTogetherQueueOneWebhook", func(t *testing.T) {
		t.Parallel()
		release := make(chan struct{})
		b := setup(t, func(llmtest.Request) llmtest.Reply {
			a := llmtest.Answer(true, 5, "Snacks.")
			a.Wait = release
			return a
		}, setupOpts{webhook: &webhookOpts{}})
		rc := newReceiver(t, nil)
		id := b.submitWithCallback(t, rc.URL(), "acme.com")
		// A second River job for the same app job, as when a job is rescued
		// while its first run is still alive: both runs finish the job.
		_, err := b.client.Insert(ctx, duplicateClassifyArgs{JobID: id.String()}, &river.InsertOpts{Queue: jobs.QueueClassify})
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			n, err := b.client.JobList(ctx, river.NewJobListParams().Kinds("classify").States(rivertype.JobStateRunning))
			require.NoError(t, err)
			return len(n.Jobs) == 2 && b.llm.Total() == 1
		}, dbtest.Patience(), 10*time.Millisecond)
		close(release)
		require.Eventually(t, func() bool {
			n, err := b.client.JobList(ctx, river.NewJobListParams().Kinds("classify").States(rivertype.JobStateCompleted))
			require.NoError(t, err)
			return len(n.Jobs) == 2
		}, dbtest.Patience(), 20*time.Millisecond)
		b.waitWebhook(t, 1, rivertype.JobStateCompleted)
		require.Len(t, rc.deliveries(), 1, "exactly one webhook per job end")
	})

	t.Run("JobEndingTwiceSendsTwoMessages", func(t *testing.T) {
		t.Parallel()
		var failing atomic.Bool
		failing.Store(true)
		b := setup(t, func(llmtest.Request) llmtest.Reply {
			if failing.Load() {
				return llmtest.Status(http.StatusServiceUnavailable, nil)
			}
			return llmtest.Answer(true, 5, "Snacks.")
		}, setupOpts{settings: func(s *jobs.Settings) { s.MaxAttempts = 1 }, webhook: &webhookOpts{}})
		rc := newReceiver(t, nil)
		job := b.waitJob(t, b.submitWithCallback(t, rc.URL(), "acme.com"), classifier.StatusFailed)
		b.waitWebhook(t, 1, rivertype.JobStateCompleted)

		failing.Store(false)
		_, err := b.client.JobRetry(ctx, job.RiverJobID) // an operator replays the FAILED job
		require.NoError(t, err)
		b.waitJob(t, job.ID, classifier.StatusCompleted)
		b.waitWebhook(t, 2, rivertype.JobStateCompleted)

		got := rc.deliveries()
		require.Len(t, got, 2)
		first, second := requireVerified(t, b.webhook.secret, got[0]), requireVerified(t, b.webhook.secret, got[1])
		require.Equal(t, "FAILED", first["status"])
		require.Equal(t, "COMPLETED", second["status"])
		require.NotEqual(t, got[0].header.Get("webhook-id"), got[1].header.Get("webhook-id"),
			"a new end is a new message, not a duplicate to drop")
		for _, d := range got {
			require.True(t, strings.HasPrefix(d.header.Get("webhook-id"), "msg_"+job.ID.String()+"_"))
		}
	})

	t.Run("PrivateAddressIsRefusedAtConnect", func(t *testing.T) {
		t.Parallel()
		b := setup(t, byDomain(nil), setupOpts{webhook: &webhookOpts{refusePrivate: true, settings: func(s *jobs.Settings) {
			s.WebhookRetrySchedule = []time.Duration{10 * time.Millisecond}
		}}})
		rc := newReceiver(t, nil)
		u, err := url.Parse(rc.srv.URL)
		require.NoError(t, err)
		// A name (not a literal address) that resolves to loopback; the API
		// would refuse it at accept, so it is written directly.
		b.submitWithCallback(t, "http://localhost:"+u.Port()+"/hook", "acme.com")
		row := b.waitWebhook(t, 1, rivertype.JobStateDiscarded)[0]
		require.Len(t, row.Errors, 2)
		require.Contains(t, row.Errors[0].Error, "not a public internet address")
		require.Empty(t, rc.deliveries(), "no request may reach a private address")
		require.Equal(t, []string{jobs.WebhookFailed, jobs.WebhookDiscarded}, b.webhook.Outcomes())
	})

	t.Run("DiscardedDeliveryIsReplayedWithTheSameID", func(t *testing.T) {
		t.Parallel()
		var down atomic.Bool
		down.Store(true)
		b := setup(t, byDomain(nil), setupOpts{webhook: &webhookOpts{settings: func(s *jobs.Settings) {
			s.WebhookRetrySchedule = []time.Duration{10 * time.Millisecond}
		}}})
		rc := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
			if down.Load() {
				w.WriteHeader(http.StatusBadGateway)
				return
			}
			w.WriteHeader(http.StatusOK)
		})
		b.submitWithCallback(t, rc.URL(), "acme.com")
		row := b.waitWebhook(t, 1, rivertype.JobStateDiscarded)[0]
		require.Len(t, rc.deliveries(), 2)

		down.Store(false)
		_, err := b.client.JobRetry(ctx, row.ID) // River UI's and `jobs retry`'s replay
		require.NoError(t, err)
		row = b.waitWebhook(t, 1, rivertype.JobStateCompleted)[0]
		require.Equal(t, 3, row.Attempt)
		got := rc.deliveries()
		require.Len(t, got, 3)
		for _, d := range got {
			requireVerified(t, b.webhook.secret, d)
			require.Equal(t, got[0].header.Get("webhook-id"), d.header.Get("webhook-id"))
		}
		require.Equal(t, []string{jobs.WebhookFailed, jobs.WebhookDiscarded, jobs.WebhookDelivered}, b.webhook.Outcomes())
	})

	t.Run("StaleEndIsSkipped", func(t *testing.T) {
		t.Parallel()
		b := setup(t, byDomain(nil), setupOpts{webhook: &webhookOpts{}})
		rc := newReceiver(t, nil)
		job := b.waitJob(t, b.submitWithCallback(t, rc.URL(), "acme.com"), classifier.StatusCompleted)
		b.waitWebhook(t, 1, rivertype.JobStateCompleted)

		// A delivery of an earlier end of this job (since retried) sends
		// nothing: the current end has its own.
		stale, err := b.client.Insert(ctx, jobs.WebhookArgs{JobID: job.ID.String(), EndedAt: job.CompletedAt.Add(-time.Minute)}, nil)
		require.NoError(t, err)
		requireCancelled(t, b, stale.Job.ID)
		unknown, err := b.client.Insert(ctx, jobs.WebhookArgs{JobID: uuid.NewString(), EndedAt: time.Now()}, nil)
		require.NoError(t, err)
		requireCancelled(t, b, unknown.Job.ID)
		require.Len(t, rc.deliveries(), 1)
	})
}

// duplicateClassifyArgs is a ClassifyArgs without its uniqueness.
type duplicateClassifyArgs struct {
	JobID string `json:"job_id"`
}

func (duplicateClassifyArgs) Kind() string { return "classify" }

func TestWebhookWorker_NextRetry(t *testing.T) {
	t.Parallel()
	w := &jobs.WebhookWorker{Settings: jobs.DefaultSettings()}
	schedule := jobs.DefaultWebhookRetrySchedule()
	require.Equal(t, 11, w.Settings.WebhookMaxAttempts())
	var total time.Duration
	for _, d := range schedule {
		total += d
	}
	require.Equal(t, 75*time.Hour+35*time.Minute+10*time.Second, total, "about three days, as in the spec's example")

	for failures := range len(schedule) + 3 {
		want := schedule[min(failures, len(schedule)-1)]
		job := &river.Job[jobs.WebhookArgs]{JobRow: &rivertype.JobRow{Errors: make([]rivertype.AttemptError, failures)}}
		before := time.Now()
		got := w.NextRetry(job).Sub(before)
		require.GreaterOrEqual(t, got, want-want/10, "after %d failures", failures+1)
		require.LessOrEqual(t, got, want+want/10+time.Second, "after %d failures", failures+1)
	}
}

func TestSignWebhook(t *testing.T) {
	t.Parallel()
	secret := newSecret(t)
	key, err := jobs.ParseWebhookSecret(secret)
	require.NoError(t, err)
	wh, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)

	body := []byte(`{"type":"classification.completed","job_id":"x"}`)
	now := time.Now()
	want, err := wh.Sign("msg_1", now, body)
	require.NoError(t, err)
	require.Equal(t, want, jobs.SignWebhook(key, "msg_1", now, body))

	h := http.Header{}
	h.Set("webhook-id", "msg_1")
	h.Set("webhook-timestamp", itoa(now.Unix()))
	h.Set("webhook-signature", jobs.SignWebhook(key, "msg_1", now, body))
	require.NoError(t, wh.Verify(body, h))
	require.Error(t, wh.Verify(append(bytes.Clone(body), ' '), h))
}

func TestParseWebhookSecret(t *testing.T) {
	t.Parallel()
	key24 := base64.StdEncoding.EncodeToString(make([]byte, 24))
	key64 := base64.StdEncoding.EncodeToString(make([]byte, 64))
	for _, ok := range []string{"whsec_" + key24, "whsec_" + key64, newSecret(t)} {
		_, err := jobs.ParseWebhookSecret(ok)
		require.NoError(t, err, ok)
	}
	for secret, want := range map[string]string{
		key24:       "must start with whsec_",
		"whsec_":    "must hold 24 to 64 random bytes, got 0",
		"whsec_!!!": "standard base64",
		"whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 16)): "got 16",
		"whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 65)): "got 65",
	} {
		_, err := jobs.ParseWebhookSecret(secret)
		require.ErrorContains(t, err, want, secret)
		if rest := strings.TrimPrefix(secret, "whsec_"); rest != "" {
			require.NotContains(t, err.Error(), rest, "errors never repeat the secret")
		}
	}
}

func mustAtoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	require.NoError(t, err, s)
	return n
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// searchFunc is a search provider as a function.
type searchFunc func(ctx context.Context, domain string) (classifier.Evidence, error)

func (f searchFunc) Search(ctx context.Context, domain string) (classifier.Evidence, error) {
	return f(ctx, domain)
}
