// Package db owns Postgres: the pool, migrations (River's and ours), every
// query of the application, and the translation of driver errors into
// classifier.Error codes.
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

	"github.com/domainclass/domainclass/classifier"
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
	// ConnectTimeout bounds a new connection, so that requests fail fast
	// (503) while Postgres is down instead of hanging.
	ConnectTimeout time.Duration
	// ApplicationName shows in pg_stat_activity.
	ApplicationName string
	// Tracer, when set, sees every query (tests and benchmarks count them).
	Tracer pgx.QueryTracer
	// ForceCustomPlans plans every execution for its actual values. Worker
	// pools want it: a generic plan that River's fetch query cached while
	// river_job was nearly empty can keep scanning the whole table once it is
	// large (notes/river.md). The API does not: replanning its insert CTEs on
	// every accept cost a third of its throughput (docs/BENCHMARKS.md).
	ForceCustomPlans bool
}

// WithDefaults returns the config with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.MaxConns <= 0 {
		c.MaxConns = 20
	}
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = time.Second
	}
	if c.ApplicationName == "" {
		c.ApplicationName = "domainclass"
	}
	return c
}

// DB is the application's handle on Postgres.
type DB struct {
	Pool   *pgxpool.Pool
	Schema string
}

// Open connects a pool. It does not wait for Postgres to be up: the first
// query does, and fails with EUNAVAILABLE while it is not.
func Open(ctx context.Context, cfg Config) (*DB, error) {
	cfg = cfg.WithDefaults()
	pcfg, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("invalid DATABASE_URL: %w", redactParseError(err))
	}
	pcfg.MaxConns = cfg.MaxConns
	pcfg.ConnConfig.ConnectTimeout = cfg.ConnectTimeout
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

// Ping reports whether Postgres answers, as an EUNAVAILABLE error if not.
func (db *DB) Ping(ctx context.Context) error {
	return translate(db.Pool.Ping(ctx))
}

// WithTx runs fn in a transaction and commits when it returns nil. Any error
// rolls everything back, River's inserts included.
func (db *DB) WithTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		return translate(err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := fn(tx); err != nil {
		return translate(err)
	}
	return translate(tx.Commit(ctx))
}

// ErrUnavailable is the message callers see while Postgres is unreachable.
const ErrUnavailable = "The database is unavailable; try again shortly."

// translate maps driver errors to classifier.Error codes, in one place:
// no rows → ENOTFOUND, unique violation → ECONFLICT, an unreachable or
// restarting server → EUNAVAILABLE. Errors that already carry a code and
// anything else pass through unchanged.
func translate(err error) error {
	var appErr *classifier.Error
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &appErr):
		return err
	case errors.Is(err, pgx.ErrNoRows):
		return &classifier.Error{Code: classifier.ENOTFOUND, Message: "Not found.", Err: err}
	case errors.As(err, &pgErr):
		switch {
		case pgErr.Code == "23505":
			return &classifier.Error{Code: classifier.ECONFLICT, Message: "Already exists.", Err: err}
		case strings.HasPrefix(pgErr.Code, "08"), // connection exception
			pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03", // shutting down, starting up
			pgErr.Code == "53300": // too many connections
			return unavailable(err)
		}
		return err
	case Unreachable(err):
		return unavailable(err)
	}
	return err
}

// Unreachable reports whether err means Postgres could not be reached (as
// opposed to an error in a query).
func Unreachable(err error) bool {
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

func unavailable(err error) error {
	return &classifier.Error{Code: classifier.EUNAVAILABLE, Message: ErrUnavailable, Err: err}
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
