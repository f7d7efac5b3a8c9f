package jobs

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
)

// The list sweep: the last step of a chunk's retry policy (retry.go), for
// a chunk whose job ended without our code running (River's rescuer
// discards a job whose worker died on its last attempt; an operator
// cancels or deletes one in River UI).

// listSweepArgs is the periodic look for stalled lists (ListSweepWorker).
type listSweepArgs struct{}

// Kind is the River job kind.
func (listSweepArgs) Kind() string { return "list_sweep" }

// InsertOpts keeps at most one sweep waiting or running: a sweep that
// finds work takes a while, and the next period's would only repeat it.
func (listSweepArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queueMaintenance, UniqueOpts: river.UniqueOpts{ByArgs: true,
		ByState: []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
			rivertype.JobStateScheduled, rivertype.JobStateRetryable}}}
}

// listSweepPeriodicJob runs the sweep every interval, and as the leader
// starts.
func listSweepPeriodicJob(interval time.Duration) *river.PeriodicJob {
	return river.NewPeriodicJob(river.PeriodicInterval(interval),
		func() (river.JobArgs, *river.InsertOpts) { return listSweepArgs{}, nil },
		&river.PeriodicJobOpts{RunOnStart: true})
}

// listJobKinds are the River jobs that work a list: its chunks, and its
// provider batches (economy).
var listJobKinds = []string{ClassifyListArgs{}.Kind(), batchArgs{}.Kind()}

// listSweepOutput is recorded on a sweep's River job.
type listSweepOutput struct {
	Stalled    int `json:"stalled"`
	RowsFailed int `json:"rows_failed"`
	Fed        int `json:"chunks_queued"`
	Completed  int `json:"lists_completed"`
	Failed     int `json:"lists_failed"`
}

// ListSweepWorker works listSweepArgs: for each list PENDING or RUNNING
// with no job left to run, it fails the rows of its chunks that were lost
// (each row says which chunk and why: the River job's end and last error),
// queues the chunks after them, and ends the list if every row is final.
// A list it can do neither for (no row left that a chunk would answer, and
// rows not final) is given up, FAILED, with the reason: it would otherwise
// stay RUNNING forever.
type ListSweepWorker struct {
	river.WorkerDefaults[listSweepArgs]
	DB       db.Executor
	Settings Settings
	Logger   *slog.Logger
	Lists    *ListMetrics // nil: no metrics
}

// Work sweeps every stalled list, each in a transaction of its own.
func (w *ListSweepWorker) Work(ctx context.Context, _ *river.Job[listSweepArgs]) error {
	client, err := river.ClientFromContextSafely[pgx.Tx](ctx)
	if err != nil {
		return err
	}
	ids, err := db.ListsStalled(ctx, w.DB, listJobKinds)
	if err != nil {
		return fmt.Errorf("error looking for stalled lists: %w", err)
	}
	var (
		out      listSweepOutput
		firstErr error
	)
	for _, id := range ids {
		if err := w.sweep(ctx, client, id, &out); err != nil {
			w.Logger.ErrorContext(ctx, "error sweeping a stalled list", "list_id", id.String(), "error", err)
			firstErr = cmp.Or(firstErr, err)
		}
	}
	if out.Stalled > 0 {
		w.Logger.InfoContext(ctx, "swept stalled lists", "lists", out.Stalled, "rows_failed", out.RowsFailed,
			"chunks_queued", out.Fed, "lists_completed", out.Completed, "lists_failed", out.Failed)
	}
	if err := river.RecordOutput(ctx, out); err != nil {
		return err
	}
	return firstErr
}

// sweep handles one list, if it is still stalled once locked: a chunk
// that commits its hand-on first makes it not stalled.
func (w *ListSweepWorker) sweep(ctx context.Context, client *Client, id uuid.UUID, out *listSweepOutput) error {
	tx, err := db.Begin(ctx, w.DB)
	if err != nil {
		return err
	}
	defer db.Rollback(ctx, tx)
	l, err := db.ListLock(ctx, tx, id)
	if err != nil || l.Ended() {
		return ignoreNotFound(err)
	}
	if live, err := db.ListHasLiveJobs(ctx, tx, id, listJobKinds); err != nil || live {
		return err
	}
	log := w.Logger.With("list_id", id.String())
	failed, err := w.failOrphans(ctx, tx, l)
	if err != nil {
		return err
	}
	fed, err := feedChunks(ctx, client, tx, id, w.Settings.ListChunksInFlight)
	if err != nil {
		return err
	}
	ended, err := endList(ctx, tx, client, w.Settings, id, asCompleted())
	if err != nil {
		return err
	}
	gaveUp := false
	if !ended && fed == 0 {
		reason := "the list has rows not answered and no chunk left to answer them; retry it"
		if gaveUp, err = endList(ctx, tx, client, w.Settings, id, asFailed(reason)); err != nil {
			return err
		}
	}
	if err := db.Commit(ctx, tx); err != nil {
		return err
	}
	out.Stalled++
	out.RowsFailed += failed
	out.Fed += fed
	w.Lists.ListRows(classifier.StatusFailed, failed)
	switch {
	case ended:
		out.Completed++
		w.Lists.ListEnded(classifier.StatusCompleted)
	case gaveUp:
		out.Failed++
		w.Lists.ListEnded(classifier.StatusFailed)
	}
	log.WarnContext(ctx, "list was running with nothing queued; swept", "rows_failed", failed, "chunks_queued", fed,
		"completed", ended, "failed", gaveUp)
	return nil
}

// failOrphans fails the rows of l's chunks that were queued and lost, with
// how their chunk's River job ended, and returns how many rows it failed.
func (w *ListSweepWorker) failOrphans(ctx context.Context, tx pgx.Tx, l *classifier.List) (int, error) {
	chunks, err := db.ListOrphanChunks(ctx, tx, l.ID)
	if err != nil {
		return 0, err
	}
	kind := ClassifyListArgs{}.Kind()
	n := 0
	for _, c := range chunks {
		end, found, err := db.ListChunkJobEnd(ctx, tx, kind, l.ID, c)
		if err != nil {
			return n, err
		}
		reason := fmt.Sprintf("not answered: chunk %d's job is gone from River", c)
		switch {
		case found && end.State == "completed":
			// An economy chunk hands its fresh domains to a batch job.
			reason = fmt.Sprintf("not answered: chunk %d handed its rows to a provider batch whose job is gone", c)
		case found && end.Attempt == 0:
			reason = fmt.Sprintf("not answered: chunk %d's job was %s before it ran", c, end.State)
		case found:
			reason = fmt.Sprintf("not answered: chunk %d's job was %s after %d of %d attempts", c, end.State, end.Attempt, end.MaxAttempts)
			if end.Error != "" {
				reason += ": " + end.Error
			}
		}
		from, to := l.ChunkRange(c)
		m, err := db.ListRowsFail(ctx, tx, l.ID, from, to, reason)
		if err != nil {
			return n, err
		}
		n += m
	}
	return n, nil
}
