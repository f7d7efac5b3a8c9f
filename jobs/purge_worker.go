package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"github.com/domainclass/domainclass/db"
)

// purgeArgs is the periodic clean-up: expired Idempotency-Keys (they
// replay for 24 hours; after that they are only dead weight), jobs ended
// longer than JobRetention ago, lists ended longer ago than their
// retention (LIST_RETENTION) with their rows, and the provenance rows
// nothing refers to any more.
type purgeArgs struct{}

// Kind is the River job kind.
func (purgeArgs) Kind() string { return "purge" }

// InsertOpts keeps one purge per period: the periodic enqueuer runs on the
// leader, and a new leader may enqueue again at once.
func (purgeArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queueMaintenance, UniqueOpts: river.UniqueOpts{ByPeriod: purgeInterval}}
}

// queueMaintenance holds housekeeping jobs, apart from the queues whose
// depth operators watch.
const queueMaintenance = "maintenance"

// purgeInterval: hourly keeps the table within about a day and an hour of
// keys, with deletes small enough to go unnoticed.
const purgeInterval = time.Hour

// purgeBatch bounds one delete (rows of a list, provenance rows, jobs,
// keys), so that a large backlog is purged in short transactions: 5,000
// list rows take tens of milliseconds, and a writer that needs a row the
// batch holds (a cache hit on a provenance row being deleted) waits that
// long at most.
const purgeBatch = 5000

// purgeListBatch bounds the lists taken off in one statement: each takes
// its Idempotency-Keys and provider batches with it.
const purgeListBatch = 100

// purgeStopMargin: a run starts no new batch when its job has less than
// this left before its timeout (or a quarter of its time, when shorter),
// and snoozes to go on (see Work).
const purgeStopMargin = 30 * time.Second

// purgeResume is how soon a run cut short by its timeout goes on.
const purgeResume = time.Minute

// What a batch deleted, as BatchDoneFunc names it.
const (
	purgedKeys       = "idempotency keys"
	purgedJobs       = "jobs"
	purgedBatchItems = "batch items"
	purgedLists      = "lists"
	purgedListRows   = "list rows"
	purgedProvenance = "provenance"
)

// PurgeWorker deletes what has expired, in batches.
type PurgeWorker struct {
	river.WorkerDefaults[purgeArgs]
	// DB is the pool: each batch is a statement of its own, committed at
	// once.
	DB     db.DBTX
	Logger *slog.Logger
	// JobRetention is how long an ended job is kept (Settings.JobRetention);
	// 0 keeps jobs forever. A list keeps the retention it was uploaded
	// under.
	JobRetention time.Duration
	// BatchDoneFunc, when set, is called after each batch has committed,
	// with what it deleted (purgedLists, …) and how many.
	BatchDoneFunc func(what string, n int64)
}

// purgeCounts is what one run deleted (River UI shows it as the job's
// output).
type purgeCounts struct {
	Keys       int64 `json:"idempotency_keys_deleted"`
	Jobs       int64 `json:"jobs_deleted"`
	BatchItems int64 `json:"batch_items_deleted"`
	Lists      int64 `json:"lists_deleted"`
	ListRows   int64 `json:"list_rows_deleted"`
	Provenance int64 `json:"provenance_deleted"`
	// More is true when the run stopped before its timeout with work left.
	More bool `json:"more,omitempty"`
}

// errPurgeTimeUp stops a run that is about to time out.
var errPurgeTimeUp = errors.New("the purge's time is up")

// Work runs a purge, and snoozes to go on soon when it ran out of time
// with work left (a backlog after a long outage, or the first run after an
// upgrade, which looks at every provenance row once).
func (w *PurgeWorker) Work(ctx context.Context, _ *river.Job[purgeArgs]) error {
	counts, err := w.Purge(ctx)
	if counts != (purgeCounts{}) {
		w.Logger.InfoContext(ctx, "purged expired keys, jobs, lists and provenance", "keys_deleted", counts.Keys,
			"jobs_deleted", counts.Jobs, "lists_deleted", counts.Lists, "list_rows_deleted", counts.ListRows,
			"batch_items_deleted", counts.BatchItems, "provenance_deleted", counts.Provenance, "more", counts.More)
	}
	if err != nil {
		return err
	}
	if err := river.RecordOutput(ctx, counts); err != nil {
		return err
	}
	if counts.More {
		return river.JobSnooze(purgeResume)
	}
	return nil
}

