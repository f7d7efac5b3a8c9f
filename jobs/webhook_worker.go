package jobs

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/classifier/netguard"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/wire"
)

// Outcomes of one delivery attempt, reported to WebhookWorker.OnDelivery
// (the outcome label of domainclass_webhook_deliveries_total).
const (
	// webhookDelivered: the receiver answered 2xx; the delivery is done.
	webhookDelivered = "delivered"
	// webhookGone: the receiver answered 410 Gone; the delivery is cancelled
	// and never tried again.
	webhookGone = "gone"
	// webhookThrottled: the receiver answered 429 or 503 with Retry-After;
	// the delivery is snoozed for that long without using an attempt.
	webhookThrottled = "throttled"
	// webhookFailed: any other answer, a timeout, a refused or failed
	// connection; the delivery is retried on the schedule.
	webhookFailed = "failed"
	// webhookDiscarded: a failure on the last attempt; River discards the
	// delivery, and an operator can replay it.
	webhookDiscarded = "discarded"
	// webhookSkipped: nothing to deliver (the job is gone, has no callback
	// URL, or ended again since, and that newer end has its own delivery);
	// the delivery is cancelled without a request.
	webhookSkipped = "skipped"
	// webhookDeferred: the receiver or the caller already had every
	// delivery slot of this process (WebhookPerHost, WebhookPerCaller); the
	// delivery waits WebhookBusySnooze without a request or an attempt.
	webhookDeferred = "deferred"
)

// tracer makes the deliveries' spans (a no-op until tracing is set up).
// It asks the global provider each time, so that the one installed last
// serves (in production there is one; tests install their own).
func tracer() trace.Tracer { return otel.Tracer("github.com/domainclass/domainclass/jobs") }

// webhookMaxBodyBytes bounds a delivery's body: 256 KiB. A job's report is
// about 20 KiB with five pages of evidence for each of its ten domains, and
// under 200 KiB with every field at its cap; receivers and their gateways
// often refuse bodies of a megabyte, and Standard Webhooks advises small
// ones. A report over it is sent without its results' evidence, and if
// still over, without its results (WebhookPayload.Omitted says which): the
// receiver GETs the job for the rest. A list's delivery carries no rows.
const webhookMaxBodyBytes = 256 << 10

// webhookMaxResponseBytes caps how much of a receiver's answer is read:
// enough to reuse the connection after a normal answer, never a download.
const webhookMaxResponseBytes = 64 << 10

// WebhookArgs is the delivery of one end of a job, or of a list, to its
// callback URL. Like ClassifyArgs it is a claim check: the report is read
// when it is sent.
type WebhookArgs struct {
	JobID  string `json:"job_id,omitempty"`
	ListID string `json:"list_id,omitempty"`
	// EndedAt is the job's (or list's) completed_at for the end being
	// delivered. A job can end more than once (FAILED, retried by an
	// operator, COMPLETED), and each end is its own message.
	EndedAt time.Time `json:"ended_at"`
	// ChangeID, when set, makes this the answer.changed delivery of that
	// change (answer_change.id) to the job or list, which received the
	// answer it replaced; EndedAt is then unused.
	ChangeID int64 `json:"change_id,omitempty"`
}

// subject is the id of what ended: the job's, or the list's.
func (a WebhookArgs) subject() string { return cmp.Or(a.JobID, a.ListID) }

// Kind is the River job kind.
func (WebhookArgs) Kind() string { return "webhook" }

