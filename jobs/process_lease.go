package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/domainclass/domainclass/db"
)

// ProcessLease keeps a worker process's lease in Postgres, under the id
// its River client writes into each job it runs (river_job.attempted_by),
// and hands back the jobs of processes whose lease ran out: a process
// killed with SIGKILL, or cut off from Postgres, has its chunks and jobs
// running again within seconds, where River's own rescuer waits
// RescueStuckAfter (10 min) and the job's timeout.
//
// It renews on a connection of its own, not the pool's: list work may hold
// every pooled connection, and a process that cannot renew looks dead.
type ProcessLease struct {
	// ID is the River client's id (river.Config.ID).
	ID string
	// Connect opens the lease's connection (again after a failure).
	Connect  func(context.Context) (*pgx.Conn, error)
	Settings Settings
	Logger   *slog.Logger
	Metrics  *Metrics // nil: no metrics

	conn *pgx.Conn
	// healthy is since when renewals have succeeded without a miss: a
	// process judges others dead only once it has renewed for a whole TTL
	// itself, so that after a Postgres outage, when every lease lapsed, it
	// does not hand back the work of processes that are alive and about to
	// renew.
	healthy time.Time
	swept   time.Time
	lapsed  bool // the last renewal failed (logged once per outage)
}

// Run renews the lease every sixth of ProcessLeaseTTL and looks for dead
// processes every third, until ctx is done. Then it gives the lease up
// when clean (River stopped and handed its jobs back itself); otherwise
// the lease runs out and other processes hand the jobs back.
func (p *ProcessLease) Run(ctx context.Context, clean func() bool) {
	ttl := p.Settings.ProcessLeaseTTL
	tick := time.NewTicker(ttl / 6)
	defer tick.Stop()
	for {
		p.beat(ctx, ttl)
		select {
		case <-ctx.Done():
			p.stop(clean())
			return
		case <-tick.C:
		}
	}
}

// beat renews the lease, and looks for dead processes when it is time.
func (p *ProcessLease) beat(ctx context.Context, ttl time.Duration) {
	now := time.Now()
	if err := p.renew(ctx, ttl); err != nil {
		if ctx.Err() == nil && !p.lapsed {
			p.Logger.WarnContext(ctx, "error renewing the worker process's lease", "process", p.ID, "error", err)
		}
		p.lapsed, p.healthy = true, time.Time{}
		p.close()
		return
	}
	if p.lapsed {
		p.Logger.InfoContext(ctx, "worker process lease renewed again", "process", p.ID)
		p.lapsed = false
	}
	if p.healthy.IsZero() {
		p.healthy = now
	}
	if now.Sub(p.healthy) < ttl || now.Sub(p.swept) < ttl/3 {
		return
	}
	p.swept = now
	if err := p.rescue(ctx); err != nil && ctx.Err() == nil {
		p.Logger.WarnContext(ctx, "error handing back the work of dead worker processes", "error", err)
		p.close()
	}
}

// renew renews the lease on the lease's own connection, opened as needed.
func (p *ProcessLease) renew(ctx context.Context, ttl time.Duration) error {
	rctx, cancel := context.WithTimeout(ctx, ttl/3)
	defer cancel()
	if p.conn == nil {
		conn, err := p.Connect(rctx)
		if err != nil {
			return err
		}
		p.conn = conn
	}
	lapsed, rescued, err := db.ProcessRenew(rctx, p.conn, p.ID, ttl)
	if err != nil {
		return err
	}
	if rescued {
		// Alive, but silent long enough that others took its jobs: those
		// it still runs may run twice (an answer is stored once; a call in
		// flight may be paid twice).
		p.Logger.ErrorContext(ctx, "this worker process's lease ran out and its running jobs were handed to other processes",
			"process", p.ID, "lease_ttl", ttl.String())
	} else if lapsed {
		p.Logger.WarnContext(ctx, "this worker process's lease had run out; renewed before anyone handed its jobs back", "process", p.ID)
	}
	return nil
}

// rescue hands back the jobs of dead processes and notes, on their lists,
// why their work paused.
func (p *ProcessLease) rescue(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, p.Settings.ProcessLeaseTTL)
	defer cancel()
	dead, err := db.ProcessRescue(rctx, p.conn)
	if err != nil {
		return err
	}
	for _, d := range dead {
		n := 0
		kinds := make([]string, 0, len(d.Jobs))
		for kind, k := range d.Jobs {
			n += k
			kinds = append(kinds, fmt.Sprintf("%s=%d", kind, k))
		}
		p.Logger.WarnContext(ctx, "a worker process stopped renewing its lease; its running jobs were handed back",
			"dead_process", d.ID, "lease_expired_at", d.ExpiredAt.UTC().Format(time.RFC3339), "jobs", n, "kinds", strings.Join(kinds, ","))
		p.Metrics.ProcessRescued(n)
		if len(d.Lists) == 0 {
			continue
		}
		ids := make([]uuid.UUID, 0, len(d.Lists))
		for _, s := range d.Lists {
			if id, err := uuid.Parse(s); err == nil {
				ids = append(ids, id)
			}
		}
		note := fmt.Sprintf("a worker process stopped at %s; its work on this list was handed to the other worker processes at %s",
			d.ExpiredAt.Add(-p.Settings.ProcessLeaseTTL).UTC().Format(time.RFC3339), time.Now().UTC().Format(time.RFC3339))
		if err := db.ListNote(rctx, p.conn, ids, note, ""); err != nil {
			return err
		}
	}
	return nil
}

// stop gives the lease up when clean, and closes the connection.
func (p *ProcessLease) stop(clean bool) {
	defer p.close()
	if !clean || p.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.Settings.ProcessLeaseTTL)
	defer cancel()
	if err := db.ProcessStop(ctx, p.conn, p.ID); err != nil && !errors.Is(err, context.Canceled) {
		p.Logger.Warn("error giving the worker process's lease up; it runs out on its own", "process", p.ID, "error", err)
	}
}

func (p *ProcessLease) close() {
	if p.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = p.conn.Close(ctx)
		cancel()
		p.conn = nil
	}
}