// Purge deletes, in batches until nothing is left: expired keys, old
// jobs, expired lists (their staged batch requests first, then the lists,
// then their rows), then the provenance rows that lost a reference and
// have none left. It stops early, with More set, when ctx is about to end.
func (w *PurgeWorker) Purge(ctx context.Context) (purgeCounts, error) {
	var c purgeCounts
	stopAt := time.Time{}
	if deadline, ok := ctx.Deadline(); ok {
		stopAt = deadline.Add(-min(purgeStopMargin, time.Until(deadline)/4))
	}
	steps := []struct {
		what  string
		into  *int64
		purge func() (n int64, more bool, err error)
	}{
		{purgedKeys, &c.Keys, whileFull(purgeBatch, func() (int64, error) { return db.IdempotencyKeyPurge(ctx, w.DB, purgeBatch) })},
		{purgedJobs, &c.Jobs, whileFull(purgeBatch, func() (int64, error) {
			if w.JobRetention <= 0 {
				return 0, nil
			}
			return db.JobPurge(ctx, w.DB, w.JobRetention, purgeBatch)
		})},
		{purgedBatchItems, &c.BatchItems, whileFull(purgeBatch, func() (int64, error) { return db.BatchItemsPurge(ctx, w.DB, purgeBatch) })},
		{purgedLists, &c.Lists, whileFull(purgeListBatch, func() (int64, error) { return db.ListPurge(ctx, w.DB, purgeListBatch) })},
		{purgedListRows, &c.ListRows, func() (int64, bool, error) {
			rows, lists, err := db.ListRowsPurge(ctx, w.DB, purgeBatch)
			return rows, rows > 0 || lists > 0, err
		}},
		{purgedProvenance, &c.Provenance, func() (int64, bool, error) {
			deleted, checked, err := db.ProvenancePurge(ctx, w.DB, purgeBatch)
			return deleted, checked == purgeBatch, err
		}},
	}
	for _, s := range steps {
		err := w.batches(stopAt, s.what, s.into, s.purge)
		if errors.Is(err, errPurgeTimeUp) {
			c.More = true
			return c, nil
		} else if err != nil {
			return c, fmt.Errorf("error purging %s: %w", s.what, err)
		}
	}
	return c, nil
}

// whileFull is a batch whose work is done when it comes back short.
func whileFull(size int64, purge func() (int64, error)) func() (int64, bool, error) {
	return func() (int64, bool, error) {
		n, err := purge()
		return n, n == size, err
	}
}

// batches runs purge until it says there is no more, adding what each
// batch deleted into total; it starts none after stopAt (unless zero).
func (w *PurgeWorker) batches(stopAt time.Time, what string, total *int64, purge func() (int64, bool, error)) error {
	for {
		if !stopAt.IsZero() && time.Now().After(stopAt) {
			return errPurgeTimeUp
		}
		n, more, err := purge()
		if err != nil {
			return err
		}
		*total += n
		if w.BatchDoneFunc != nil && (n > 0 || more) {
			w.BatchDoneFunc(what, n)
		}
		if !more {
			return nil
		}
	}
}

// PeriodicJobs are the jobs every worker registers; River's leader enqueues
// them: the purge, the list sweep (every s.ListSweepInterval) and the
// change fan-out's backstop.
func PeriodicJobs(s Settings) []*river.PeriodicJob {
	return []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(purgeInterval),
			func() (river.JobArgs, *river.InsertOpts) { return purgeArgs{}, nil },
			&river.PeriodicJobOpts{RunOnStart: true}),
		listSweepPeriodicJob(s.ListSweepInterval),
		changeFanoutPeriodicJob(),
	}
}
