package db

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/domainclass/domainclass/classifier"
)

// ListInsert writes a list whose rows were copied in the same transaction.
// Its rejected rows are final from the start, and so are the l.Completed
// rows answered at the upload (ListRowsAccept), counted as l.Override and
// l.Cache say. A list without a Retention is refused: it would never be
// purged.
func ListInsert(ctx context.Context, exec DBTX, l *classifier.List, nextChunk int) error {
	if l.Retention <= 0 {
		return fmt.Errorf("list %s has no retention", l.ID)
	}
	_, err := exec.Exec(ctx, `
		INSERT INTO list (id, caller, classifier, callback_url, rows, domains, duplicates, rejected,
		                  chunk_rows, chunks, next_chunk, done, tier, want_max_age, want_since, retention,
		                  completed, override, cache)
		VALUES ($1, $2, $3, NULLIF($4, ''), $5, $6, $7, $8, $9, $10, $11, $8 + $16::int, $12, $13, $14, $15, $16, $17, $18)`,
		l.ID, l.Caller, l.Classifier, l.CallbackURL, l.Rows, l.Domains, l.Duplicates, l.Rejected,
		l.ChunkRows, l.Chunks, nextChunk, cmp.Or(l.Tier, classifier.TierStandard), maxAgeOrNil(l.Want), sinceOrNil(l.Want),
		l.Retention, l.Completed, l.Override, l.Cache)
	return translate(err)
}

