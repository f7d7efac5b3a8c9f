package jobs

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"golang.org/x/sync/errgroup"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
)

// answerer is the chunk's answerer, the one a run of it uses whether it
// answers its domains or stages them for a batch: the list's concurrency,
// domain retries and run time (ListRunTime, from the run's start), and,
// once all its domains have started, the feed of the chunk after the
// window (this one still counted in it). Its model calls are the list's
// (its share and gate, answerRows), counted against its caller's budget.
func (w *ClassifyListWorker) answerer(ctx context.Context, log *slog.Logger, job *river.Job[ClassifyListArgs], l *classifier.List) answerer {
	inFlight := w.Settings.ListChunksInFlight
	return answerer{pipeline: w.Pipeline, concurrency: w.Settings.ListDomainConcurrency, metrics: w.Metrics,
		retry: newDomainRetry(w.Settings), startBy: time.Now().Add(w.Settings.ListRunTime()),
		call:       classifier.CallOptions{Spender: w.Spend.For(l.Caller)},
		allStarted: func() { w.feedOrLog(ctx, log, l.ID, job.Args.Chunk+inFlight, inFlight+1) }}
}

// knownRangeRows is how many rows one transaction of answerKnown looks
// at: a fraction of a second's work, so that the list's progress moves as a
// large list is answered, and no transaction holds many rows' locks long.
const knownRangeRows = 50_000

// knownParallel is how many of those transactions answerKnown runs at once
// (at most ListDomainConcurrency): Postgres does the work, and one
// statement uses one of its cores.
const knownParallel = 2

// answerKnown answers the rows an override or a fresh cached answer
// answers (db.ListAnswerKnown), from..to, or the whole list in the first
// run of the upload's first chunk (a later run, after a snooze or an
// error, would read the whole list again for its fresh rows: each chunk's
// own pass answers what it left), a range of rows per transaction, and
// counts them. A list its upload looked up (db.ListRowsAccept: its
// counters start above zero) had those rows written answered then; each
// chunk's own pass finds what changed since (an override set, a domain
// another list answered meanwhile).
func (w *ClassifyListWorker) answerKnown(ctx context.Context, log *slog.Logger, l *classifier.List, job *river.Job[ClassifyListArgs], from, to int) (db.Known, error) {
	if job.Args.Chunk == 0 && job.Args.Pass == 0 && job.Attempt == 1 && l.Override+l.Cache == 0 {
		from, to = 1, l.Rows
	}
	f, now := w.Pipeline.CacheRules()
	start := time.Now()
	var (
		mu  sync.Mutex
		all db.Known
		g   errgroup.Group
	)
	g.SetLimit(min(knownParallel, w.Settings.ListDomainConcurrency))
	for lo := from; lo <= to; lo += knownRangeRows {
		g.Go(func() error {
			k, err := db.ListAnswerKnown(ctx, w.DB, l.ID, l.Classifier, lo, min(lo+knownRangeRows-1, to), f, l.Want, now)
			if err != nil {
				return err
			}
			mu.Lock()
			all.Override, all.Cache, all.Rows = all.Override+k.Override, all.Cache+k.Cache, all.Rows+k.Rows
			mu.Unlock()
			w.Lists.ListRows(classifier.StatusCompleted, k.Rows)
			w.Metrics.DomainsAnswered(l.Classifier, classifier.SourceOverride, k.Override)
			w.Metrics.DomainsAnswered(l.Classifier, classifier.SourceCache, k.Cache)
			return nil
		})
	}
	err := g.Wait()
	if all.Rows > 0 {
		log.InfoContext(ctx, "rows answered by overrides and the cache", "rows", all.Rows, "override", all.Override,
			"cache", all.Cache, "looked_at", to-from+1, "took", time.Since(start).Round(time.Millisecond).String())
	}
	return all, err
}

// rows is where the chunk's answers are stored: the process's RowStore,
// or one that stores each answer as it comes.
func (w *ClassifyListWorker) rows() *RowStore {
	if w.Rows != nil {
		return w.Rows
	}
	return &RowStore{DB: w.DB, RetryFor: w.Settings.StoreRetryFor(), Lists: w.Lists, Logger: w.Logger}
}

// hand hands an answer of list l's row (stored with its duplicates, and
// owner's claim released) to the row store.
func (w *ClassifyListWorker) hand(l *classifier.List) func(pendingDomain, classifier.Result, string, func(error)) {
	rs := w.rows()
	return func(d pendingDomain, r classifier.Result, owner string, done func(error)) {
		rs.Put(l.ID, db.RowAnswer{Row: d.Key, Result: r, Owner: owner}, done)
	}
}

