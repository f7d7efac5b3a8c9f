package db

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/domainclass/domainclass/classifier"
)

// The queries by which a list survives a bad hour (issue 27): a chunk that
// gives up fails its own rows, each with its reason; the list sweep finds
// the rows a lost chunk left behind; a retry queues the failed rows again.

// ListRowsFailEach fails rows of a list that are not final yet (and the
// later duplicates of those rows), each with its own reason, and counts
// them; it returns how many rows it failed. rows and reasons pair up.
func ListRowsFailEach(ctx context.Context, exec DBTX, listID uuid.UUID, rows []int, reasons []string) (int, error) {
	if len(rows) == 0 {
		return 0, nil
	}
	var n int
	err := exec.QueryRow(ctx, `
		WITH f AS (
			SELECT * FROM unnest($2::int[], $3::text[]) AS f(row, reason)
		), firsts AS (
			UPDATE list_row r SET status = 'FAILED', error = f.reason, classified_at = now()
			FROM f WHERE r.list_id = $1 AND r.row = f.row AND r.first_row IS NULL AND r.status = 'PENDING'
			RETURNING 1
		), dups AS (
			UPDATE list_row r SET status = 'FAILED', error = f.reason, classified_at = now()
			FROM f WHERE r.list_id = $1 AND r.first_row = f.row AND r.status = 'PENDING'
			RETURNING 1
		), n AS (SELECT (SELECT count(*) FROM firsts)::int + (SELECT count(*) FROM dups)::int AS n)
		UPDATE list SET done = done + n.n, failed = failed + n.n FROM n WHERE list.id = $1
		RETURNING n.n`, listID, rows, reasons).Scan(&n)
	return n, translate(err)
}

// ListLock returns list id, with its row locked for the rest of tx, or
// ErrNotFound.
func ListLock(ctx context.Context, tx DBTX, id uuid.UUID) (*classifier.List, error) {
	return scanList(tx.QueryRow(ctx, `SELECT `+listColumns+` FROM list WHERE id = $1 FOR UPDATE`, id))
}

// ListOrphanChunks returns the chunks of list id already queued (below its
// next chunk) that still have rows to answer: when the list has no job
// left to run, nothing will answer them.
func ListOrphanChunks(ctx context.Context, exec DBTX, id uuid.UUID) ([]int, error) {
	rows, err := exec.Query(ctx, `
		SELECT DISTINCT (r.row - 1) / l.chunk_rows
		FROM list l JOIN list_row r ON r.list_id = l.id
		WHERE l.id = $1 AND r.row <= l.next_chunk * l.chunk_rows AND r.status = 'PENDING' AND r.first_row IS NULL
		ORDER BY 1`, id)
	return collect(rows, err, pgx.RowTo[int])
}

// ListRetried is what a retry did: the rows it queued again (FAILED ones
// made PENDING, and the PENDING ones of a list that had been given up) and
// the list's new pass.
type ListRetried struct {
	Rows int
	Pass int
}

// ListRetryRows makes list id's FAILED rows PENDING again, with nothing of
// their failed answer left (the trigger list_row_requeued clears it, so
// that the api's role may change a row's status and nothing else of it),
// and the list RUNNING again as a new pass whose chunks are fed from the
// first: its done and failed counters go down by the rows made PENDING. It runs in tx, on a list locked by ListLock that
// has ended COMPLETED or FAILED; PENDING rows of a list that was given up
// (FAILED) count as queued again too. Rows 0 means there was nothing to
// queue, and nothing was changed.
func ListRetryRows(ctx context.Context, tx DBTX, l *classifier.List) (ListRetried, error) {
	var r ListRetried
	// A failed answer's provenance (a refusal's, say) loses this reference:
	// it is named for the purge, as a result's is (migration 00011).
	err := tx.QueryRow(ctx, `
		WITH old AS (
			SELECT row, provenance_id FROM list_row WHERE list_id = $1 AND status = 'FAILED' FOR UPDATE
		), failed AS (
			UPDATE list_row r SET status = 'PENDING'
			FROM old WHERE r.list_id = $1 AND r.row = old.row
			RETURNING 1
		), released AS (
			INSERT INTO provenance_candidate (id)
			SELECT DISTINCT provenance_id FROM old WHERE provenance_id IS NOT NULL
			ON CONFLICT DO NOTHING
		), n AS (SELECT count(*)::int AS n FROM failed)
		UPDATE list SET status = 'RUNNING', error = NULL, completed_at = NULL, next_chunk = 0,
		       retries = retries + 1, done = done - n.n, failed = failed - n.n
		FROM n WHERE list.id = $1 AND n.n + (list.rows - list.done) > 0
		RETURNING list.rows - list.done, retries`, l.ID).Scan(&r.Rows, &r.Pass)
	if err = translate(err); isNotFound(err) {
		return ListRetried{}, nil
	}
	return r, err
}

// ListCursor is where a page of a caller's lists ends: the last list's
// creation and id.
type ListCursor struct {
	CreatedAt time.Time
	ID        uuid.UUID
}

// ListsOfCaller returns up to limit of caller's lists, newest first,
// created before after (from the start when nil).
func ListsOfCaller(ctx context.Context, exec DBTX, caller string, after *ListCursor, limit int) ([]*classifier.List, error) {
	var (
		at *time.Time
		id *uuid.UUID
	)
	if after != nil {
		at, id = &after.CreatedAt, &after.ID
	}
	rows, err := exec.Query(ctx, `
		SELECT `+listColumns+` FROM list
		WHERE caller = $1 AND ($2::timestamptz IS NULL OR (created_at, id) < ($2, $3))
		ORDER BY created_at DESC, id DESC
		LIMIT $4`, caller, at, id, limit)
	return collect(rows, err, func(row pgx.CollectableRow) (*classifier.List, error) { return scanList(row) })
}
