package db

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// Load is what a list's estimate needs to know of the deployment's recent
// work and of the work waiting: the model answers it stored while at least
// one list was running in a recent window, and for how long lists ran with
// the model answering (while none runs, the model waits for work and its
// answers say nothing of what it can do; while one runs and no answer
// comes, the model is down or the list is stalled, and that time says
// nothing of it either); the rows recent lists answered without the model
// and in how long (RowsSeconds: their time from start to end); and the
// lists not yet ended, with what they have left.
type Load struct {
	ModelAnswers int
	BusySeconds  float64
	RowsAnswered int
	RowsSeconds  float64
	Others       []ListLeft
}

// ListLeft is what a list not yet ended has left: rows, and of them, about
// how many need the model (from the share of its answered rows the model
// answered, once it has answered enough; before, from its distinct domains).
type ListLeft struct {
	Rows      float64
	ModelRows float64
}

// LoadRecent reads Load over the window before now, in steps of bucket: a
// step counts when a standard list was running through all of it and the
// model answered in it. The rows answered without the model are those of
// the standard lists that ended COMPLETED within rowsWindow with no model
// answer, no retry and at least minRows rows.
func LoadRecent(ctx context.Context, exec DBTX, window, bucket, rowsWindow time.Duration, minRows int) (Load, error) {
	var l Load
	var buckets int
	err := exec.QueryRow(ctx, `
		WITH ran AS (
			SELECT started_at, coalesce(completed_at, 'infinity') AS ended_at FROM list
			WHERE tier = 'standard' AND started_at IS NOT NULL
			  AND (completed_at IS NULL OR completed_at > now() - make_interval(secs => $1))
		), busy AS (
			SELECT t FROM generate_series(now() - make_interval(secs => $1), now() - make_interval(secs => $2),
			                              make_interval(secs => $2)) t
			WHERE EXISTS (SELECT FROM ran WHERE started_at <= t AND ended_at >= t + make_interval(secs => $2))
		), answered AS (
			SELECT busy.t, count(*) AS n FROM busy JOIN result r
			  ON r.classified_at >= busy.t AND r.classified_at < busy.t + make_interval(secs => $2)
			WHERE r.latency_ms IS NOT NULL AND r.batch_id IS NULL
			GROUP BY busy.t
		), unmodelled AS (
			SELECT done - rejected AS rows, extract(epoch FROM completed_at - started_at) AS seconds FROM list
			WHERE tier = 'standard' AND status = 'COMPLETED' AND llm = 0 AND retries = 0
			  AND completed_at > now() - make_interval(secs => $3) AND done - rejected >= $4
		)
		SELECT (SELECT count(*) FROM answered)::int, (SELECT coalesce(sum(n), 0) FROM answered)::int,
		       (SELECT coalesce(sum(rows), 0) FROM unmodelled)::int, (SELECT coalesce(sum(seconds), 0) FROM unmodelled)::float8`,
		window.Seconds(), bucket.Seconds(), rowsWindow.Seconds(), minRows).Scan(&buckets, &l.ModelAnswers, &l.RowsAnswered, &l.RowsSeconds)
	if err != nil {
		return l, translate(err)
	}
	l.BusySeconds = float64(buckets) * bucket.Seconds()
	rows, err := exec.Query(ctx, `
		SELECT (rows - done)::float8,
		       CASE WHEN completed + failed >= 100 THEN (rows - done)::float8 * llm / (completed + failed)
		            ELSE (rows - done)::float8 * domains / greatest(rows - rejected, 1) END
		FROM list
		WHERE status IN ('PENDING', 'RUNNING') AND tier = 'standard' AND rows > done`)
	l.Others, err = collect(rows, err, pgx.RowToStructByPos[ListLeft])
	return l, err
}