// InsertOpts puts deliveries on their own queue, unique by args: one
// delivery per job end even if the end were reported twice.
func (WebhookArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueWebhook, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// WebhookID is the delivery's webhook-id: the same for every attempt and
// replay of this delivery, so receivers can dedupe on it, and different for
// another end of the same job, which carries news (a COMPLETED after a
// FAILED must not be dropped as a duplicate). It is the job's (or list's)
// id and the end's time in Unix microseconds: "msg_<id>_<micros>".
//
// An answer.changed delivery's is "msg_change_<change id>_<id>": one per
// change and recipient.
func (a WebhookArgs) WebhookID() string {
	if a.ChangeID != 0 {
		return "msg_change_" + strconv.FormatInt(a.ChangeID, 10) + "_" + a.subject()
	}
	return "msg_" + a.subject() + "_" + strconv.FormatInt(a.EndedAt.UnixMicro(), 10)
}

// webhookOutput is recorded on the River job (River UI shows it).
type webhookOutput struct {
	WebhookID  string `json:"webhook_id"`
	StatusCode int    `json:"status_code,omitempty"`
	DurationMS int64  `json:"duration_ms"`
}

// WebhookClient returns the HTTP client of deliveries: the guarded dialer
// of netguard (the one the homepage search provider uses), which refuses
// private, loopback, link-local and metadata addresses at connect time
// unless allowPrivate; redirects are not followed (a 3xx is a failure); each
// request is bounded by timeout.
func WebhookClient(allowPrivate bool, timeout time.Duration) *http.Client {
	d := &netguard.Dialer{AllowPrivate: allowPrivate, Timeout: timeout}
	return d.Client(timeout, 0)
}

// WebhookWorker works WebhookArgs: it POSTs the job's report to its
// callback URL, signed per Standard Webhooks.
type WebhookWorker struct {
	river.WorkerDefaults[WebhookArgs]

	DB db.DBTX
	// Client sends the requests; use WebhookClient.
	Client *http.Client
	// Key signs deliveries (ParseWebhookSecret of WEBHOOK_SECRET). Without
	// it every attempt fails with an error saying so, and is retried.
	Key       []byte
	UserAgent string
	Settings  Settings
	Logger    *slog.Logger
	// Registry names each classifier's answer field in a job's delivery
	// (is_cpg for cpg); nil is the built-in classifiers.
	Registry *classifier.Registry
	// OnDelivery, when set, is called once per attempt with its outcome
	// (webhookDelivered, webhookGone, webhookThrottled, webhookFailed,
	// webhookDiscarded, webhookSkipped, webhookDeferred), for metrics.
	OnDelivery func(outcome string)

	slots deliverySlots
}

// deliverySlots counts this process's deliveries in flight by receiver
// and by caller, so that one slow receiver, or one caller's many, cannot
// hold every webhook worker while other receivers wait.
type deliverySlots struct {
	mu       sync.Mutex
	byHost   map[string]int
	byCaller map[string]int
}

// take reserves a slot for host and caller if both are under their
// limits, and returns its release.
func (s *deliverySlots) take(host, caller string, perHost, perCaller int) (release func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byHost == nil {
		s.byHost, s.byCaller = map[string]int{}, map[string]int{}
	}
	if s.byHost[host] >= perHost || s.byCaller[caller] >= perCaller {
		return nil, false
	}
	s.byHost[host]++
	s.byCaller[caller]++
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.byHost[host]--; s.byHost[host] == 0 {
			delete(s.byHost, host)
		}
		if s.byCaller[caller]--; s.byCaller[caller] == 0 {
			delete(s.byCaller, caller)
		}
	}, true
}

// Timeout is the delivery timeout plus a margin, so that the request's own
// timeout fires first.
func (w *WebhookWorker) Timeout(*river.Job[WebhookArgs]) time.Duration {
	return w.Settings.WebhookJobTimeout()
}

// NextRetry follows WEBHOOK_RETRY_SCHEDULE: after the nth failure it waits
// the nth duration (the last one again beyond its end, after a replay),
// with ±10% jitter so that deliveries failed together are not retried in
// lockstep.
func (w *WebhookWorker) NextRetry(job *river.Job[WebhookArgs]) time.Time {
	return time.Now().Add(webhookRetryDelay(w.Settings.WebhookRetrySchedule, len(job.Errors)))
}