// ListActiveLock takes caller's list lock for the rest of tx, so that
// counting its active lists and adding one is exact under concurrent
// uploads.
func ListActiveLock(ctx context.Context, tx DBTX, caller string) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('lists:' || current_schema() || ':' || $1, 0))`, caller)
	return translate(err)
}

// ListActiveCount counts caller's lists not yet ended.
func ListActiveCount(ctx context.Context, exec DBTX, caller string) (int, error) {
	var n int
	err := exec.QueryRow(ctx, `SELECT count(*) FROM list WHERE caller = $1 AND status IN ('PENDING', 'RUNNING')`, caller).Scan(&n)
	return n, translate(err)
}

const listColumns = `id, caller, classifier, status, coalesce(error, ''), coalesce(callback_url, ''),
	rows, domains, duplicates, rejected, chunk_rows, chunks, done, completed, failed, override, known, cache, llm,
	tier, cost_usd, created_at, started_at, completed_at, coalesce(want_max_age, '0'), want_since, retention, retries,
	coalesce(waiting, ''), waiting_since, coalesce(last_error, ''), last_error_at, run_errors`

// scanList scans listColumns, then extra.
func scanList(row pgx.Row, extra ...any) (*classifier.List, error) {
	l := new(classifier.List)
	var wantSince *time.Time
	err := row.Scan(append([]any{&l.ID, &l.Caller, &l.Classifier, &l.Status, &l.Error, &l.CallbackURL,
		&l.Rows, &l.Domains, &l.Duplicates, &l.Rejected, &l.ChunkRows, &l.Chunks, &l.Done, &l.Completed, &l.Failed,
		&l.Override, &l.Known, &l.Cache, &l.LLM, &l.Tier, &l.CostUSD, &l.CreatedAt, &l.StartedAt, &l.CompletedAt, &l.Want.MaxAge, &wantSince,
		&l.Retention, &l.Retries, &l.Waiting, &l.WaitingSince, &l.LastError, &l.LastErrorAt, &l.RunErrors}, extra...)...)
	if err != nil {
		return nil, translate(err)
	}
	l.Want.Since = deref(wantSince)
	return l, nil
}

// ListGet returns list id, or ErrNotFound.
func ListGet(ctx context.Context, exec DBTX, id uuid.UUID) (*classifier.List, error) {
	return scanList(exec.QueryRow(ctx, `SELECT `+listColumns+` FROM list WHERE id = $1`, id))
}

// ListGetOfCaller returns caller's list id; another caller's list is
// ErrNotFound, as is an unknown id.
// A list that runs while no worker process is alive says so in Waiting.
func ListGetOfCaller(ctx context.Context, exec DBTX, id uuid.UUID, caller string) (*classifier.List, error) {
	var noWorker bool
	l, err := scanList(exec.QueryRow(ctx, `
		SELECT `+listColumns+`, status IN ('PENDING', 'RUNNING') AND NOT EXISTS (SELECT FROM worker_process WHERE expires_at > now())
		FROM list WHERE id = $1 AND caller = $2`, id, caller), &noWorker)
	if err == nil && noWorker {
		l.Waiting, l.WaitingSince = NoWorkerWaiting, nil
	}
	return l, err
}

// NoWorkerWaiting is what a running list waits for while no worker process
// renews its lease.
const NoWorkerWaiting = "no worker process is running: its work waits for one (`domainclass worker`)"

// ListNote records what the lists ids wait for while they run (waiting;
// its time is kept while it stays the same) and, when lastError is set,
// the last failure of their work, counted in run_errors. Ended lists are
// left as they are.
func ListNote(ctx context.Context, exec DBTX, ids []uuid.UUID, waiting, lastError string) error {
	_, err := exec.Exec(ctx, `
		UPDATE list SET waiting = $2,
		       waiting_since = CASE WHEN waiting IS DISTINCT FROM $2 THEN now() ELSE waiting_since END,
		       last_error = coalesce(NULLIF($3, ''), last_error),
		       last_error_at = CASE WHEN $3 <> '' THEN now() ELSE last_error_at END,
		       run_errors = run_errors + CASE WHEN $3 <> '' THEN 1 ELSE 0 END
		WHERE id = ANY($1) AND status IN ('PENDING', 'RUNNING')`, ids, waiting, lastError)
	return translate(err)
}

// ListNoteClear says list id waits for nothing: its work made progress.
// It writes nothing when there was no note.
func ListNoteClear(ctx context.Context, exec DBTX, id uuid.UUID) error {
	_, err := exec.Exec(ctx, `UPDATE list SET waiting = NULL, waiting_since = NULL WHERE id = $1 AND waiting IS NOT NULL`, id)
	return translate(err)
}

// ListStart marks list id RUNNING when it is PENDING and returns it.
func ListStart(ctx context.Context, exec DBTX, id uuid.UUID) (*classifier.List, error) {
	return scanList(exec.QueryRow(ctx, `
		WITH started AS (
			UPDATE list SET status = 'RUNNING', started_at = now() WHERE id = $1 AND status = 'PENDING'
			RETURNING `+listColumns+`
		)
		SELECT * FROM started UNION ALL SELECT `+listColumns+` FROM list WHERE id = $1 AND NOT EXISTS (SELECT FROM started)`, id))
}

// ListPending returns the rows from..to of a list that still need an
// answer: each domain's first row, PENDING, in row order.
func ListPending(ctx context.Context, exec DBTX, listID uuid.UUID, from, to int) ([]classifier.ListRow, error) {
	rows, err := exec.Query(ctx, `
		SELECT row, domain FROM list_row
		WHERE list_id = $1 AND row BETWEEN $2 AND $3 AND status = 'PENDING' AND first_row IS NULL
		ORDER BY row`, listID, from, to)
	return collect(rows, err, func(row pgx.CollectableRow) (classifier.ListRow, error) {
		var r classifier.ListRow
		err := row.Scan(&r.Row, &r.Result.Domain)
		r.Result.Status = classifier.StatusPending
		return r, err
	})
}

// ListRowFinish stores the answer of a list's row and of every later row
// with the same domain, counts them in the list's progress, and, for an
// answer from the model, upserts the shared result; owner's claim is
// released: ListRowsFinish's one statement, for a set of one. It returns
// how many rows became final; a row already final keeps its first answer
// (a redelivered chunk).
func ListRowFinish(ctx context.Context, exec DBTX, listID uuid.UUID, row int, r classifier.Result, owner string) (int, error) {
	return ListRowsFinish(ctx, exec, listID, []RowAnswer{{Row: row, Result: r}}, owner)
}

// ListRowsFail fails every row from..to of a list that is not final yet
// (and the later duplicates of those rows), with reason, and counts them.
// It returns how many rows it failed. A duplicate whose first row is already
// final is final too, so the duplicates are found by the range of their
// first rows, an index condition whatever list_row's statistics say (see
// ListRowsFinish).
func ListRowsFail(ctx context.Context, exec DBTX, listID uuid.UUID, from, to int, reason string) (int, error) {
	var n int
	err := exec.QueryRow(ctx, `
		WITH firsts AS (
			UPDATE list_row SET status = 'FAILED', error = $4, classified_at = now()
			WHERE list_id = $1 AND row BETWEEN $2 AND $3 AND first_row IS NULL AND status = 'PENDING'
			RETURNING 1
		), dups AS (
			UPDATE list_row SET status = 'FAILED', error = $4, classified_at = now()
			WHERE list_id = $1 AND first_row BETWEEN $2 AND $3 AND status = 'PENDING'
			RETURNING 1
		), n AS (SELECT (SELECT count(*) FROM firsts)::int + (SELECT count(*) FROM dups)::int AS n)
		UPDATE list SET done = done + n.n, failed = failed + n.n FROM n WHERE list.id = $1
		RETURNING n.n`, listID, from, to, reason).Scan(&n)
	return n, translate(err)
}

// NextChunk is a chunk of a list to queue, and the pass it belongs to
// (the list's retries).
type NextChunk struct {
	Chunk, Pass int
}

// ListNextChunk takes the next chunk of a running list to queue: the first
// from next_chunk on that has rows to answer (a chunk of duplicates and
// rejected rows, or one a retry has nothing for, is skipped), if next_chunk
// is at most upTo. It reports false when it is not, when no chunk is left
// with rows to answer, or when the list has ended.
func ListNextChunk(ctx context.Context, exec DBTX, id uuid.UUID, upTo int) (NextChunk, bool, error) {
	var next NextChunk
	err := exec.QueryRow(ctx, `
		WITH l AS (
			SELECT id, next_chunk, chunk_rows, retries FROM list
			WHERE id = $1 AND next_chunk <= $2 AND next_chunk < chunks AND status IN ('PENDING', 'RUNNING')
			FOR UPDATE
		), todo AS (
			SELECT (SELECT r.row FROM list_row r
			        WHERE r.list_id = l.id AND r.row > l.next_chunk * l.chunk_rows
			          AND r.status = 'PENDING' AND r.first_row IS NULL
			        ORDER BY r.row LIMIT 1) AS row
			FROM l
		)
		UPDATE list SET next_chunk = CASE WHEN todo.row IS NULL THEN list.chunks ELSE (todo.row - 1) / l.chunk_rows + 1 END
		FROM l, todo WHERE list.id = l.id
		RETURNING coalesce((todo.row - 1) / l.chunk_rows, -1), l.retries`, id, upTo).Scan(&next.Chunk, &next.Pass)
	if err = translate(err); isNotFound(err) {
		return NextChunk{}, false, nil
	} else if err != nil {
		return NextChunk{}, false, err
	}
	return next, next.Chunk >= 0, nil
}

// ListEnd is how a list ended, as the statement that ended it wrote it.
type ListEnd struct {
	Status      classifier.Status
	CompletedAt time.Time
	CallbackURL string
}

// ListComplete marks list id COMPLETED if every row is final. ended is
// false when it is not, or when the list had already ended.
func ListComplete(ctx context.Context, exec DBTX, id uuid.UUID) (ListEnd, bool, error) {
	return listEnd(ctx, exec, `
		UPDATE list SET status = 'COMPLETED', completed_at = now()
		WHERE id = $1 AND status IN ('PENDING', 'RUNNING') AND done = rows
		RETURNING status, completed_at, coalesce(callback_url, '')`, id)
}

// ListFail gives list id up with reason. ended is false when it had already
// ended.
func ListFail(ctx context.Context, exec DBTX, id uuid.UUID, reason string) (ListEnd, bool, error) {
	return listEnd(ctx, exec, `
		UPDATE list SET status = 'FAILED', error = $2, completed_at = now()
		WHERE id = $1 AND status IN ('PENDING', 'RUNNING')
		RETURNING status, completed_at, coalesce(callback_url, '')`, id, reason)
}

// ListCancel cancels caller's list id in tx, a transaction: its rows not
// final are reported CANCELLED from now on. It first waits for the model
// calls of the list that are starting (ListGate), and orders itself after
// them: once tx commits, no call of the list starts. ended is false when
// the list had already ended.
func ListCancel(ctx context.Context, tx DBTX, id uuid.UUID, caller string) (ListEnd, bool, error) {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(`+listGateKey+`)`, id); err != nil {
		return ListEnd{}, false, translate(err)
	}
	return listEnd(ctx, tx, `
		UPDATE list SET status = 'CANCELLED', completed_at = now()
		WHERE id = $1 AND caller = $2 AND status IN ('PENDING', 'RUNNING')
		RETURNING status, completed_at, coalesce(callback_url, '')`, id, caller)
}

