package db

import (
	"context"
	"time"
)

// QueueStat is the number of River jobs of one queue in one state, and the
// age of the oldest of them that is due and waiting for a worker (available,
// or scheduled/retryable past its time and not yet promoted by River).
type QueueStat struct {
	Queue            string
	State            string
	Count            int64
	OldestDueSeconds float64
}

// QueueStats counts River jobs by queue and state in one query. It reads the
// (state, queue, …) fetch index River keeps, so it stays cheap as the table
// grows with retention.
func (db *DB) QueueStats(ctx context.Context) ([]QueueStat, error) {
	rows, err := db.Pool.Query(ctx, `
		SELECT queue, state::text, count(*),
		       coalesce(extract(epoch FROM now() - min(scheduled_at) FILTER (
		           WHERE scheduled_at <= now() AND state IN ('available', 'scheduled', 'retryable'))), 0)
		FROM river_job
		GROUP BY queue, state`)
	if err != nil {
		return nil, translate(err)
	}
	defer rows.Close()
	var out []QueueStat
	for rows.Next() {
		var s QueueStat
		if err := rows.Scan(&s.Queue, &s.State, &s.Count, &s.OldestDueSeconds); err != nil {
			return nil, translate(err)
		}
		out = append(out, s)
	}
	return out, translate(rows.Err())
}

// QueueStatsTimeout bounds the query, so a slow database never hangs a scrape.
const QueueStatsTimeout = 2 * time.Second
