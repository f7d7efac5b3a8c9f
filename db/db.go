// Package db owns Postgres: the pool, migrations (River's and ours), every
// query of the application, and the translation of driver errors.
//
// Every query is a function that takes its executor (DBTX: the pool, or a
// transaction) as an argument, so one query runs alone or inside a
// transaction that its caller owns: the accept handler and the workers begin,
// write their steps in order (ours and River's) and commit.
package db

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Config configures the pool.
type Config struct {
	// URL is a libpq connection string or URL.
	URL string
	// Schema, when set, holds every table (River's too); the pool puts it
	// first on search_path. Tests give each test its own.
	Schema string
	// MaxConns bounds the pool. Each running job and each request in flight
	// holds at most one connection at a time.
	MaxConns int32
	// ConnectTimeout bounds a new connection when URL sets no
	// connect_timeout (nor PGCONNECT_TIMEOUT); zero is
	// DefaultConnectTimeout. Requests do not wait for it: each bounds its
	// own wait for a connection, and a connection still being made when
	// its request gave up joins the pool for the next one.
	ConnectTimeout time.Duration
	// ApplicationName shows in pg_stat_activity.
	ApplicationName string
	// Tracer, when set, sees every query (tests and benchmarks count them).
	Tracer pgx.QueryTracer
	// ForceCustomPlans plans every execution for its actual values. Worker
	// pools want it: a generic plan that River's fetch query cached while
	// river_job was nearly empty was seen to keep scanning the whole table
	// once it grew (3 of 7 benchmark runs stuck at 1–2k jobs/s; none with
	// custom plans). The API does not: replanning its insert CTEs on every
	// accept cost a third of its throughput (docs/BENCHMARKS.md).
	ForceCustomPlans bool
}

// DefaultConnectTimeout is how long a new connection may take to start
// when DATABASE_URL says nothing (its connect_timeout wins): a Postgres
// under load was seen to take 7.6 s (issue 27), and the 1 s that was here
// then failed every new connection for eleven minutes. Twice what was seen,
// so that a busy database is slow rather than down; a request never waits
// that long (it bounds its own wait and answers 503), only the connection
// being made does.
const DefaultConnectTimeout = 15 * time.Second

// WithDefaults returns the config with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.MaxConns <= 0 {
		c.MaxConns = 20
	}
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	if c.ApplicationName == "" {
		c.ApplicationName = "domainclass"
	}
	return c
}

// DB is the application's handle on Postgres: the pool and the schema it
// works in.
type DB struct {
	Pool   *pgxpool.Pool
	Schema string
}

// DBTX runs queries: the pool, or a transaction the caller owns. Both
// *pgxpool.Pool and pgx.Tx are one.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error)
}

// Open connects a pool. It does not wait for Postgres to be up: the first
// query does, and fails with ErrUnavailable while it is not.
func Open(ctx context.Context, cfg Config) (*DB, error) {
	cfg = cfg.WithDefaults()
	pcfg, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("invalid DATABASE_URL: %w", redactParseError(err))
	}
	pcfg.MaxConns = cfg.MaxConns
	if pcfg.ConnConfig.ConnectTimeout == 0 { // the URL's connect_timeout, when it has one (0 there is "none" too)
		pcfg.ConnConfig.ConnectTimeout = cfg.ConnectTimeout
	}
	if cfg.Tracer != nil {
		pcfg.ConnConfig.Tracer = cfg.Tracer
	}
	rp := pcfg.ConnConfig.RuntimeParams
	rp["application_name"] = cfg.ApplicationName
	if cfg.ForceCustomPlans {
		rp["plan_cache_mode"] = "force_custom_plan"
	}
	if cfg.Schema != "" {
		rp["search_path"] = pgx.Identifier{cfg.Schema}.Sanitize()
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("error creating pool: %w", err)
	}
	return &DB{Pool: pool, Schema: cfg.Schema}, nil
}

// Close closes the pool.
func (db *DB) Close() { db.Pool.Close() }

// Ping reports whether Postgres answers: ErrUnavailable if not.
func (db *DB) Ping(ctx context.Context) error {
	return translate(db.Pool.Ping(ctx))
}

// Beginner starts transactions: the pool, or a transaction (which then
// starts a savepoint).
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Executor runs queries and begins transactions: the pool, or a
// transaction (tests run a worker inside one; its transactions become
// savepoints). It is not safe for concurrent use when it is a transaction.
type Executor interface {
	DBTX
	Beginner
}

