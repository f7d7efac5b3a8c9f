package main

import (
	"cmp"
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

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

// workerDBMaxConns is the size of the workers' pool: WORKER_DB_MAX_CONNS,
// else DB_MAX_CONNS, else a connection for each classify job that may run
// at once, 16 for list chunks (they mostly wait for model slots: 16 serve
// their writes however many run), and 10 for River's producers,
// maintenance, webhook deliveries and the purge.
func (c Config) workerDBMaxConns() int32 {
	return cmp.Or(c.WorkerDBMaxConns, c.DBMaxConns, int32(c.Queue.ClassifyWorkers+min(c.Queue.ListWorkers, 16)+10))
}

// validatePools refuses a negative pool size.
func (c Config) validatePools() error {
	if c.DBMaxConns < 0 || c.APIDBMaxConns < 0 || c.WorkerDBMaxConns < 0 {
		return errors.New("DB_MAX_CONNS, API_DB_MAX_CONNS and WORKER_DB_MAX_CONNS must not be negative (0 is the default)")
	}
	return nil
}

// openPools opens the pools of the role: the API's (api, all) as m.DB, the
// workers' (worker, all) as m.WorkerDB; in worker, m.DB is the workers'
// too. Each shows in pg_stat_activity as domainclass-api or
// domainclass-worker, whichever process it is in.
func (m *Main) openPools(ctx context.Context, tracer pgx.QueryTracer) (err error) {
	cfg := m.Config
	open := func(role string, maxConns int32) (*db.DB, error) {
		return db.Open(ctx, db.Config{URL: cfg.DatabaseURL, Schema: cfg.DatabaseSchema, MaxConns: maxConns,
			ApplicationName: "domainclass-" + role, ForceCustomPlans: role == RoleWorker, Tracer: tracer})
	}
	if m.runsWorker() {
		if m.WorkerDB, err = open(RoleWorker, cfg.workerDBMaxConns()); err != nil {
			return err
		}
	}
	if !m.runsAPI() {
		m.DB = m.WorkerDB
		return nil
	}
	m.DB, err = open(RoleAPI, cfg.apiDBMaxConns())
	return err
}
