// Package dbtest gives each test its own fresh schema on the test
// PostgreSQL, with River's and the app's migrations applied, dropped when
// the test ends. Tests run in parallel, each on real Postgres.
package dbtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/domainclass/domainclass/db"
)

// DefaultURL is the test database of the private cluster (`go tool task
// test` starts it).
const DefaultURL = "postgres://postgres@127.0.0.1:54329/domainclass_test?sslmode=disable"

// URL returns TEST_DATABASE_URL, or DefaultURL.
func URL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// Schema creates a fresh, migrated schema and returns its name. It fails the
// test, with a hint, when the test database is unreachable.
func Schema(tb testing.TB) string {
	tb.Helper()
	ctx := context.Background()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	schema := "test_" + hex.EncodeToString(b)

	conn, err := pgx.Connect(ctx, URL())
	if err != nil {
		tb.Fatalf("cannot reach the test database (%v); run the tests with `go tool task test`, which starts it", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		tb.Fatalf("error creating schema: %v", err)
	}
	tb.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), URL())
		if err != nil {
			return
		}
		defer conn.Close(context.Background())
		_, _ = conn.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
	})

	d, err := db.Open(ctx, db.Config{URL: URL(), Schema: schema, MaxConns: 2})
	if err != nil {
		tb.Fatal(err)
	}
	defer d.Close()
	if _, err := db.Migrate(ctx, d, slog.New(slog.DiscardHandler)); err != nil {
		tb.Fatalf("error migrating: %v", err)
	}
	return schema
}

// New returns a DB on a fresh, migrated schema, closed when the test ends.
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
