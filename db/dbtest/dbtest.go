// Package dbtest gives tests real Postgres, fast: each test gets a
// migrated schema of its own (Schema, New) or a transaction that is rolled
// back when it ends (TestTx).
//
// Migrating a schema costs about 100 ms, more than most tests. So schemas
// are migrated once and reused: a test takes an idle one from this test
// binary's set, and gives it back emptied (TRUNCATE) when it ends. Schemas
// outlive the run, named after the test binary, and are reused by the next
// run when their migrations are still current (a fingerprint of River's and
// ours, kept as the schema's comment); a session advisory lock keeps two
// processes off one schema.
package dbtest

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/domainclass/domainclass/db"
)

// DefaultURL is the test database of the private cluster (`go tool task
// test` starts it).
const DefaultURL = "postgres://postgres@127.0.0.1:54329/domainclass_test?sslmode=disable"

// URL returns TEST_DATABASE_URL, or DefaultURL, with a connect_timeout of
// the tests' Patience unless it sets one: a Postgres on a busy machine was
// seen to take over 15 s to start a connection, and a test must not fail
// for it.
func URL() string {
	raw := cmp.Or(os.Getenv("TEST_DATABASE_URL"), DefaultURL)
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return raw // a key=value connection string: as it is
	}
	q := u.Query()
	if q.Get("connect_timeout") == "" {
		q.Set("connect_timeout", strconv.Itoa(int(Patience().Seconds())))
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// Schema returns a migrated, empty schema for this test alone. It fails the
// test, with a hint, when the test database is unreachable.
func Schema(tb testing.TB) string {
	tb.Helper()
	s, err := schemas.take()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { schemas.give(s, true) })
	return s
}

// New returns a DB on a migrated, empty schema of this test's own, closed
// when the test ends.
func New(tb testing.TB) *db.DB {
	tb.Helper()
	schema := Schema(tb)
	d, err := db.Open(context.Background(), db.Config{URL: URL(), Schema: schema, MaxConns: 10, ApplicationName: schema})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(d.Close)
	return d
}

// TestTx returns a transaction on a migrated, empty schema, rolled back when
// the test ends: for tests of queries, and of workers run inside a
// transaction (rivertest.Worker), which need no commit. Nothing is left to
// empty afterwards.
func TestTx(tb testing.TB) pgx.Tx {
	tb.Helper()
	ctx := context.Background()
	s, err := schemas.take()
	if err != nil {
		tb.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, URL())
	if err == nil {
		_, err = conn.Exec(ctx, "SET search_path TO "+pgx.Identifier{s}.Sanitize())
	}
	var tx pgx.Tx
	if err == nil {
		tx, err = conn.Begin(ctx)
	}
	if err != nil {
		schemas.give(s, false)
		tb.Fatalf("error beginning a test transaction: %v", err)
	}
	tb.Cleanup(func() {
		rolledBack := tx.Rollback(ctx) == nil
		_ = conn.Close(ctx)
		schemas.give(s, !rolledBack)
	})
	return tx
}

// schemaSet is this test binary's schemas.
type schemaSet struct {
	once        sync.Once
	initErr     error
	prefix      string
	fingerprint string
	admin       *pgx.Conn // holds the session locks of the schemas in use
	adminMu     sync.Mutex

	mu   sync.Mutex
	idle []string
	next int
}

var schemas = &schemaSet{}

func (s *schemaSet) init() error {
	s.once.Do(func() {
		ctx := context.Background()
		s.prefix = "dt_" + regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(
			strings.ToLower(strings.TrimSuffix(filepath.Base(os.Args[0]), ".test")), "_")
		if s.fingerprint, s.initErr = db.MigrationsFingerprint(); s.initErr != nil {
			return
		}
		if s.admin, s.initErr = pgx.Connect(ctx, URL()); s.initErr != nil {
			s.initErr = fmt.Errorf("cannot reach the test database (%v); run the tests with `go tool task test`, which starts it", s.initErr)
		}
	})
	return s.initErr
}

