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
// together: a River upgrade is checked against this file alone. One query
// here writes river_job, ProcessRescue, as River's own rescuer does (its
// JobRescueMany); every other write is River's client's.
//
// Three needs read them:
//   - a job whose River job was given up outside our code (discarded or
//     cancelled from River UI before a worker could record it) must still
//     read as FAILED, with River's last error;
//   - the queue gauges count River jobs by queue and state;
//   - the jobs a dead worker process was running are handed back in
//     seconds, not after River's RescueStuckJobsAfter.

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

// A list is stalled when it is running with no River job of its own left
// to run (a chunk or a provider batch in any state but the final ones):
// the job that would have queued the next chunk was given up outside the
// worker's code (discarded by River's rescuer, cancelled or deleted from
// River UI), or could not hand on its work. liveStates are the states a
// job can still run from.
const liveStates = `'available', 'pending', 'retryable', 'running', 'scheduled'`

// ListsStalled returns the lists PENDING or RUNNING that have no job of
// the kinds given in a state that can still run. It reads River's args
// index (a GIN index) once per active list.
func ListsStalled(ctx context.Context, exec DBTX, kinds []string) ([]uuid.UUID, error) {
	rows, err := exec.Query(ctx, `
		SELECT l.id FROM list l
		WHERE l.status IN ('PENDING', 'RUNNING')
		  AND NOT EXISTS (SELECT FROM river_job j
		                  WHERE j.args @> jsonb_build_object('list_id', l.id::text) AND j.kind = ANY($1)
		                    AND j.state IN (`+liveStates+`))
		ORDER BY l.created_at`, kinds)
	return collect(rows, err, pgx.RowTo[uuid.UUID])
}

// ListHasLiveJobs reports whether list id has a job of the kinds given in
// a state that can still run.
func ListHasLiveJobs(ctx context.Context, exec DBTX, id uuid.UUID, kinds []string) (bool, error) {
	var live bool
	err := exec.QueryRow(ctx, `
		SELECT EXISTS (SELECT FROM river_job
		               WHERE args @> jsonb_build_object('list_id', $1::text) AND kind = ANY($2)
		                 AND state IN (`+liveStates+`))`, id, kinds).Scan(&live)
	return live, translate(err)
}

// ChunkJobEnd is how the last River job of a list's chunk ended.
type ChunkJobEnd struct {
	State       string
	Attempt     int
	MaxAttempts int
	// Error is the job's last recorded error ("" for none).
	Error string
}

// ListChunkJobEnd returns how the last River job of kind for chunk of list
// id ended, and false when River no longer has one (its retention ended,
// or it was deleted).
func ListChunkJobEnd(ctx context.Context, exec DBTX, kind string, id uuid.UUID, chunk int) (ChunkJobEnd, bool, error) {
	var (
		e    ChunkJobEnd
		last []byte
	)
	err := exec.QueryRow(ctx, `
		SELECT state::text, attempt, max_attempts, errors[array_upper(errors, 1)]
		FROM river_job
		WHERE args @> jsonb_build_object('list_id', $2::text, 'chunk', $3::int) AND kind = $1
		ORDER BY id DESC LIMIT 1`, kind, id, chunk).Scan(&e.State, &e.Attempt, &e.MaxAttempts, &last)
	if err = translate(err); isNotFound(err) {
		return e, false, nil
	} else if err != nil {
		return e, false, err
	}
	var rec struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(last, &rec) == nil {
		e.Error = rec.Error
	}
	return e, true, nil
}

// ListLiveChunks counts list id's jobs of kind on queue in a state that
// can still run. It reads River's fetch index (state, queue, …), whose
// live part holds a few jobs per running list, not the list's history.
func ListLiveChunks(ctx context.Context, exec DBTX, kind, queue string, id uuid.UUID) (int, error) {
	var n int
	err := exec.QueryRow(ctx, `
		SELECT count(*) FROM river_job
		WHERE state IN (`+liveStates+`) AND queue = $2 AND kind = $1 AND args->>'list_id' = $3::text`,
		kind, queue, id).Scan(&n)
	return n, translate(err)
}

// ProcessRescue hands back the River jobs that worker processes whose
// lease ran out were running, as River's rescuer would after
// RescueStuckJobsAfter: each gets an attempt error saying which process
// died, and is made available at once (attempts left), discarded (none
// left) or cancelled (a cancel was asked). The process is marked rescued in
// the same transaction, so it is done once. It returns the processes and
// what each held; none when no lease has run out (one small read).
func ProcessRescue(ctx context.Context, b Beginner) ([]DeadProcess, error) {
	var dead []DeadProcess
	err := pgx.BeginFunc(ctx, b, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
			SELECT id, expires_at FROM worker_process
			WHERE expires_at < now() AND rescued_at IS NULL
			FOR UPDATE SKIP LOCKED`)
		dead, err = collect(rows, err, func(row pgx.CollectableRow) (DeadProcess, error) {
			var p DeadProcess
			err := row.Scan(&p.ID, &p.ExpiredAt)
			p.Jobs = map[string]int{}
			return p, err
		})
		if err != nil || len(dead) == 0 {
			return err
		}
		ids := make([]string, len(dead))
		byID := map[string]*DeadProcess{}
		for i := range dead {
			ids[i], byID[dead[i].ID] = dead[i].ID, &dead[i]
		}
		rows, err = tx.Query(ctx, `
			UPDATE river_job j SET
			    state = (CASE WHEN j.metadata ? 'cancel_attempted_at' THEN 'cancelled'
			                  WHEN j.attempt >= j.max_attempts THEN 'discarded'
			                  ELSE 'available' END)::river_job_state,
			    finalized_at = CASE WHEN j.metadata ? 'cancel_attempted_at' OR j.attempt >= j.max_attempts THEN now() END,
			    scheduled_at = CASE WHEN j.metadata ? 'cancel_attempted_at' OR j.attempt >= j.max_attempts THEN j.scheduled_at ELSE now() END,
			    errors = array_append(j.errors, jsonb_build_object('at', now(), 'attempt', greatest(j.attempt, 0),
			        'error', 'worker process ' || p.id || ' stopped renewing its lease (expired ' ||
			                 to_char(p.expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') || '); its job was handed back',
			        'trace', '')),
			    metadata = j.metadata || jsonb_build_object('river:rescue_count',
			        coalesce(CASE WHEN jsonb_typeof(j.metadata -> 'river:rescue_count') = 'number'
			                      THEN (j.metadata ->> 'river:rescue_count')::int END, 0) + 1)
			FROM worker_process p
			WHERE p.id = ANY($1) AND j.state = 'running' AND j.attempted_by[array_upper(j.attempted_by, 1)] = p.id
			RETURNING p.id, j.kind, coalesce(j.args ->> 'list_id', '')`, ids)
		if err != nil {
			return err
		}
		var process, kind, list string
		seen := map[string]bool{}
		_, err = pgx.ForEachRow(rows, []any{&process, &kind, &list}, func() error {
			p := byID[process]
			p.Jobs[kind]++
			if list != "" && !seen[process+list] {
				seen[process+list] = true
				p.Lists = append(p.Lists, list)
			}
			return nil
		})
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `
			UPDATE worker_process SET rescued_at = now() WHERE id = ANY($1);
			`, ids)
		if err != nil {
			return err
		}
		// A process dead for a day is forgotten.
		_, err = tx.Exec(ctx, `DELETE FROM worker_process WHERE expires_at < now() - interval '1 day'`)
		return err
	})
	return dead, translate(err)
}
