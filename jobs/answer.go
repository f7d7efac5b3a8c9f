package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

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
	// retry is how a domain's transient failures are retried in the run.
	retry domainRetry
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
	// call is how each domain's model call is counted and scheduled: the
	// caller's spender, the call's share and, for a list, its gate (a Postgres
	// transaction shared by the list's calls that start together).
	call classifier.CallOptions
	// hand, when set, replaces the store: each answer is handed over to
	// be stored with others (a list's RowStore), and done says how that
	// went; the run waits for every answer handed over before it tallies.
	hand func(d pendingDomain, r classifier.Result, owner string, done func(error))
}

// outcome is what answering a set of domains came to.
type outcome struct {
	Counts
	// err is the first transient error (a provider 5xx, Postgres) that
	// outlasted the domain's retries: the attempt failed and River
	// retries it. failures has each such domain's error, by Key.
	err      error
	failures map[int]error
	// throttled: the provider asked to wait retryAfter; busy: another
	// worker is asking the model about a domain of ours, or a provider
	// batch holds it (busyFor: when its claim may be taken over).
	throttled  bool
	retryAfter time.Duration
	busy       bool
	busyFor    time.Duration
	// deferred: startBy came with domains not started. ended: the list
	// ended (cancelled) while it ran, and its gate refused a model call.
	deferred bool
	ended    bool
	// retried counts the domains answered after a retry in the run;
	// unsaved the answers that arrived and could not be stored (kept by
	// the process for the next run).
	retried, unsaved int
}

// domainOutcome is one domain's answer, or why there is none yet.
type domainOutcome struct {
	tried    bool
	handed   bool
	deferred bool
	retried  bool
	unsaved  bool
	result   classifier.Result
	err      error
}

// answer answers every pending domain the cheapest way (pipeline.Classify)
// and stores each answer with store as it comes, so that a later attempt
// skips it. One domain's error never stops the others: it is retried on
// its own (domainRetry) while they go on. When ctx is done the domains not
// started yet are left pending.
func (a answerer) answer(ctx context.Context, log *slog.Logger, c *classifier.Classifier, owner string,
	pending []pendingDomain, store storeFunc) outcome {
	got := make([]domainOutcome, len(pending))
	var (
		g      errgroup.Group
		ended  atomic.Bool
		stored sync.WaitGroup // answers handed over, until stored
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
			got[i] = a.one(ctx, log.With("domain", d.Domain), c, owner, d, store)
			if errors.Is(got[i].err, db.ErrListEnded) {
				ended.Store(true)
			}
			if got[i].handed {
				stored.Add(1)
				a.hand(d, got[i].result, owner, func(err error) { a.stored(&got[i], d, err); stored.Done() })
			}
			return nil
		})
	}
	if a.allStarted != nil {
		// As one of the group, so that it runs once a domain's slot frees
		// and never beside more than concurrency-1 of them.
		g.Go(func() error { a.allStarted(); return nil })
	}
	_ = g.Wait() // every func returns nil: errors are per domain, in got
	stored.Wait()
	return a.tally(pending, got)
}

// stored records how the store of an answer handed over went: counted
// once stored, or kept for the next run (Pipeline.Keep) when it could not
// be.
func (a answerer) stored(o *domainOutcome, d pendingDomain, err error) {
	if err != nil {
		o.err = fmt.Errorf("error storing the answer about %s: %w", d.Domain, err)
		o.unsaved = a.pipeline.Keep(o.result)
		return
	}
	a.metrics.DomainResult(o.result)
	a.metrics.LLMCost(classifier.TierStandard, o.result.Usage.Cost())
}

