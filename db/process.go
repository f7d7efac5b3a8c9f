package db

import (
	"context"
	"time"
)

// ProcessRenew renews worker process id's lease until ttl from now (made
// on first use). lapsed reports that the lease had run out before this
// renewal, and rescued that other processes handed its running jobs back
// meanwhile (ProcessRescue): they may now run twice.
func ProcessRenew(ctx context.Context, exec DBTX, id string, ttl time.Duration) (lapsed, rescued bool, err error) {
	err = exec.QueryRow(ctx, `
		WITH old AS (SELECT expires_at, rescued_at FROM worker_process WHERE id = $1)
		INSERT INTO worker_process (id, expires_at) VALUES ($1, now() + make_interval(secs => $2))
		ON CONFLICT (id) DO UPDATE SET renewed_at = now(), expires_at = excluded.expires_at, rescued_at = NULL
		RETURNING coalesce((SELECT expires_at < now() FROM old), false), coalesce((SELECT rescued_at IS NOT NULL FROM old), false)`,
		id, ttl.Seconds()).Scan(&lapsed, &rescued)
	return lapsed, rescued, translate(err)
}

// ProcessStop gives worker process id's lease up: a process that stops
// cleanly has handed its jobs back to River itself.
func ProcessStop(ctx context.Context, exec DBTX, id string) error {
	_, err := exec.Exec(ctx, `DELETE FROM worker_process WHERE id = $1`, id)
	return translate(err)
}

// ProcessesAlive counts the worker processes whose lease is live.
func ProcessesAlive(ctx context.Context, exec DBTX) (int, error) {
	var n int
	err := exec.QueryRow(ctx, `SELECT count(*) FROM worker_process WHERE expires_at > now()`).Scan(&n)
	return n, translate(err)
}

// DeadProcess is a worker process whose lease ran out, and what
// ProcessRescue handed back of its work.
type DeadProcess struct {
	ID        string
	ExpiredAt time.Time
	// Jobs are the River jobs it was running, by kind; Lists the lists
	// whose chunks or batches were among them.
	Jobs  map[string]int
	Lists []string
}
