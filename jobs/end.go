package jobs

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
)

// ending is how endJob or endList ends a job or a list.
type ending struct {
	// Status is StatusCompleted (a list: only once every row is final),
	// StatusFailed, or, for a list, StatusCancelled.
	Status classifier.Status
	// Reason is why it FAILED.
	Reason string
	// Caller is who cancels a list: another caller's list is left as it is.
	Caller string
}

// asCompleted ends a job, or a list whose rows are all final, COMPLETED.
func asCompleted() ending { return ending{Status: classifier.StatusCompleted} }

// asFailed ends a job or a list FAILED with reason.
func asFailed(reason string) ending { return ending{Status: classifier.StatusFailed, Reason: reason} }

// asCancelled cancels caller's list.
func asCancelled(caller string) ending {
	return ending{Status: classifier.StatusCancelled, Caller: caller}
}

// endJob ends job id in tx as e says (COMPLETED or FAILED) and, when this is
// a new end and the job has a callback URL, queues its webhook: the
// delivery is queued if and only if the end commits, once per end. It
// reports whether the job ended now (false: it had already ended). The
// worker completes its River job itself, in the same tx.
func endJob(ctx context.Context, tx pgx.Tx, ins Inserter, s Settings, id uuid.UUID, e ending) (bool, error) {
	var (
		end   db.JobEnd
		ended bool
		err   error
	)
	switch e.Status {
	case classifier.StatusCompleted:
		end, ended, err = db.JobComplete(ctx, tx, id)
	case classifier.StatusFailed:
		end, ended, err = db.JobFail(ctx, tx, id, e.Reason)
	default:
		return false, fmt.Errorf("a job does not end %s", e.Status)
	}
	if err != nil || !ended {
		return false, err
	}
	return true, queueWebhook(ctx, tx, ins, s, WebhookArgs{JobID: id.String(), EndedAt: end.CompletedAt}, end.CallbackURL)
}

// endList ends list id in tx as e says and, when this is a new end and the
// list has a callback URL, queues its list.completed webhook. It reports
// whether the list ended now: false for a list that had already ended, a
// COMPLETED end of a list with rows not final, and another caller's
// cancel. A cancel waits for the list's model calls that are starting
// (db.ListCancel); CancelList also cancels its River jobs.
func endList(ctx context.Context, tx pgx.Tx, ins Inserter, s Settings, id uuid.UUID, e ending) (bool, error) {
	var (
		end   db.ListEnd
		ended bool
		err   error
	)
	switch e.Status {
	case classifier.StatusCompleted:
		end, ended, err = db.ListComplete(ctx, tx, id)
	case classifier.StatusFailed:
		end, ended, err = db.ListFail(ctx, tx, id, e.Reason)
	case classifier.StatusCancelled:
		end, ended, err = db.ListCancel(ctx, tx, id, e.Caller)
	default:
		return false, fmt.Errorf("a list does not end %s", e.Status)
	}
	if err != nil || !ended {
		return false, err
	}
	return true, queueWebhook(ctx, tx, ins, s, WebhookArgs{ListID: id.String(), EndedAt: end.CompletedAt}, end.CallbackURL)
}

// queueWebhook inserts the delivery of an end in tx, the transaction that
// ended it, when there is a callback URL: the one place a WebhookArgs is
// queued.
func queueWebhook(ctx context.Context, tx pgx.Tx, ins Inserter, s Settings, args WebhookArgs, callbackURL string) error {
	if callbackURL == "" {
		return nil
	}
	if _, err := ins.InsertTx(ctx, tx, args, &river.InsertOpts{MaxAttempts: s.WebhookMaxAttempts()}); err != nil {
		return fmt.Errorf("error enqueueing webhook of %s: %w", args.subject(), db.Translate(err))
	}
	return nil
}

// JobCanceller lists, cancels and retries River jobs in a transaction,
// and inserts: what cancelling a list needs (the API's River client, or
// *Client).
type JobCanceller interface {
	Inserter
	JobListTx(ctx context.Context, tx pgx.Tx, params *river.JobListParams) (*river.JobListResult, error)
	JobCancelTx(ctx context.Context, tx pgx.Tx, jobID int64) (*rivertype.JobRow, error)
	JobRetryTx(ctx context.Context, tx pgx.Tx, jobID int64) (*rivertype.JobRow, error)
}