// one answers domain d: its answer, retried while it fails transiently,
// then stored, the store retried while it fails (never the call: the
// answer was paid for).
func (a answerer) one(ctx context.Context, log *slog.Logger, c *classifier.Classifier, owner string,
	d pendingDomain, store storeFunc) domainOutcome {
	var (
		r   classifier.Result
		err error
		o   = domainOutcome{tried: true}
	)
	for try := 1; ; try++ {
		if a.classify != nil {
			r, err = a.classify(ctx, c, d, owner)
		} else {
			r, err = a.pipeline.ClassifyWant(ctx, c, d.Domain, owner, a.want, a.call)
		}
		if !a.retriable(ctx, err) || try >= a.retry.attempts {
			break
		}
		wait := a.retry.backoff << (try - 1)
		log.DebugContext(ctx, "error classifying domain; retrying it", "error", err, "try", try, "wait", wait.String())
		if !sleep(ctx, jitter(wait)) {
			break
		}
		o.retried = true
	}
	if r.Usage != nil && a.cost != nil {
		r.Usage.CostUSD = a.cost(r.Model, r.Usage)
	}
	if err == nil && r.Status != classifier.StatusPending {
		if a.hand != nil {
			o.handed = true // stored, and counted, with its set
		} else if err = a.store(ctx, log, d, r, owner, store); err != nil && a.pipeline.Keep(r) {
			o.unsaved = true
		}
	}
	o.result, o.err = r, err
	if err == nil && r.Status != classifier.StatusPending && !o.handed {
		a.metrics.DomainResult(r) // as each is answered, not when all are
		a.metrics.LLMCost(classifier.TierStandard, r.Usage.Cost())
	}
	a.log(ctx, log, r, err)
	return o
}

// tally sums the domains' outcomes.
func (a answerer) tally(pending []pendingDomain, got []domainOutcome) outcome {
	var o outcome
	for i, d := range got {
		r, err := d.result, d.err
		ra, throttled := classifier.RetryAfter(err)
		if d.retried && err == nil {
			o.retried++
		}
		if d.unsaved {
			o.unsaved++
		}
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
			wait, _ := classifier.BusyFor(err)
			o.Pending++
			o.busy, o.busyFor = true, max(o.busyFor, wait)
		case err != nil:
			o.Pending++
			if o.err == nil {
				o.err = err
			}
			if o.failures == nil {
				o.failures = map[int]error{}
			}
			o.failures[pending[i].Key] = err
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

// log writes one domain's outcome at DEBUG: a list of a million rows
// would otherwise log a million lines (the run's summary is at INFO).
func (a answerer) log(ctx context.Context, log *slog.Logger, r classifier.Result, err error) {
	if !log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	if ra, ok := classifier.RetryAfter(err); ok {
		log.DebugContext(ctx, "provider throttled; domain will be retried", "retry_after", ra.String())
		return
	}
	switch {
	case errors.Is(err, classifier.ErrBusy):
		log.DebugContext(ctx, "domain is being classified by another job; will look again")
	case errors.Is(err, db.ErrListEnded):
		log.DebugContext(ctx, "list ended; no model call started")
	case err != nil:
		log.DebugContext(ctx, "error classifying domain; the run will be retried", "error", err)
	case r.Status == classifier.StatusFailed:
		log.DebugContext(ctx, "domain failed", "reason", r.Error, "source", string(r.Source))
	default:
		log.DebugContext(ctx, "domain classified", "source", string(r.Source), "answer", r.Answer, "confidence", r.Confidence)
	}
}

// summary logs what a run came to, once, at INFO (WARN when domains are
// left for River to retry): the counts, and the first error.
func (o outcome) summary(ctx context.Context, log *slog.Logger, msg string, domains int) {
	attrs := []any{"domains", domains, "override", o.Override, "cache", o.Cache, "llm", o.LLM, "failed", o.Failed,
		"pending", o.Pending}
	if o.Batched > 0 {
		attrs = append(attrs, "batched", o.Batched)
	}
	if o.retried > 0 {
		attrs = append(attrs, "answered_after_retry", o.retried)
	}
	if o.unsaved > 0 {
		attrs = append(attrs, "answers_kept_unsaved", o.unsaved)
	}
	level := slog.LevelInfo
	if o.err != nil {
		level = slog.LevelWarn
		attrs = append(attrs, "errors", len(o.failures), "first_error", o.err.Error())
	}
	log.Log(ctx, level, msg, attrs...)
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

func (s pipelineStore) ClaimAcquire(ctx context.Context, classifierName, domain, owner string, ttl time.Duration, batch bool) (classifier.ClaimHolder, bool, error) {
	return db.ClaimAcquire(ctx, s.exec, classifierName, domain, owner, ttl, batch)
}

func (s pipelineStore) ClaimTakeOver(ctx context.Context, classifierName, domain, holder, owner string, ttl time.Duration) (bool, error) {
	return db.ClaimTakeOver(ctx, s.exec, classifierName, domain, holder, owner, ttl)
}

func (s pipelineStore) ClaimRelease(ctx context.Context, classifierName, domain, owner string) error {
	return db.ClaimRelease(ctx, s.exec, classifierName, domain, owner)
}