// take returns an idle schema, or readies a new one: one that a run left
// behind (when current and not in use by another process), or a fresh one.
func (s *schemaSet) take() (string, error) {
	if err := s.init(); err != nil {
		return "", err
	}
	s.mu.Lock()
	if n := len(s.idle); n > 0 {
		name := s.idle[n-1]
		s.idle = s.idle[:n-1]
		s.mu.Unlock()
		return name, nil
	}
	s.mu.Unlock()
	for {
		s.mu.Lock()
		name := fmt.Sprintf("%s_%d", s.prefix, s.next)
		s.next++
		s.mu.Unlock()
		ok, err := s.ready(name)
		if err != nil || ok {
			return name, err
		}
	}
}

// ready locks name for this process and makes it a migrated, empty schema.
// It reports false when another process holds it.
func (s *schemaSet) ready(name string) (bool, error) {
	ctx := context.Background()
	s.adminMu.Lock()
	var locked bool
	err := s.admin.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtextextended('dbtest:' || $1, 0))`, name).Scan(&locked)
	var comment *string
	if err == nil && locked {
		err = s.admin.QueryRow(ctx, `SELECT obj_description(oid, 'pg_namespace') FROM pg_namespace WHERE nspname = $1`, name).Scan(&comment)
		if err == pgx.ErrNoRows {
			err = nil
		}
	}
	s.adminMu.Unlock()
	if err != nil || !locked {
		return false, err
	}
	if comment != nil && strings.HasPrefix(*comment, s.fingerprint+" ") {
		if err := empty(ctx, name); err == nil {
			return true, nil
		}
	}
	return true, migrate(ctx, name, s.fingerprint)
}

// give puts a schema back, emptied when dirty. A schema that cannot be
// emptied, or lost a table (a test broke it on purpose), is dropped.
func (s *schemaSet) give(name string, dirty bool) {
	if dirty {
		if err := empty(context.Background(), name); err != nil {
			s.drop(name)
			return
		}
	}
	s.mu.Lock()
	s.idle = append(s.idle, name)
	s.mu.Unlock()
}

// drop removes a schema that cannot be reused.
func (s *schemaSet) drop(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s.adminMu.Lock()
	defer s.adminMu.Unlock()
	_, _ = s.admin.Exec(ctx, "SET lock_timeout = '10s'; DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE")
}

// migrate creates name afresh and applies every migration.
func migrate(ctx context.Context, name, fingerprint string) error {
	conn, err := pgx.Connect(ctx, URL())
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	ident := pgx.Identifier{name}.Sanitize()
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+ident+" CASCADE; CREATE SCHEMA "+ident); err != nil {
		return fmt.Errorf("error creating schema %s: %w", name, err)
	}
	d, err := db.Open(ctx, db.Config{URL: URL(), Schema: name, MaxConns: 2})
	if err != nil {
		return err
	}
	defer d.Close()
	if _, err := db.Migrate(ctx, d, slog.New(slog.DiscardHandler)); err != nil {
		return fmt.Errorf("error migrating schema %s: %w", name, err)
	}
	// The comment says which migrations made the schema, and how many
	// tables it had then (a test that drops one is found out).
	var tables int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = $1
		AND tablename NOT IN ('river_migration', 'goose_db_version')`, name).Scan(&tables); err != nil {
		return err
	}
	_, err = conn.Exec(ctx, "COMMENT ON SCHEMA "+ident+" IS "+quote(fmt.Sprintf("%s tables=%d", fingerprint, tables)))
	return err
}

// empty truncates every table of name but the migrations' own.
func empty(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, URL())
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var tables []string
	rows, err := conn.Query(ctx, `SELECT format('%I.%I', schemaname, tablename) FROM pg_tables
		WHERE schemaname = $1 AND tablename NOT IN ('river_migration', 'goose_db_version')`, name)
	if err == nil {
		tables, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil {
		return err
	}
	var comment string
	if err := conn.QueryRow(ctx, `SELECT coalesce(obj_description(oid, 'pg_namespace'), '') FROM pg_namespace
		WHERE nspname = $1`, name).Scan(&comment); err != nil {
		return err
	}
	if want := fmt.Sprintf(" tables=%d", len(tables)); !strings.HasSuffix(comment, want) {
		return fmt.Errorf("schema %s has lost a table (%d left; %q)", name, len(tables), comment)
	}
	// A process a test left behind may still hold a lock: give up on the
	// schema rather than wait for it.
	_, err = conn.Exec(ctx, "SET lock_timeout = '5s'; TRUNCATE "+strings.Join(tables, ", ")+" RESTART IDENTITY CASCADE")
	return err
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