// webhookRetryDelay is the wait after failures+1 failed attempts (River
// appends the current error after asking).
func webhookRetryDelay(schedule []time.Duration, failures int) time.Duration {
	d := scheduledDelay(schedule, failures)
	if d <= 0 {
		return 0
	}
	return d - d/10 + time.Duration(rand.Int64N(int64(d/5)+1))
}

// scheduledDelay is the schedule's wait after failures+1 failed attempts,
// before jitter: its last entry again beyond its end, 0 for no schedule.
func scheduledDelay(schedule []time.Duration, failures int) time.Duration {
	if len(schedule) == 0 {
		return 0
	}
	return schedule[min(failures, len(schedule)-1)]
}

// Work delivers the job end. Outcomes: nil on a 2xx; a cancel on 410 Gone
// or when there is nothing to deliver; a snooze when the receiver throttles
// with Retry-After (at most WebhookMaxThrottles times); an error for
// anything else, which River retries on NextRetry's schedule and discards
// after the last attempt.
func (w *WebhookWorker) Work(ctx context.Context, job *river.Job[WebhookArgs]) error {
	wid := job.Args.WebhookID()
	log := w.Logger.With("job_id", job.Args.JobID, "list_id", job.Args.ListID, "river_job_id", job.ID,
		"attempt", job.Attempt, "webhook_id", wid)

	callback, caller, body, err := w.load(ctx, job.Args)
	if skip := (*skipError)(nil); errors.As(err, &skip) {
		return w.skip(ctx, log, skip.err)
	} else if err != nil {
		return w.fail(ctx, log, job, err)
	}
	target, err := url.Parse(callback)
	if err != nil || (target.Scheme != "http" && target.Scheme != "https") || target.Host == "" {
		return w.skip(ctx, log, errors.New("the callback URL is not an absolute http(s) URL"))
	}
	if len(w.Key) == 0 {
		return w.fail(ctx, log, job, errors.New("WEBHOOK_SECRET is not set in this worker, so deliveries cannot be signed"))
	}
	release, ok := w.slots.take(strings.ToLower(target.Host), caller, w.Settings.WebhookPerHost, w.Settings.WebhookPerCaller)
	if !ok {
		log.DebugContext(ctx, "receiver or caller has every delivery slot; waiting", "host", target.Hostname())
		w.report(webhookDeferred)
		return river.JobSnooze(WebhookBusySnooze - WebhookBusySnooze/4 + time.Duration(rand.Int64N(int64(WebhookBusySnooze/2))))
	}
	defer release()
	return w.deliver(ctx, log, job, target, body)
}

// skipError marks a delivery with nothing to send.
type skipError struct{ err error }

func (e *skipError) Error() string { return e.err.Error() }

func skipf(format string, args ...any) error { return &skipError{fmt.Errorf(format, args...)} }