// Begin starts a transaction. The caller writes its steps in it, then calls
// Commit; a deferred Rollback ends it on every other path.
func Begin(ctx context.Context, b Beginner) (pgx.Tx, error) {
	tx, err := b.Begin(ctx)
	return tx, translate(err)
}

// Bounded is a pool as a request uses it: Begin and Acquire wait for a
// connection (all of them busy, or Postgres slow to start one) no longer
// than Wait, however long ctx then lets the work run on it: an upload or a
// download runs for minutes, but its wait for the pool is as short as any
// query's.
type Bounded struct {
	Pool *pgxpool.Pool
	Wait time.Duration
}

// Begin starts a transaction on a connection had within b.Wait, or returns
// ErrUnavailable. The transaction's statements run with their own contexts.
func (b Bounded) Begin(ctx context.Context) (pgx.Tx, error) {
	wctx, cancel := context.WithTimeout(ctx, b.Wait)
	defer cancel()
	tx, err := b.Pool.Begin(wctx)
	return tx, translate(err)
}

// Acquire returns a connection had within b.Wait, or ErrUnavailable. The
// caller releases it.
func (b Bounded) Acquire(ctx context.Context) (*pgxpool.Conn, error) {
	wctx, cancel := context.WithTimeout(ctx, b.Wait)
	defer cancel()
	conn, err := b.Pool.Acquire(wctx)
	return conn, translate(err)
}

// Commit commits tx.
func Commit(ctx context.Context, tx pgx.Tx) error {
	return translate(tx.Commit(ctx))
}

// rollbackTimeout bounds a rollback: it must run even when the caller's
// context is done (a request cancelled, a job timed out), and it must not
// hang on a dead server.
const rollbackTimeout = 5 * time.Second

// Rollback ends tx unless it was committed, with a context of its own, so
// that a cancelled request or job still gives its connection back at once.
// River's inserts in tx are rolled back with it.
func Rollback(ctx context.Context, tx pgx.Tx) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
	defer cancel()
	_ = tx.Rollback(rctx)
}

// The errors of every query, after translate. Compare with errors.Is; the
// driver's error stays in the chain.
var (
	// ErrNotFound: no such row.
	ErrNotFound = errors.New("not found")
	// ErrConflict: a unique constraint refused the write.
	ErrConflict = errors.New("already exists")
	// ErrUnavailable: Postgres could not be reached, is starting up or
	// shutting down, or did not answer in time (no connection free, a
	// deadline or a statement or lock timeout passed); try again shortly.
	ErrUnavailable = errors.New("the database is unavailable")
)

// Translate maps an error of a query run outside this package (River's
// client runs its own) as this package's queries are mapped: to
// ErrNotFound, ErrConflict or ErrUnavailable, or unchanged.
func Translate(err error) error { return translate(err) }

// translate maps driver errors to ErrNotFound, ErrConflict and
// ErrUnavailable, in one place. Anything else passes through unchanged.
func translate(err error) error {
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrConflict), errors.Is(err, ErrUnavailable):
		return err
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	case errors.As(err, &pgErr):
		switch {
		case pgErr.Code == "23505": // unique_violation
			return fmt.Errorf("%w: %w", ErrConflict, err)
		case strings.HasPrefix(pgErr.Code, "08"), // connection exception
			pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03", // shutting down, starting up
			pgErr.Code == "53300", // too many connections
			pgErr.Code == "57014", // query_canceled: statement_timeout, a deadline like ours
			pgErr.Code == "55P03": // lock_not_available: lock_timeout
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return err
	case unreachable(err):
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}

// unreachable reports whether err means Postgres could not be reached (as
// opposed to an error in a query).
func unreachable(err error) bool {
	var connErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connErr) ||
		errors.As(err, &netErr) ||
		errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		pgconn.Timeout(err) ||
		errors.Is(err, context.DeadlineExceeded) ||
		strings.Contains(err.Error(), "closed pool")
}

// redactParseError keeps a bad DATABASE_URL's password out of the message:
// pgx's parse errors can quote the whole string.
func redactParseError(err error) error {
	var pce *pgconn.ParseConfigError
	if errors.As(err, &pce) {
		return errors.New("cannot parse connection string")
	}
	return err
}

// collect reads every row with scan, translating errors.
func collect[T any](rows pgx.Rows, err error, scan pgx.RowToFunc[T]) ([]T, error) {
	if err != nil {
		return nil, translate(err)
	}
	out, err := pgx.CollectRows(rows, scan)
	return out, translate(err)
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func isNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
