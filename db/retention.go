package db

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The retention of lists (LIST_RETENTION) and of provenance: what a caller
// keeps stored, and the purge's queries. Every purge statement touches a
// bounded number of rows and is its own transaction, so that it holds its
// locks for one batch at most.

// endedStatuses is the SQL list of a list's end statuses.
const endedStatuses = `('COMPLETED', 'CANCELLED', 'FAILED')`

// expired is the condition of a list that the purge may take: ended longer
// ago than it is kept.
const expired = `status IN ` + endedStatuses + ` AND completed_at + retention < now()`

// ListStorage is what a caller has stored in lists.
type ListStorage struct {
	// Rows is the rows of the caller's lists, ended or not, that are not
	// purged yet.
	Rows int64
	// NextExpiry is the soonest one of the caller's ended lists expires
	// (its rows stop counting within the purge's hour after); nil when none
	// has ended.
	NextExpiry *time.Time
}

// ListStorageOf returns what caller has stored in lists: one indexed read
// of its list rows (never of their rows). In the transaction that holds the
// caller's list lock (ListActiveLock) it is exact.
func ListStorageOf(ctx context.Context, exec DBTX, caller string) (ListStorage, error) {
	var s ListStorage
	err := exec.QueryRow(ctx, `
		SELECT coalesce(sum(rows), 0)::bigint, min(completed_at + retention) FILTER (WHERE status IN `+endedStatuses+`)
		FROM list WHERE caller = $1`, caller).Scan(&s.Rows, &s.NextExpiry)
	return s, translate(err)
}

// BatchItemsPurge deletes at most batch staged batch requests of expired
// lists (they hold each request's whole body), and returns how many it
// deleted. ListPurge takes a list only once they are gone, so that the
// list's delete never cascades to a million of them.
func BatchItemsPurge(ctx context.Context, exec DBTX, batch int) (int64, error) {
	tag, err := exec.Exec(ctx, `
		DELETE FROM llm_batch_item WHERE (batch_id, row) IN (
			SELECT i.batch_id, i.row
			FROM list l JOIN llm_batch b ON b.list_id = l.id JOIN llm_batch_item i ON i.batch_id = b.id
			WHERE l.`+expired+`
			LIMIT $1)`, batch)
	if err != nil {
		return 0, translate(err)
	}
	return tag.RowsAffected(), nil
}

// ListPurge takes at most batch expired lists off, oldest first, and
// returns how many: each is gone at once (an unknown id to the API, its
// Idempotency-Keys and provider batches with it: ON DELETE CASCADE), and
// its rows are queued for ListRowsPurge. A list with staged batch requests
// left waits for BatchItemsPurge.
func ListPurge(ctx context.Context, exec DBTX, batch int) (int64, error) {
	tag, err := exec.Exec(ctx, `
		WITH gone AS (
			DELETE FROM list WHERE id IN (
				SELECT l.id FROM list l
				WHERE l.`+expired+`
				  AND NOT EXISTS (SELECT FROM llm_batch b JOIN llm_batch_item i ON i.batch_id = b.id WHERE b.list_id = l.id)
				ORDER BY l.completed_at
				LIMIT $1)
			  -- Again on the row as it is once locked: a list retried
			  -- meanwhile (POST /lists/{id}/retry) is running again.
			  AND `+expired+`
			RETURNING id, rows
		)
		INSERT INTO list_purge (list_id, rows) SELECT id, rows FROM gone`, batch)
	if err != nil {
		return 0, translate(err)
	}
	return tag.RowsAffected(), nil
}

