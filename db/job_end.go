package db

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/domainclass/domainclass/classifier"
)

// JobEnd is how a job ended, as seen inside the transaction that ended it.
type JobEnd struct {
	Status classifier.Status
	// CompletedAt is when the job ended. A job can end more than once (FAILED,
	// then retried by an operator), and each end has its own CompletedAt, so
	// it names the end.
	CompletedAt time.Time
	// CallbackURL is the job's webhook address, "" for none.
	CallbackURL string
}

// JobEndGetTx reads the end of job id inside tx, the transaction of
// JobComplete or JobFail that ended it (so it sees the new status). It
// returns an ENOTFOUND error for an unknown id and an EINVALID error for a
// job that has not ended.
func JobEndGetTx(ctx context.Context, tx pgx.Tx, id uuid.UUID) (JobEnd, error) {
	var (
		end         JobEnd
		completedAt *time.Time
		callback    *string
	)
	if err := tx.QueryRow(ctx, `SELECT status, completed_at, callback_url FROM classify_job WHERE id = $1`, id).
		Scan(&end.Status, &completedAt, &callback); err != nil {
		return end, translate(err)
	}
	if completedAt == nil || (end.Status != classifier.StatusCompleted && end.Status != classifier.StatusFailed) {
		return end, classifier.Errorf(classifier.EINVALID, "job %s has not ended (status %s)", id, end.Status)
	}
	end.CompletedAt, end.CallbackURL = *completedAt, deref(callback)
	return end, nil
}
