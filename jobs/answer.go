package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/riverqueue/river"
	"golang.org/x/sync/errgroup"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
)

// pendingDomain is a domain still to answer and where its answer goes: a
// job's position, or a list's row.
type pendingDomain struct {
	Key    int
	Domain string
}

// storeFunc stores one final answer and releases owner's claim on its
// domain, as one write.
type storeFunc func(ctx context.Context, d pendingDomain, r classifier.Result, owner string) error

// Counts are the answers of one attempt by where they came from; Pending
// counts domains left for a later attempt.
type Counts struct {
	Override int `json:"override"`
	Cache    int `json:"cache"`
	LLM      int `json:"llm"`
	Failed   int `json:"failed"`
	Pending  int `json:"pending"`
	// Batched counts domains staged for a provider batch (economy lists).
	Batched int `json:"batched,omitempty"`
}

// answerer answers domains through the pipeline, a bounded number at a
// time, storing each answer as it comes.
type answerer struct {
	pipeline    *classifier.Pipeline
	concurrency int
	metrics     *Metrics
	// startBy, when set, is when to stop starting domains: the attempt
	// ends with the rest pending (deferred), so one run stays well inside
	// its job timeout.
	startBy time.Time
	// allStarted, when set, is called once every domain has been started
	// (or skipped), while the last of them are still being answered.
	allStarted func()
	// classify, when set, replaces pipeline.Classify (an economy list
	// stages its fresh domains for a batch: a PENDING Result, not stored).
	classify func(ctx context.Context, c *classifier.Classifier, d pendingDomain, owner string) (classifier.Result, error)
	// cost prices a model call's usage (nil: unpriced).
	cost func(model string, u *classifier.Usage) float64
	// want is what the job or list accepts as a cached answer.
	want classifier.Want
}

// outcome is what answering a set of domains came to.
type outcome struct {
	Counts
	// err is the first transient error (a provider 5xx, Postgres): the
	// attempt failed and River retries it.
	err error
	// throttled: the provider asked to wait retryAfter; busy: another
	// worker is asking the model about a domain of ours.
	throttled  bool
	retryAfter time.Duration
	busy       bool
	// deferred: startBy came with domains not started. ended: the list
	// ended (cancelled) while it ran, and its gate refused a model call.
	deferred bool
	ended    bool
}

// domainOutcome is one domain's answer, or why there is none yet.
type domainOutcome struct {
	tried    bool
	deferred bool
	result   classifier.Result
	err      error
}

// answer answers every pending domain the cheapest way (pipeline.Classify)
// and stores each answer with store as it comes, so that a later attempt
// skips it. One domain's error never stops the others; when ctx is done the
// domains not started yet are left pending.
func (a answerer) answer(ctx context.Context, log *slog.Logger, c *classifier.Classifier, owner string,
	pending []pendingDomain, store storeFunc) outcome {
	got := make([]domainOutcome, len(pending))
	var (
		g     errgroup.Group
		ended atomic.Bool
	)
	g.SetLimit(a.concurrency)
	for i, d := range pending {
		g.Go(func() error {
			if ctx.Err() != nil || ended.Load() {
				return nil // stopping: leave it for the next attempt
			}
			if !a.startBy.IsZero() && time.Now().After(a.startBy) {
				got[i].deferred = true
				return nil
			}
			var (
				r   classifier.Result
				err error
			)
			if a.classify != nil {
				r, err = a.classify(ctx, c, d, owner)
			} else {
				r, err = a.pipeline.ClassifyWant(ctx, c, d.Domain, owner, a.want)
			}
			if errors.Is(err, db.ErrListEnded) {
				ended.Store(true)
			}
			if r.Usage != nil && a.cost != nil {
				r.Usage.CostUSD = a.cost(r.Model, r.Usage)
			}
			if err == nil && r.Status != classifier.StatusPending {
				err = store(ctx, d, r, owner)
			}
			got[i] = domainOutcome{tried: true, result: r, err: err}
			if err == nil && r.Status != classifier.StatusPending {
				a.metrics.DomainResult(r) // as each is answered, not when all are
				a.metrics.LLMCost(classifier.TierStandard, r.Usage.Cost())
			}
			a.log(ctx, log.With("domain", d.Domain), r, err)
			return nil
		})
	}
	if a.allStarted != nil {
		// As one of the group, so that it runs once a domain's slot frees
		// and never beside more than concurrency-1 of them.
		g.Go(func() error { a.allStarted(); return nil })
	}
	_ = g.Wait() // every func returns nil: errors are per domain, in got

	var o outcome
	for _, d := range got {
		r, err := d.result, d.err
		ra, throttled := classifier.RetryAfter(err)
		switch {
		case !d.tried:
			o.Pending++
			o.deferred = o.deferred || d.deferred
		case errors.Is(err, db.ErrListEnded):
			o.Pending++
			o.ended = true
		case throttled:
			o.Pending++
			o.throttled, o.retryAfter = true, max(o.retryAfter, ra)
		case errors.Is(err, classifier.ErrBusy):
			o.Pending++
			o.busy = true
		case err != nil:
			o.Pending++
			if o.err == nil {
				o.err = err
			}
		default:
			switch {
			case r.Status == classifier.StatusPending:
				o.Batched++
			case r.Status == classifier.StatusFailed:
				o.Failed++
			case r.Source == classifier.SourceOverride:
				o.Override++
			case r.Source == classifier.SourceCache:
				o.Cache++
			case r.Source == classifier.SourceLLM:
				o.LLM++
			}
		}
	}
	return o
}

