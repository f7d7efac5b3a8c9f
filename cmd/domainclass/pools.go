package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/domainclass/domainclass/cli"
	"github.com/domainclass/domainclass/db"
)

// A process has one pool per role it runs: `all` has two. One pool for
// both let list work take every connection while a million-row list
// drained, and the API answered 503 to 59 probes of 60 (issue 26): a
// request waited behind hundreds of workers' queries in the pool's queue.
// Apart, the API's requests only ever wait for each other, as they do in an
// `api` process beside `worker` processes.

// DefaultAPIDBMaxConns is the API's pool when neither API_DB_MAX_CONNS nor
// DB_MAX_CONNS is set. A request holds one connection for a few
// milliseconds (an accept is about 2–5 ms of database work), so 20 serve
// thousands of requests a second, more than one API process answers on a
// few cores; the few long holders (a list upload while it copies, a
// results download, River UI) fit beside them. And api + two workers
// (20 + 2 × 36) stay under a stock Postgres' max_connections of 100.
const DefaultAPIDBMaxConns = 20

// apiDBMaxConns is the size of the API's pool: API_DB_MAX_CONNS, else
// DB_MAX_CONNS, else DefaultAPIDBMaxConns.
func (c Config) apiDBMaxConns() int32 {
	return cmp.Or(c.APIDBMaxConns, c.DBMaxConns, DefaultAPIDBMaxConns)
}

// workerDBMaxConns is how many connections the workers hold in all:
// WORKER_DB_MAX_CONNS, else DB_MAX_CONNS, else a connection for each
// classify job that may run at once, 16 for list work (list work's own
// pool takes 4 of them by default, listDBMaxConns; the others serve jobs),
// and 10 for River's producers, maintenance, webhook deliveries and the
// purge. The sum is the figure docs/operating.md's max_connections
// arithmetic uses.
func (c Config) workerDBMaxConns() int32 {
	return cmp.Or(c.WorkerDBMaxConns, c.DBMaxConns, int32(c.Queue.ClassifyWorkers+min(c.Queue.ListWorkers, 16)+10))
}

// listDBMaxConns is the part of the workers' connections that list work
// (chunks and batches) may hold, in a pool of its own: LIST_DB_MAX_CONNS,
// else min(LIST_WORKERS, 4) and at most half of them. The rest
// (jobsDBMaxConns) serve classify jobs, River and webhooks. In one pool, a
// draining list's statements queued ahead of interactive jobs' (the `all`
// bench: 9,861 waits, 13 minutes in all, p95 of a 10-domain job 6× idle).
// Four, not 16: a list's statements are short, and four drained a list as
// fast as 16 in `all` at C=32 (146 against 144 rows/s) while 16 busy
// backends took the CPU the API's status polls needed (their p99 7–9 ms
// with four, 13–18 ms with 16; three runs each, docs/BENCHMARKS.md).
func (c Config) listDBMaxConns() int32 {
	if c.ListDBMaxConns > 0 {
		return c.ListDBMaxConns
	}
	return max(1, min(int32(min(c.Queue.ListWorkers, 4)), c.workerDBMaxConns()/2))
}

// jobsDBMaxConns is the workers' pool for everything but list work.
func (c Config) jobsDBMaxConns() int32 { return c.workerDBMaxConns() - c.listDBMaxConns() }

// validatePools refuses a negative pool size and a list pool that leaves
// the classify jobs and River fewer than 2 connections.
func (c Config) validatePools() error {
	if c.DBMaxConns < 0 || c.APIDBMaxConns < 0 || c.WorkerDBMaxConns < 0 || c.ListDBMaxConns < 0 {
		return errors.New("DB_MAX_CONNS, API_DB_MAX_CONNS, WORKER_DB_MAX_CONNS and LIST_DB_MAX_CONNS must not be negative (0 is the default)")
	}
	if c.jobsDBMaxConns() < 2 {
		return fmt.Errorf("LIST_DB_MAX_CONNS (%d) must leave at least 2 of the workers' %d connections (WORKER_DB_MAX_CONNS) to classify jobs and River",
			c.listDBMaxConns(), c.workerDBMaxConns())
	}
	return nil
}

// openPools opens the pools of the role: the API's (api, all) as m.DB, the
// workers' (worker, all) as m.WorkerDB and their list work's as m.ListDB;
// in worker, m.DB is m.WorkerDB. They show in pg_stat_activity as
// domainclass-api, domainclass-worker and domainclass-lists.
func (m *Main) openPools(ctx context.Context, tracer pgx.QueryTracer) (err error) {
	cfg := m.Config
	open := func(name string, maxConns int32) (*db.DB, error) {
		return db.Open(ctx, db.Config{URL: cfg.DatabaseURL, Schema: cfg.DatabaseSchema, MaxConns: maxConns,
			ApplicationName: "domainclass-" + name, ForceCustomPlans: name != cli.RoleAPI, Tracer: tracer})
	}
	if m.runsWorker() {
		if m.WorkerDB, err = open(cli.RoleWorker, cfg.jobsDBMaxConns()); err != nil {
			return err
		}
		if m.ListDB, err = open("lists", cfg.listDBMaxConns()); err != nil {
			return err
		}
	}
	if !m.runsAPI() {
		m.DB = m.WorkerDB
		return nil
	}
	m.DB, err = open(cli.RoleAPI, cfg.apiDBMaxConns())
	return err
}

// pools are the process's pools by name, for their metrics.
func (m *Main) pools() map[string]*pgxpool.Pool {
	pools := map[string]*pgxpool.Pool{}
	if m.runsAPI() {
		pools[cli.RoleAPI] = m.DB.Pool
	}
	if m.runsWorker() {
		pools[cli.RoleWorker], pools["lists"] = m.WorkerDB.Pool, m.ListDB.Pool
	}
	return pools
}
