package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	"golang.org/x/sync/errgroup"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/classifier/llm"
	"github.com/domainclass/domainclass/db"
)

// ClassifyListArgs is one chunk of a list: rows Chunk×ChunkRows+1 to
// (Chunk+1)×ChunkRows. Like ClassifyArgs it is a claim check; the rows live
// in Postgres. Pass is the list's retry the chunk belongs to (0: the
// upload's): a chunk queued again by a retry is a job of its own.
type ClassifyListArgs struct {
	ListID string `json:"list_id"`
	Chunk  int    `json:"chunk"`
	Pass   int    `json:"pass,omitempty"`
}

// Kind is the River job kind.
func (ClassifyListArgs) Kind() string { return "classify_list" }

// InsertOpts puts chunks on their own queue, unique by args: a chunk fed
// twice (a redelivered chunk feeding its successor) runs once.
func (ClassifyListArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueList, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// FirstChunks are the chunk jobs an upload inserts, in its transaction:
// the first chunk alone. The list's chunks then queue one another while
// they run (ClassifyListWorker.feed), never as one ends: each is a fetch of
// its own, taken by whichever worker process is free. One insert of
// several would go whole to the first process to fetch, and a chunk queued
// as one ends would go to the process whose slot just freed, so a list
// would gather on one process.
func FirstChunks(listID uuid.UUID) []river.InsertManyParams {
	return []river.InsertManyParams{{Args: ClassifyListArgs{ListID: listID.String(), Chunk: 0}}}
}

// ListChunkOutput is recorded on a chunk's River job (River UI shows it):
// what the run did, and where the whole list stands.
type ListChunkOutput struct {
	ListID string `json:"list_id"`
	Chunk  int    `json:"chunk"`
	// Domains is how many of the chunk's domains this run had to answer.
	Domains int `json:"domains"`
	Counts
	// ListDone of ListRows rows of the whole list are final.
	ListDone int `json:"list_done"`
	ListRows int `json:"list_rows"`
}

// ClassifyListWorker works ClassifyListArgs: it answers the chunk's domains
// through the same pipeline as jobs, storing each answer (with its
// duplicates) as it comes, queues the list's next chunks as it runs (feed)
// and, when every row of the list is final, ends the list.
type ClassifyListWorker struct {
	river.WorkerDefaults[ClassifyListArgs]

	// DB is the pool (in tests, a transaction with ListDomainConcurrency 1).
	DB       db.Executor
	Pipeline *classifier.Pipeline
	Registry *classifier.Registry
	Settings Settings
	Logger   *slog.Logger
	Metrics  *Metrics     // nil: no metrics
	Lists    *ListMetrics // nil: no metrics
	Price    llm.Pricer   // nil: unpriced
	Spend    *Spenders    // nil: no budgets
	// Rows stores the chunks' answers in sets (the process's one); nil:
	// each answer is stored as it comes, a set of one (on a transaction).
	Rows *RowStore
	// Gates are the process's list gates, shared by the calls that start
	// together (ListGates); nil: a gate transaction per call (tests that
	// run the worker inside a transaction).
	Gates *ListGates
}

// Middleware cancels chunks whose args can never work.
func (w *ClassifyListWorker) Middleware(*rivertype.JobRow) []rivertype.WorkerMiddleware {
	return cancelMalformed(func(a ClassifyListArgs) error {
		if _, err := uuid.Parse(a.ListID); err != nil || a.Chunk < 0 {
			return fmt.Errorf("list_id %q, chunk %d", a.ListID, a.Chunk)
		}
		return nil
	})
}

// Timeout is the reviewed job timeout; a run stops starting domains after
// ListRunBudget, well before it.
func (w *ClassifyListWorker) Timeout(*river.Job[ClassifyListArgs]) time.Duration {
	return w.Settings.JobTimeout
}

// Work answers the chunk. Outcomes: nil when its rows are final (and, if
// it was the last, the list ended, in the transaction that completes the
// job); a cancel when the list has ended (cancelled); a snooze when
// the provider throttles, another job holds a shared domain, or the run's
// budget is spent (no attempt used); an error for transient failures (on
// the last attempt the chunk's own rows fail, each with its reason, and
// the list goes on: giveUp).
func (w *ClassifyListWorker) Work(ctx context.Context, job *river.Job[ClassifyListArgs]) error {
	id := uuid.MustParse(job.Args.ListID) // checked by Middleware
	log := w.Logger.With("list_id", id.String(), "chunk", job.Args.Chunk, "river_job_id", job.ID, "attempt", job.Attempt)

	// 1. Load the list (and mark it RUNNING).
	l, c, err := w.start(ctx, log, job, id)
	if l == nil {
		return err
	}
	// Rows an override or a cached answer answers, as sets, before any
	// domain's own work: the whole list by the upload's first chunk, so
	// that only chunks with fresh domains are queued after it (a list
	// answered already ends here), and each chunk's own rows again (an
	// override set since).
	from, to := l.ChunkRange(job.Args.Chunk)
	owner := fmt.Sprintf("river:%d", job.ID)
	stage := l.Tier == classifier.TierEconomy && job.Args.Pass == 0
	var claimed []string
	if !stage {
		// The chunk's fresh domains claimed as a set, before the set pass
		// below, so that what is left pending after it is the chunk's to
		// ask the model about with no look-up (an answer stored by another
		// worker before the claim is found by the pass). Domains another
		// holds are answered one at a time, as a job's are.
		if claimed, err = db.ClaimListRows(ctx, w.DB, id, l.Classifier, from, to, owner, w.Settings.ClaimTTL()); err != nil {
			return w.retryOrGiveUp(ctx, log, job, id, fmt.Errorf("error claiming the chunk's domains: %w", err), nil)
		}
		defer w.releaseClaims(ctx, log, l, claimed, owner)
	}
	known, err := w.answerKnown(ctx, log, l, job, from, to)
	if err != nil {
		return w.retryOrGiveUp(ctx, log, job, id, fmt.Errorf("error answering rows from overrides and the cache: %w", err), nil)
	}
	// Keep ListChunksInFlight chunks queued or running: this one and the
	// ones after it (a first chunk queues the second, and so on). A chunk
	// that cannot queue the next goes on: finish tries again, and the
	// list sweep refills a list left with nothing queued.
	w.feedOrLog(ctx, log, id, job.Args.Chunk+w.Settings.ListChunksInFlight-1, w.Settings.ListChunksInFlight)
	a := w.answerer(ctx, log, job, l)
	if stage {
		return w.stage(ctx, log, job, l, c, a, from, to, known)
	}
	rows, err := db.ListPending(ctx, w.DB, id, from, to)
	if err != nil {
		return w.retryOrGiveUp(ctx, log, job, id, fmt.Errorf("error loading rows: %w", err), nil)
	}

	// 2. Answer each domain the cheapest way.
	o, pending := w.answerRows(ctx, log, l, c, a, owner, rows, claimed)
	o.Override, o.Cache = o.Override+known.Override, o.Cache+known.Cache
	o.summary(ctx, log, "list chunk run", pending)
	if err := w.recordOutput(ctx, job, id, o, pending); err != nil {
		return err
	}
	if o.ended {
		log.InfoContext(ctx, "list was cancelled while the chunk ran")
		return river.JobCancel(fmt.Errorf("list %s was cancelled", id))
	}
	if err, failed := o.unfinished(ctx, log, w.Settings); err != nil {
		w.noteWaiting(ctx, log, id, o)
		if failed {
			return w.retryOrGiveUp(ctx, log, job, id, err, o.failures)
		}
		return err
	}

	// 3. The chunk is done: end the list if every row is final, complete
	// the River job, queue the chunk after its window; one transaction.
	if err := w.finish(ctx, log, job, id, nil); err != nil {
		return w.retryOrGiveUp(ctx, log, job, id, fmt.Errorf("error finishing chunk: %w", err), nil)
	}
	return nil
}

// start loads list id for the chunk, marking it RUNNING, and its
// classifier. When the chunk cannot go on (the list is gone or has ended,
// its classifier is not configured, an error) l is nil and Work returns
// err.
func (w *ClassifyListWorker) start(ctx context.Context, log *slog.Logger, job *river.Job[ClassifyListArgs], id uuid.UUID) (l *classifier.List, c *classifier.Classifier, err error) {
	l, err = db.ListStart(ctx, w.DB, id)
	if errors.Is(err, db.ErrNotFound) {
		return nil, nil, river.JobCancel(fmt.Errorf("list %s does not exist", id))
	} else if err != nil {
		return nil, nil, w.retryOrGiveUp(ctx, log, job, id, fmt.Errorf("error starting list: %w", err), nil)
	}
	if l.Ended() {
		log.InfoContext(ctx, "list has ended; chunk not needed", "status", string(l.Status))
		return nil, nil, river.JobCancel(fmt.Errorf("list %s is %s", id, l.Status))
	}
	c, err = w.Registry.Get(l.Classifier)
	if err != nil {
		return nil, nil, w.cannotGoOn(ctx, log, l, fmt.Sprintf("classifier %q is not configured in this deployment", l.Classifier))
	}
	return l, c, nil
}

// recordOutput records the chunk's run as its River job's output: its
// counts, how many domains were pending, and the list's progress.
func (w *ClassifyListWorker) recordOutput(ctx context.Context, job *river.Job[ClassifyListArgs], id uuid.UUID, o outcome, pending int) error {
	out := ListChunkOutput{ListID: id.String(), Chunk: job.Args.Chunk, Domains: pending, Counts: o.Counts}
	if now, err := db.ListGet(ctx, w.DB, id); err == nil {
		out.ListDone, out.ListRows = now.Done, now.Rows
	}
	return river.RecordOutput(ctx, out)
}

// answerer is the chunk's answerer, the one a run of it uses whether it
// answers its domains or stages them for a batch: the list's concurrency,
// domain retries and run budget (ListRunBudget, from the run's start), and,
// once all its domains have started, the feed of the chunk after the
// window (this one still counted in it). Its model calls are the list's
// (its share and gate, answerRows), counted against its caller's budget.
func (w *ClassifyListWorker) answerer(ctx context.Context, log *slog.Logger, job *river.Job[ClassifyListArgs], l *classifier.List) answerer {
	inFlight := w.Settings.ListChunksInFlight
	return answerer{pipeline: w.Pipeline, concurrency: w.Settings.ListDomainConcurrency, metrics: w.Metrics,
		retry: newDomainRetry(w.Settings), startBy: time.Now().Add(w.Settings.ListRunBudget()),
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

// stage works a chunk of an economy list with a: overridden and cached
// domains are answered now; each fresh one is claimed (for the batch's
// whole window: no other job pays for it meanwhile), searched, and its
// request staged in the chunk's batch. When every row of the chunk is
// answered or staged, the batch goes to its own job (BatchWorker), in the
// transaction that completes this one.
func (w *ClassifyListWorker) stage(ctx context.Context, log *slog.Logger, job *river.Job[ClassifyListArgs],
	l *classifier.List, c *classifier.Classifier, a answerer, from, to int, known db.Known) error {
	b, err := db.BatchOfChunk(ctx, w.DB, l.ID, job.Args.Chunk)
	if err != nil {
		return w.retryOrGiveUp(ctx, log, job, l.ID, fmt.Errorf("error making the chunk's batch: %w", err), nil)
	}
	if b.Status == db.BatchStaging {
		nums, domains, err := db.ListUnstaged(ctx, w.DB, l.ID, from, to, b.ID)
		if err != nil {
			return w.retryOrGiveUp(ctx, log, job, l.ID, fmt.Errorf("error loading rows: %w", err), nil)
		}
		pending := make([]pendingDomain, len(nums))
		for i := range nums {
			pending[i] = pendingDomain{Key: nums[i], Domain: domains[i]}
		}
		call := a.call
		call.Spender = w.Spend.ForBatch(l.Caller)
		a.classify = w.stageInto(b, l, call)
		a.hand = w.hand(l)
		o := a.answer(ctx, log, c, batchOwner(b.ID), pending, nil)
		o.Override, o.Cache = o.Override+known.Override, o.Cache+known.Cache
		o.summary(ctx, log, "list chunk staged", len(pending))
		_ = river.RecordOutput(ctx, ListChunkOutput{ListID: l.ID.String(), Chunk: job.Args.Chunk, Domains: len(pending), Counts: o.Counts})
		if o.busy {
			// Mostly another list's provider batch, which answers in
			// minutes to hours: look again as a batch looks at its own.
			o.busyFor = max(o.busyFor, w.Settings.BatchPollInterval)
		}
		if err, failed := o.unfinished(ctx, log, w.Settings); err != nil {
			if failed {
				return w.retryOrGiveUp(ctx, log, job, l.ID, err, o.failures)
			}
			return err
		}
	}
	if err := w.handOver(ctx, log, job, l.ID, b); err != nil {
		return w.retryOrGiveUp(ctx, log, job, l.ID, fmt.Errorf("error handing the batch over: %w", err), nil)
	}
	return nil
}

// stageInto answers a domain of list l the way a batch will: by override or
// cache now, else claimed and searched, its request staged in batch b (a
// PENDING result, stored when the batch answers), counted with call's
// spender.
func (w *ClassifyListWorker) stageInto(b *db.Batch, l *classifier.List, call classifier.CallOptions) func(context.Context, *classifier.Classifier, pendingDomain, string) (classifier.Result, error) {
	return func(ctx context.Context, c *classifier.Classifier, d pendingDomain, owner string) (classifier.Result, error) {
		var spent reservation
		call := call
		call.Spender = recordStaged(call.Spender, &spent)
		r, pr, err := w.Pipeline.Stage(ctx, c, d.Domain, owner, w.Settings.BatchClaimTTL(), l.Want, call)
		if err != nil || pr == nil {
			return r, err
		}
		body, err := json.Marshal(pr.Request)
		if err == nil {
			err = db.BatchItemAdd(ctx, w.DB, b.ID, db.BatchItem{Row: d.Key, Domain: d.Domain, Body: body,
				PromptVersion: pr.PromptVersion, Search: pr.Search, Evidence: pr.Sources, SpendDay: spent.day, SpendUSD: spent.usd})
		}
		if err != nil && !spent.day.IsZero() {
			// Not staged: the next run stages it, and counts it, again.
			if gerr := db.CallerSpendAdd(context.WithoutCancel(ctx), w.DB, l.Caller, spent.day, -1, -spent.usd); gerr != nil {
				w.Logger.WarnContext(ctx, "error giving a staged call back", "domain", d.Domain, "error", gerr)
			}
		}
		return r, err
	}
}

// handOver queues the batch's job (when it holds requests), ends the list
// if every row is final, and completes the chunk's job: one transaction.
func (w *ClassifyListWorker) handOver(ctx context.Context, log *slog.Logger, job *river.Job[ClassifyListArgs], id uuid.UUID, b *db.Batch) error {
	return w.finish(ctx, log, job, id, func(client *Client, tx pgx.Tx) error {
		if b.Status != db.BatchStaging {
			return nil // handed over by an earlier run
		}
		n, err := db.BatchMarkReady(ctx, tx, b.ID)
		if err != nil || n == 0 {
			return err
		}
		if _, err := client.InsertTx(ctx, tx, BatchArgs{BatchID: b.ID.String(), ListID: id.String()}, nil); err != nil {
			return fmt.Errorf("error queueing the batch: %w", err)
		}
		log.InfoContext(ctx, "chunk staged for a batch", "requests", n)
		return nil
	})
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

// begin opens a transaction, with the River client that inserts and
// completes jobs in it.
func (w *ClassifyListWorker) begin(ctx context.Context) (*Client, pgx.Tx, error) {
	return begin(ctx, w.DB)
}

// finish ends the chunk: first (when set) also, then it ends the list if
// every row is final (with its webhook), completes the chunk's River job
// and queues the chunk after its window (feedSafely: a failure there does
// not stop the end); one transaction.
func (w *ClassifyListWorker) finish(ctx context.Context, log *slog.Logger, job *river.Job[ClassifyListArgs], id uuid.UUID,
	also func(*Client, pgx.Tx) error) error {
	client, tx, err := w.begin(ctx)
	if err != nil {
		return err
	}
	defer db.Rollback(ctx, tx)
	if also != nil {
		if err := also(client, tx); err != nil {
			return err
		}
	}
	ended, err := EndList(ctx, tx, client, w.Settings, id, Completed())
	if err != nil {
		return err
	}
	if err := db.ListNoteClear(ctx, tx, id); err != nil { // its work moves
		return err
	}
	if _, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job); err != nil {
		return fmt.Errorf("error completing River job: %w", err)
	}
	// After the job's completion, so that the window counts it out.
	feedSafely(ctx, log, client, tx, id, job.Args.Chunk+w.Settings.ListChunksInFlight, w.Settings.ListChunksInFlight)
	if err := db.Commit(ctx, tx); err != nil {
		return err
	}
	if ended {
		w.Lists.ListEnded(classifier.StatusCompleted)
		log.InfoContext(ctx, "list completed")
	}
	return nil
}