func (a answerer) log(ctx context.Context, log *slog.Logger, r classifier.Result, err error) {
	if ra, ok := classifier.RetryAfter(err); ok {
		log.WarnContext(ctx, "provider throttled; domain will be retried", "retry_after", ra.String())
		return
	}
	switch {
	case errors.Is(err, classifier.ErrBusy):
		log.InfoContext(ctx, "domain is being classified by another job; will look again")
	case errors.Is(err, db.ErrListEnded):
		log.InfoContext(ctx, "list ended; no model call started")
	case err != nil:
		log.WarnContext(ctx, "error classifying domain; will retry", "error", err)
	case r.Status == classifier.StatusFailed:
		log.InfoContext(ctx, "domain failed", "reason", r.Error, "source", string(r.Source))
	default:
		log.InfoContext(ctx, "domain classified", "source", string(r.Source), "answer", r.Answer, "confidence", r.Confidence)
	}
}

// unfinished returns what the attempt returns to River instead of ending
// the job, or nil when every domain is final. failed marks an error that
// uses up an attempt (on the last one the job is given up); a soft stop
// and the snoozes use none.
func (o outcome) unfinished(ctx context.Context, log *slog.Logger, s Settings) (err error, failed bool) {
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		// The client is stopping (soft stop): River puts the job back with
		// its attempt restored; finished domains stay finished.
		return ctx.Err(), false
	case ctx.Err() != nil:
		return fmt.Errorf("job timed out: %w", ctx.Err()), true
	case o.err != nil:
		return o.err, true
	case o.throttled:
		snooze := min(max(o.retryAfter, time.Second), s.MaxSnooze)
		log.InfoContext(ctx, "snoozing job while the provider throttles", "snooze", snooze.String())
		return river.JobSnooze(snooze), false
	case o.busy:
		return river.JobSnooze(s.BusySnooze), false
	case o.deferred:
		// Its time is up: back to the end of the queue, no attempt used.
		return river.JobSnooze(0), false
	}
	return nil, false
}

// NewPipelineStore returns the pipeline's storage on exec (the pool): each
// look-up and claim is a statement of its own, so no transaction is held
// across a search or a model call.
func NewPipelineStore(exec db.DBTX) classifier.ResultStore { return pipelineStore{exec} }

type pipelineStore struct{ exec db.DBTX }

func (s pipelineStore) Override(ctx context.Context, classifierName, domain string) (classifier.Override, bool, error) {
	o, err := db.OverrideGet(ctx, s.exec, classifierName, domain)
	if err != nil {
		return classifier.Override{}, false, ignoreNotFound(err)
	}
	return o, true, nil
}

func (s pipelineStore) ResultGet(ctx context.Context, classifierName, domain string) (classifier.Result, bool, error) {
	r, err := db.ResultGet(ctx, s.exec, classifierName, domain)
	if err != nil {
		return classifier.Result{}, false, ignoreNotFound(err)
	}
	return *r, true, nil
}

func ignoreNotFound(err error) error {
	if errors.Is(err, db.ErrNotFound) {
		return nil
	}
	return err
}

func (s pipelineStore) ClaimAcquire(ctx context.Context, classifierName, domain, owner string, ttl time.Duration) (bool, error) {
	return db.ClaimAcquire(ctx, s.exec, classifierName, domain, owner, ttl)
}

func (s pipelineStore) ClaimRelease(ctx context.Context, classifierName, domain, owner string) error {
	return db.ClaimRelease(ctx, s.exec, classifierName, domain, owner)
}
