package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"github.com/domainclass/domainclass/db"
)

// PurgeArgs is the periodic clean-up: expired Idempotency-Keys (they
// replay for 24 hours; after that they are only dead weight) and jobs
// ended longer than JobRetention ago.
type PurgeArgs struct{}

// Kind is the River job kind.
func (PurgeArgs) Kind() string { return "purge" }

// InsertOpts keeps one purge per period: the periodic enqueuer runs on the
// leader, and a new leader may enqueue again at once.
func (PurgeArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueMaintenance, UniqueOpts: river.UniqueOpts{ByPeriod: PurgeInterval}}
}

// QueueMaintenance holds housekeeping jobs, apart from the queues whose
// depth operators watch.
const QueueMaintenance = "maintenance"

// PurgeInterval: hourly keeps the table within about a day and an hour of
// keys, with deletes small enough to go unnoticed.
const PurgeInterval = time.Hour

// purgeBatch bounds one delete, so a large backlog is purged in short
// transactions.
const purgeBatch = 5000

// PurgeWorker deletes expired Idempotency-Keys and old ended jobs.
type PurgeWorker struct {
	river.WorkerDefaults[PurgeArgs]
	DB     db.DBTX
	Logger *slog.Logger
	// JobRetention is how long an ended job is kept (Settings.JobRetention);
	// 0 keeps jobs forever.
	JobRetention time.Duration
}

// Work deletes in batches until nothing is left to delete.
func (w *PurgeWorker) Work(ctx context.Context, _ *river.Job[PurgeArgs]) error {
	keys, err := purgeAll(func() (int64, error) { return db.IdempotencyKeyPurge(ctx, w.DB, purgeBatch) })
	if err != nil {
		return fmt.Errorf("error purging idempotency keys: %w", err)
	}
	var jobs int64
	if w.JobRetention > 0 {
		if jobs, err = purgeAll(func() (int64, error) { return db.JobPurge(ctx, w.DB, w.JobRetention, purgeBatch) }); err != nil {
			return fmt.Errorf("error purging ended jobs: %w", err)
		}
	}
	if keys > 0 || jobs > 0 {
		w.Logger.InfoContext(ctx, "purged expired idempotency keys and old jobs", "keys_deleted", keys, "jobs_deleted", jobs)
	}
	return river.RecordOutput(ctx, map[string]int64{"idempotency_keys_deleted": keys, "jobs_deleted": jobs})
}

// purgeAll calls purge until a batch comes back short.
func purgeAll(purge func() (int64, error)) (int64, error) {
	var total int64
	for {
		n, err := purge()
		total += n
		if err != nil || n < purgeBatch {
			return total, err
		}
	}
}

// PeriodicJobs are the jobs every worker registers; River's leader enqueues
// them.
func PeriodicJobs() []*river.PeriodicJob {
	return []*river.PeriodicJob{river.NewPeriodicJob(river.PeriodicInterval(PurgeInterval),
		func() (river.JobArgs, *river.InsertOpts) { return PurgeArgs{}, nil },
		&river.PeriodicJobOpts{RunOnStart: true})}
}
