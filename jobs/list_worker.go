package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/classifier/llm"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/spend"
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

// firstChunks are the chunk jobs an upload inserts, in its transaction:
// the first chunk alone. The list's chunks then queue one another while
// they run (ClassifyListWorker.feed), never as one ends: each is a fetch of
// its own, taken by whichever worker process is free. One insert of
// several would go whole to the first process to fetch, and a chunk queued
// as one ends would go to the process whose slot just freed, so a list
// would gather on one process.
func firstChunks(listID uuid.UUID) []river.InsertManyParams {
	return []river.InsertManyParams{{Args: ClassifyListArgs{ListID: listID.String(), Chunk: 0}}}
}

// listChunkOutput is recorded on a chunk's River job (River UI shows it):
// what the run did, and where the whole list stands.
type listChunkOutput struct {
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
	Metrics  *Metrics        // nil: no metrics
	Lists    *ListMetrics    // nil: no metrics
	Price    llm.Pricer      // nil: unpriced
	Spend    *spend.Spenders // nil: no budgets
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
// ListRunTime, well before it.
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
	out := listChunkOutput{ListID: id.String(), Chunk: job.Args.Chunk, Domains: pending, Counts: o.Counts}
	if now, err := db.ListGet(ctx, w.DB, id); err == nil {
		out.ListDone, out.ListRows = now.Done, now.Rows
	}
	return river.RecordOutput(ctx, out)
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
	ended, err := endList(ctx, tx, client, w.Settings, id, asCompleted())
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