// load reads what the end delivers: the job's report (as GET
// /domains/classify/{id} shows it) or the list's status, and where to. A
// *skipError says there is nothing to deliver: the job or list is gone,
// has no callback URL, or ended again since (that end has its own delivery).
func (w *WebhookWorker) load(ctx context.Context, a WebhookArgs) (callback, caller string, body []byte, err error) {
	if a.ChangeID != 0 {
		return w.loadChange(ctx, a)
	}
	kind := "job"
	if a.ListID != "" {
		kind = "list"
	}
	id, err := uuid.Parse(a.subject())
	if err != nil {
		return "", "", nil, skipf("malformed args: %s id %q is not a UUID", kind, a.subject())
	}
	var (
		l           *classifier.List
		j           *classifier.Job
		completedAt *time.Time
		status      classifier.Status
	)
	if kind == "list" {
		if l, err = db.ListGet(ctx, w.DB, id); err == nil {
			callback, caller, completedAt, status = l.CallbackURL, l.Caller, l.CompletedAt, l.Status
		}
	} else if j, err = db.JobGet(ctx, w.DB, id); err == nil {
		callback, caller, completedAt, status = j.CallbackURL, j.Caller, j.CompletedAt, j.Status
	}
	switch {
	case errors.Is(err, db.ErrNotFound):
		return "", "", nil, skipf("%s %s does not exist", kind, id)
	case err != nil:
		return "", "", nil, fmt.Errorf("error loading %s %s: %w", kind, id, err)
	}
	switch {
	case callback == "":
		return "", "", nil, skipf("%s %s has no callback URL", kind, id)
	case completedAt == nil || !completedAt.Equal(a.EndedAt):
		// Retried since this end (and may have ended again, with a delivery
		// of its own): this report would be stale.
		return "", "", nil, skipf("%s %s has been retried since this end (now %s); the newer end is delivered on its own", kind, id, status)
	}
	// The event's time is when it ended.
	if l != nil {
		body, err = json.Marshal(wire.ListWebhookPayload{Type: wire.EventListCompleted, Timestamp: completedAt.UTC(),
			ListStatus: wire.NewListStatus(l)})
	} else {
		body, err = w.jobBody(ctx, wire.WebhookPayload{Type: wire.EventClassificationCompleted, Timestamp: completedAt.UTC(),
			JobReport: wire.NewJobReport(j, w.registry().AnswerField(j.Classifier))})
	}
	if err != nil {
		return "", "", nil, fmt.Errorf("error encoding the report: %w", err)
	}
	return callback, caller, body, nil
}

func (w *WebhookWorker) registry() *classifier.Registry {
	if w.Registry == nil {
		return classifier.DefaultRegistry()
	}
	return w.Registry
}

// jobBody encodes a job's delivery within webhookMaxBodyBytes: whole; or
// without its results' evidence; or without its results (answers stored
// before evidence addresses were capped, an operator's very long note).
func (w *WebhookWorker) jobBody(ctx context.Context, p wire.WebhookPayload) ([]byte, error) {
	body, err := json.Marshal(p)
	if err != nil || len(body) <= webhookMaxBodyBytes {
		return body, err
	}
	whole := len(body)
	for i := range p.Results {
		p.Results[i].Evidence = nil
	}
	p.Omitted = wire.OmittedEvidence
	if body, err = json.Marshal(p); err == nil && len(body) > webhookMaxBodyBytes {
		p.Results, p.Omitted = []wire.ResultReport{}, wire.OmittedResults
		body, err = json.Marshal(p)
	}
	if err == nil {
		w.Logger.WarnContext(ctx, "webhook report too large to send whole; sent without part of it",
			"job_id", p.JobID, "bytes", whole, "limit", webhookMaxBodyBytes, "omitted", p.Omitted)
	}
	return body, err
}

// fail reports a failed attempt and returns err for River to retry (or, on
// the last attempt, discard).
func (w *WebhookWorker) fail(ctx context.Context, log *slog.Logger, job *river.Job[WebhookArgs], err error) error {
	if job.Attempt >= job.MaxAttempts {
		log.ErrorContext(ctx, "webhook delivery given up; an operator can replay it (River UI, or domainclass jobs retry)", "error", err)
		w.report(webhookDiscarded)
	} else {
		log.WarnContext(ctx, "webhook delivery failed; will retry", "error", err,
			"retry_in", scheduledDelay(w.Settings.WebhookRetrySchedule, len(job.Errors)).String()+" ±10%")
		w.report(webhookFailed)
	}
	return err
}

// skip cancels a delivery that has nothing to send.
func (w *WebhookWorker) skip(ctx context.Context, log *slog.Logger, err error) error {
	log.WarnContext(ctx, "webhook delivery skipped", "reason", err)
	w.report(webhookSkipped)
	return river.JobCancel(err)
}

func (w *WebhookWorker) report(outcome string) {
	if w.OnDelivery != nil {
		w.OnDelivery(outcome)
	}
}

func (w *WebhookWorker) recordOutput(ctx context.Context, log *slog.Logger, out webhookOutput) {
	if err := river.RecordOutput(ctx, out); err != nil {
		log.WarnContext(ctx, "error recording webhook output", "error", err)
	}
}