// listGateKey is the advisory lock between a list's starting model calls
// (shared) and its cancel (exclusive). An advisory lock, not a row lock:
// share row locks would write the list's row (and MultiXacts) with every
// call, and slow down the reads of its status.
const listGateKey = `hashtextextended('list-gate:' || current_schema() || ':' || $1::text, 0)`

func listEnd(ctx context.Context, exec DBTX, sql string, args ...any) (ListEnd, bool, error) {
	var end ListEnd
	err := exec.QueryRow(ctx, sql, args...).Scan(&end.Status, &end.CompletedAt, &end.CallbackURL)
	switch err = translate(err); {
	case err == nil:
		return end, true, nil
	case isNotFound(err):
		return ListEnd{}, false, nil
	}
	return ListEnd{}, false, err
}

// ErrListEnded is ListGate's refusal: the list was cancelled or has ended.
var ErrListEnded = errors.New("the list has ended")

// ListGate is asked in tx, a transaction of its own, right before a model
// call of list id starts. It takes the list's gate lock, shared, until tx
// ends (the caller ends tx once the call's request has been sent), then
// reads the list's status: ErrListEnded when it has ended. ListCancel takes
// the lock exclusively, so a call either starts before the cancel commits,
// or waits for it and is refused.
func ListGate(ctx context.Context, tx DBTX, id uuid.UUID) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock_shared(`+listGateKey+`)`, id); err != nil {
		return translate(err)
	}
	// A statement of its own, so its snapshot is taken after the lock.
	var status classifier.Status
	if err := tx.QueryRow(ctx, `SELECT status FROM list WHERE id = $1`, id).Scan(&status); err != nil {
		return translate(err)
	}
	if status != classifier.StatusPending && status != classifier.StatusRunning {
		return fmt.Errorf("%w (%s)", ErrListEnded, status)
	}
	return nil
}

// ListExists reports whether list id is still there. A purge takes the
// list off before any of its rows (ListPurge, then ListRowsPurge), so a
// download that finds its list there after its last page read every row.
func ListExists(ctx context.Context, exec DBTX, id uuid.UUID) (bool, error) {
	var ok bool
	err := exec.QueryRow(ctx, `SELECT EXISTS (SELECT FROM list WHERE id = $1)`, id).Scan(&ok)
	return ok, translate(err)
}
