package db

import (
	"context"
	"encoding/json"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/domainclass/domainclass/classifier"
)

// This file holds every query that reads River's own tables (river_job).
// River owns their shape and may change it in a migration, so they are kept
// together: a River upgrade is checked against this file alone. Nothing
// here writes River's tables; River's client does that.
//
// Two needs read them:
//   - a job whose River job was given up outside our code (discarded or
//     cancelled from River UI before a worker could record it) must still
//     read as FAILED, with River's last error;
//   - the queue gauges count River jobs by queue and state.

// jobGet reads a job with its River job's state, and its domains. With
// caller set, another caller's job is ErrNotFound.
func jobGet(ctx context.Context, exec DBTX, id uuid.UUID, caller *string) (*classifier.Job, error) {
	j := &classifier.Job{}
	var (
		errMsg, callback *string
		riverID          *int64
		riverState       *string
		riverErrors      []byte
		wantSince        *time.Time
	)
	err := exec.QueryRow(ctx, `
		SELECT j.id, j.caller, j.classifier, j.status, j.error, j.callback_url, j.river_job_id,
		       j.created_at, j.started_at, j.completed_at,
		       rj.state::text, rj.errors[array_upper(rj.errors, 1)],
		       coalesce(j.want_max_age, '0'), j.want_since
		FROM classify_job j
		LEFT JOIN river_job rj ON rj.id = j.river_job_id
		WHERE j.id = $1 AND ($2::text IS NULL OR j.caller = $2)`, id, caller,
	).Scan(&j.ID, &j.Caller, &j.Classifier, &j.Status, &errMsg, &callback, &riverID,
		&j.CreatedAt, &j.StartedAt, &j.CompletedAt, &riverState, &riverErrors, &j.Want.MaxAge, &wantSince)
	if err != nil {
		return nil, translate(err)
	}
	j.Error, j.CallbackURL, j.RiverJobID, j.Want.Since = deref(errMsg), deref(callback), deref(riverID), deref(wantSince)
	if (j.Status == classifier.StatusPending || j.Status == classifier.StatusRunning) && riverState != nil &&
		(*riverState == "discarded" || *riverState == "cancelled") {
		j.Status = classifier.StatusFailed
		j.Error = "the job was " + *riverState
		var last struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(riverErrors, &last) == nil && last.Error != "" {
			j.Error += ": " + last.Error
		}
	}
	if j.Domains, err = jobDomains(ctx, exec, id, j.Classifier); err != nil {
		return nil, err
	}
	return j, nil
}

// QueueStat is the number of River jobs of one queue in one state, and the
// age of the oldest of them that is due and waiting for a worker (available,
// or scheduled/retryable past its time and not yet promoted by River).
type QueueStat struct {
	Queue            string
	State            string
	Count            int64
	OldestDueSeconds float64
}

// QueueStatsTimeout bounds the query, so a slow database never hangs a scrape.
const QueueStatsTimeout = 2 * time.Second

// QueueStats counts River jobs by queue and state in one query. It reads the
// (state, queue, …) fetch index River keeps, so it stays cheap as the table
// grows with retention.
func QueueStats(ctx context.Context, exec DBTX) ([]QueueStat, error) {
	rows, err := exec.Query(ctx, `
		SELECT queue, state::text, count(*),
		       coalesce(extract(epoch FROM now() - min(scheduled_at) FILTER (
		           WHERE scheduled_at <= now() AND state IN ('available', 'scheduled', 'retryable'))), 0)
		FROM river_job
		GROUP BY queue, state`)
	return collect(rows, err, pgx.RowToStructByPos[QueueStat])
}
