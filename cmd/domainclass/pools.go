package main

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/domainclass/domainclass/cli"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/db/pools"
)

// poolSizes are the pools' sizes (db/pools) from DB_MAX_CONNS and the
// queues' workers.
func (c Config) poolSizes() pools.Sizes {
	return pools.Sizes{DBMaxConns: c.DBMaxConns, ClassifyWorkers: c.Queue.ClassifyWorkers, ListWorkers: c.Queue.ListWorkers}
}

// openPools opens the pools of the role: the API's (api, all) as m.DB, the
// workers' (worker, all) as m.WorkerDB and their list work's as m.ListDB;
// in worker, m.DB is m.WorkerDB. They show in pg_stat_activity as
// domainclass-api, domainclass-worker and domainclass-lists.
func (m *Main) openPools(ctx context.Context, tracer pgx.QueryTracer) (err error) {
	cfg, sizes := m.Config, m.Config.poolSizes()
	open := func(name string, maxConns int32) (*db.DB, error) {
		return db.Open(ctx, db.Config{URL: cfg.DatabaseURL, Schema: cfg.DatabaseSchema, MaxConns: maxConns,
			ApplicationName: "domainclass-" + name, ForceCustomPlans: name != cli.RoleAPI, Tracer: tracer})
	}
	if m.runsWorker() {
		if m.WorkerDB, err = open(cli.RoleWorker, sizes.Jobs()); err != nil {
			return err
		}
		if m.ListDB, err = open("lists", sizes.List()); err != nil {
			return err
		}
	}
	if !m.runsAPI() {
		m.DB = m.WorkerDB
		return nil
	}
	m.DB, err = open(cli.RoleAPI, sizes.API())
	return err
}

// poolsByName are the process's pools by name, for their metrics.
func (m *Main) poolsByName() map[string]*pgxpool.Pool {
	byName := map[string]*pgxpool.Pool{}
	if m.runsAPI() {
		byName[cli.RoleAPI] = m.DB.Pool
	}
	if m.runsWorker() {
		byName[cli.RoleWorker], byName["lists"] = m.WorkerDB.Pool, m.ListDB.Pool
	}
	return byName
}