// releaseClaims gives back the claims of a run on the domains it did not
// answer (those it answered were released as their answers were stored):
// one statement, past the run's context.
func (w *ClassifyListWorker) releaseClaims(ctx context.Context, log *slog.Logger, l *classifier.List, claimed []string, owner string) {
	if len(claimed) == 0 {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTryTimeout)
	defer cancel()
	if err := db.DomainClaimsRelease(rctx, w.DB, l.Classifier, claimed, owner); err != nil {
		log.WarnContext(ctx, "error giving the chunk's claims back; they run out with their lease", "error", err)
	}
}

// answerRows answers the chunk's rows with a, handing each answer over
// to be stored with others as it comes, and returns the outcome and how
// many domains it had to answer. A domain the chunk claimed (claimed) is
// asked of the model with no look-up, on its first try; the others, and a
// claimed domain tried again, the cheapest way, as a job's. A model call
// starts only through the list's gate, which a cancel closes, and in its
// list's turn: behind interactive jobs, beside other callers' lists
// (classifier.Share).
func (w *ClassifyListWorker) answerRows(ctx context.Context, log *slog.Logger, l *classifier.List, c *classifier.Classifier,
	a answerer, owner string, rows []classifier.ListRow, claimed []string) (outcome, int) {
	pending := make([]pendingDomain, len(rows))
	for i, r := range rows {
		pending[i] = pendingDomain{Key: r.Row, Domain: r.Result.Domain}
	}
	a.cost, a.want = w.cost(false), l.Want
	a.call.Share = classifier.Share{Class: classifier.ClassList, Caller: l.Caller, List: l.ID.String()}
	a.call.Gate = w.gate(l.ID)
	a.hand = w.hand(l)
	var mu sync.Mutex
	mine := make(map[string]bool, len(claimed))
	for _, d := range claimed {
		mine[d] = true
	}
	fresh := 0
	for _, d := range pending {
		if mine[d.Domain] {
			fresh++
		}
	}
	// The calls the claimed domains will make, counted against the
	// caller's budget at once (a call past it is refused, as one at a
	// time), and corrected from their usage, with what was not called
	// given back, as the run ends: two statements a run.
	spend := w.Spend.Set(l.Caller)
	if err := spend.Prepare(ctx, w.Pipeline.Model(), fresh); err != nil {
		log.WarnContext(ctx, "error counting the chunk's model calls as a set; each is counted on its own", "error", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTryTimeout)
		defer cancel()
		if err := spend.Close(cctx); err != nil {
			log.WarnContext(ctx, "error correcting the caller's model spend", "error", err)
		}
	}()
	a.call.Spender = spend
	call := a.call
	a.classify = func(ctx context.Context, c *classifier.Classifier, d pendingDomain, owner string) (classifier.Result, error) {
		mu.Lock()
		first := mine[d.Domain]
		delete(mine, d.Domain) // a try again claims it the usual way: its claim went back
		mu.Unlock()
		if first {
			return w.Pipeline.ClassifyClaimed(ctx, c, d.Domain, owner, l.Want, call)
		}
		return w.Pipeline.ClassifyWant(ctx, c, d.Domain, owner, l.Want, call)
	}
	o := a.answer(ctx, log, c, owner, pending, nil)
	return o, len(pending)
}

// cost prices a call's usage for the answerer.
func (w *ClassifyListWorker) cost(batch bool) func(string, *classifier.Usage) float64 {
	if w.Price == nil {
		return nil
	}
	return func(model string, u *classifier.Usage) float64 { return w.Price.Usage(model, u, batch) }
}

// gate refuses a model call once the list has ended, and holds the list's
// gate lock until the call's request is written (see db.ListGate): in a
// transaction shared by the calls of the list that start together
// (w.Gates), or without Gates in one of the call's own.
func (w *ClassifyListWorker) gate(id uuid.UUID) classifier.Gate {
	if w.Gates != nil {
		return w.Gates.Gate(id)
	}
	return func(ctx context.Context) (func(), error) {
		tx, err := db.Begin(ctx, w.DB)
		if err != nil {
			return nil, err
		}
		if err := db.ListGate(ctx, tx, id); err != nil {
			db.Rollback(ctx, tx)
			return nil, err
		}
		return func() {
			if err := db.Commit(context.WithoutCancel(ctx), tx); err != nil {
				db.Rollback(ctx, tx)
			}
		}, nil
	}
}