// ListRowsPurge deletes the next batch rows of one purged list (the first
// taken off), by row number, and names the provenance they pointed at for
// ProvenancePurge. It returns how many rows it deleted, and lists 1 when
// that was the list's last batch and the list is done with.
func ListRowsPurge(ctx context.Context, exec DBTX, batch int) (rows, lists int64, err error) {
	// Rows are numbered 1..rows without gaps: a range of batch row numbers
	// holds at most batch rows, found by the primary key, and where the
	// next range starts is kept, so that no batch reads the index entries
	// of the rows deleted before it.
	err = exec.QueryRow(ctx, `
		WITH l AS (
			SELECT list_id, rows, next_row FROM list_purge ORDER BY purged_at, list_id LIMIT 1 FOR UPDATE
		), gone AS (
			DELETE FROM list_row r USING l
			WHERE r.list_id = l.list_id AND r.row >= l.next_row AND r.row < l.next_row + $1
			RETURNING r.provenance_id
		), candidates AS (
			INSERT INTO provenance_candidate (id)
			SELECT DISTINCT provenance_id FROM gone WHERE provenance_id IS NOT NULL
			ON CONFLICT DO NOTHING
		), moved AS (
			UPDATE list_purge p SET next_row = l.next_row + $1 FROM l
			WHERE p.list_id = l.list_id AND l.next_row + $1 <= l.rows
		), done AS (
			DELETE FROM list_purge p USING l WHERE p.list_id = l.list_id AND l.next_row + $1 > l.rows
			RETURNING 1
		)
		SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM done)`, batch).Scan(&rows, &lists)
	return rows, lists, translate(err)
}

// provenanceReferences is the condition that something still refers to
// provenance row p: every column that holds a provenance id (each has a
// foreign key to provenance and an index).
const provenanceReferences = `(
	EXISTS (SELECT FROM result r WHERE r.provenance_id = p.id)
	OR EXISTS (SELECT FROM override o WHERE o.provenance_id = p.id)
	OR EXISTS (SELECT FROM list_row lr WHERE lr.provenance_id = p.id)
	OR EXISTS (SELECT FROM classify_job_domain d WHERE d.provenance_id = p.id)
	OR EXISTS (SELECT FROM review_item ri WHERE ri.provenance_id = p.id)
	OR EXISTS (SELECT FROM review_item ri WHERE ri.override_provenance_id = p.id)
	OR EXISTS (SELECT FROM review_item ri WHERE ri.previous_provenance_id = p.id))`

// provenancePurgeAttempts bounds the retries of a provenance batch that a
// writer raced (see ProvenancePurge).
const provenancePurgeAttempts = 3

// ProvenancePurge looks at at most batch candidates (provenance rows that
// lost a reference: ListRowsPurge, JobPurge, or a result or override that
// moved on), deletes those nothing refers to any more, and returns how many
// it deleted and how many candidates it looked at.
//
// A writer may be storing a reference to one of them right then (a cache
// hit copies a result's provenance id onto a new row after it read it).
// The checks on every reference decide (foreign keys; on list_row, two
// triggers that do what a key would, migration 00011): a write that comes
// first holds the provenance row's key share lock, so the delete waits for
// it, then fails the batch (the row was not yet visible when the batch
// looked), and the batch is looked at again, now keeping that row; a write
// that comes second waits for the batch and fails, and its job is retried.
// A set-based write (a list's answered rows: ListAnswerKnown) holds the
// schema's provenance lock instead, which the purge takes exclusively: one
// waits for the other.
// exec is the pool: each attempt is a transaction of its own.
func ProvenancePurge(ctx context.Context, exec DBTX, batch int) (deleted, checked int64, err error) {
	for attempt := 1; ; attempt++ {
		b := &pgx.Batch{}
		// One transaction: the lock, held until the deletes commit, keeps
		// the set-based writers (migration 00020) off meanwhile.
		b.Queue(`SELECT pg_advisory_xact_lock(` + provenanceLockKey + `)`)
		b.Queue(`
			WITH c AS (
				SELECT id FROM provenance_candidate ORDER BY id LIMIT $1
			), gone AS (
				DELETE FROM provenance p USING c WHERE p.id = c.id AND NOT `+provenanceReferences+`
				RETURNING 1
			), seen AS (
				DELETE FROM provenance_candidate pc USING c WHERE pc.id = c.id
				RETURNING 1
			)
			SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM seen)`, batch).QueryRow(func(row pgx.Row) error {
			return row.Scan(&deleted, &checked)
		})
		err = exec.SendBatch(ctx, b).Close()
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23503" && attempt < provenancePurgeAttempts {
			continue // a writer referred to one of them meanwhile: look again
		}
		return deleted, checked, translate(err)
	}
}