// CancelList cancels caller's list id in tx (endList with Cancelled: its
// rows not final are CANCELLED, its webhook queued) and, when it ended
// now, its River jobs: the chunks that wait are cancelled (running ones
// finish the calls they have in flight; the list's gate refuses their
// next ones), and its batch jobs run at once, to see the list cancelled
// and cancel their provider batches. It reports whether the list ended
// now: false for a list that had already ended, or another caller's.
func CancelList(ctx context.Context, tx pgx.Tx, q JobCanceller, s Settings, id uuid.UUID, caller string) (bool, error) {
	ended, err := endList(ctx, tx, q, s, id, asCancelled(caller))
	if err != nil || !ended {
		return false, err
	}
	err = eachListJob(ctx, tx, q, id, batchArgs{}.Kind(), "waking batch job",
		func(jobID int64) error { _, err := q.JobRetryTx(ctx, tx, jobID); return err },
		rivertype.JobStateScheduled, rivertype.JobStateRetryable)
	if err != nil {
		return false, err
	}
	err = eachListJob(ctx, tx, q, id, ClassifyListArgs{}.Kind(), "cancelling chunk job",
		func(jobID int64) error { _, err := q.JobCancelTx(ctx, tx, jobID); return err },
		rivertype.JobStateAvailable, rivertype.JobStateScheduled, rivertype.JobStateRetryable, rivertype.JobStatePending)
	return err == nil, err
}

// eachListJob calls do with each River job of kind, in one of states, whose
// args name list id. A job that is gone by then is skipped.
func eachListJob(ctx context.Context, tx pgx.Tx, q JobCanceller, id uuid.UUID, kind, doing string, do func(int64) error,
	states ...rivertype.JobState) error {
	res, err := q.JobListTx(ctx, tx, river.NewJobListParams().Kinds(kind).States(states...).
		Where("args->>'list_id' = @list_id", river.NamedArgs{"list_id": id.String()}).First(10_000))
	if err != nil {
		return fmt.Errorf("error listing the list's %s jobs: %w", kind, db.Translate(err))
	}
	for _, j := range res.Jobs {
		if err := do(j.ID); err != nil && !errors.Is(err, rivertype.ErrNotFound) {
			return fmt.Errorf("error %s %d: %w", doing, j.ID, db.Translate(err))
		}
	}
	return nil
}

// ErrListCancelled is RetryList's refusal of a cancelled list: it is not
// resumed.
var ErrListCancelled = errors.New("a cancelled list is not resumed")

// RetryList queues caller's list id's FAILED rows and the rows it never
// answered again, in tx, as chunks of a new pass, when the list has ended
// COMPLETED with some, or FAILED; it is RUNNING again then. It returns the
// list as it is now and how many rows it queued: 0 for a list still
// running or with every row answered, left as it is. It takes the caller's
// lock first, as an upload does, so that admit (the caller's limits,
// checked only when there is something to queue) counts exactly. It
// returns db.ErrNotFound for another caller's list, ErrListCancelled for a
// cancelled one (it is not resumed), and admit's error.
func RetryList(ctx context.Context, tx pgx.Tx, ins Inserter, s Settings, id uuid.UUID, caller string,
	admit func() error) (*classifier.List, int, error) {
	if err := db.ListActiveLock(ctx, tx, caller); err != nil {
		return nil, 0, err
	}
	l, err := db.ListLock(ctx, tx, id)
	switch {
	case err != nil:
		return nil, 0, err
	case l.Caller != caller:
		return nil, 0, db.ErrNotFound
	case l.Status == classifier.StatusCancelled:
		return nil, 0, ErrListCancelled
	case l.Status != classifier.StatusCompleted && l.Status != classifier.StatusFailed:
		return l, 0, nil // still running: its rows are being answered
	case l.Failed == 0 && l.Done == l.Rows:
		return l, 0, nil // every row answered
	}
	if admit != nil {
		if err := admit(); err != nil {
			return nil, 0, err
		}
	}
	r, err := db.ListRetryRows(ctx, tx, l)
	if err != nil || r.Rows == 0 {
		return l, 0, err
	}
	fed, err := feedChunks(ctx, ins, tx, l.ID, s.ListChunksInFlight)
	if err != nil {
		return nil, 0, fmt.Errorf("error queueing the list's chunks: %w", err)
	}
	if fed == 0 {
		return nil, 0, errors.New("a retry found rows to answer and no chunk to answer them")
	}
	if l, err = db.ListGet(ctx, tx, id); err != nil {
		return nil, 0, err
	}
	return l, r.Rows, nil
}
