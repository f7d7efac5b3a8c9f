package db_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/db/dbtest"
)

// emptySchema creates schema name afresh, unmigrated (dbtest.Schema comes
// migrated), and drops it when the test ends.
func emptySchema(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbtest.URL())
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+name+" CASCADE; CREATE SCHEMA "+name)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = conn.Exec(context.Background(), "DROP SCHEMA "+name+" CASCADE")
		_ = conn.Close(context.Background())
	})
}

func TestMigrate_TwiceAndConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const name = "test_migrate_concurrently"
	emptySchema(t, name)

	results := make([]*db.MigrateResult, 3)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() {
			d, err := db.Open(ctx, db.Config{URL: dbtest.URL(), Schema: name, MaxConns: 3})
			require.NoError(t, err)
			defer d.Close()
			results[i], err = db.Migrate(ctx, d, slog.New(slog.DiscardHandler))
			require.NoError(t, err)
		})
	}
	wg.Wait()

	files, err := filepath.Glob("migrations/*.sql")
	require.NoError(t, err)
	for i := range files {
		files[i] = filepath.Base(files[i])
	}
	applied := 0
	for _, r := range results {
		if len(r.River)+len(r.App) > 0 {
			applied++
			require.Len(t, r.River, 8)
			require.Equal(t, files, r.App, "every app migration, in order")
		}
	}
	require.Equal(t, 1, applied, "exactly one of three concurrent runs applies the migrations")

	d, err := db.Open(ctx, db.Config{URL: dbtest.URL(), Schema: name})
	require.NoError(t, err)
	defer d.Close()
	again, err := db.Migrate(ctx, d, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.Empty(t, again.River)
	require.Empty(t, again.App)
}

// TestMigrate_Overrides takes 00010 up and down on a schema of its own: the
// known companies become yes overrides, by "known import", and come back
// from them; rows answered before keep their source, and rows an override
// answered read as known after a down.
func TestMigrate_Overrides(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const name = "test_migrate_overrides"
	emptySchema(t, name)
	d, err := db.Open(ctx, db.Config{URL: dbtest.URL(), Schema: name, MaxConns: 2})
	require.NoError(t, err)
	defer d.Close()
	river, err := rivermigrate.New(riverpgxv5.New(d.Pool), &rivermigrate.Config{Schema: name})
	require.NoError(t, err)
	_, err = river.Migrate(ctx, rivermigrate.DirectionUp, nil) // jobs read River's rows
	require.NoError(t, err)
	sqlDB := stdlib.OpenDBFromPool(d.Pool)
	defer sqlDB.Close()
	migrations, err := goose.NewProvider(goose.DialectPostgres, sqlDB, os.DirFS("migrations"), goose.WithDisableGlobalRegistry(true))
	require.NoError(t, err)
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := d.Pool.Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	exists := func(table string) bool {
		var ok bool
		require.NoError(t, d.Pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, table).Scan(&ok))
		return ok
	}

	_, err = migrations.UpTo(ctx, 9)
	require.NoError(t, err)
	set := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	exec(`INSERT INTO known_company (classifier, domain, name, updated_at)
		VALUES ('cpg', 'unilever.com', 'Unilever', $1), ('cpg', 'pg.com', 'Procter & Gamble (P&G)', $1)`, set)
	job := uuid.New()
	exec(`INSERT INTO classify_job (id, caller, classifier, inputs, domains)
		VALUES ($1, 'c', 'cpg', '{unilever.com,acme.com}', '{unilever.com,acme.com}')`, job)
	exec(`INSERT INTO classify_job_domain (job_id, position, domain, status, is_cpg, confidence, reasoning, source, classified_at)
		VALUES ($1, 0, 'unilever.com', 'COMPLETED', true, 5, 'Listed as a known CPG company (Unilever).', 'known', now())`, job)

	_, err = migrations.UpByOne(ctx)
	require.NoError(t, err)
	require.False(t, exists("known_company"))
	_, err = migrations.Up(ctx) // the queries below are today's
	require.NoError(t, err)
	overrides, err := db.OverrideList(ctx, d.Pool, "cpg")
	require.NoError(t, err)
	require.Len(t, overrides, 2)
	for i, name := range []string{"Procter & Gamble (P&G)", "Unilever"} {
		o := overrides[i]
		note := "Listed as a known CPG company (" + name + ")."
		require.Equal(t, []any{true, 5, "known import", note}, []any{o.Answer, o.Confidence, o.SetBy, o.Note})
		require.True(t, set.Equal(o.SetAt), "set when it was last imported")
		var setBy, pnote string
		require.NoError(t, d.Pool.QueryRow(ctx, `SELECT set_by, note FROM provenance WHERE id = $1`, o.ProvenanceID).Scan(&setBy, &pnote))
		require.Equal(t, []string{"known import", note}, []string{setBy, pnote}, "each override has its provenance")
	}
	_, _, err = db.OverrideSet(ctx, d.Pool, []classifier.Override{{Classifier: "cpg", Domain: "acme.com", Answer: false,
		Confidence: 4, Note: "Software.", SetBy: "alice"}})
	require.NoError(t, err)
	acme, err := db.OverrideGet(ctx, d.Pool, "cpg", "acme.com")
	require.NoError(t, err)
	require.NoError(t, db.JobDomainFinish(ctx, d.Pool, job, 1, acme.Result(), "o"))
	got, err := db.JobGet(ctx, d.Pool, job)
	require.NoError(t, err)
	require.Equal(t, classifier.SourceKnown, got.Domains[0].Result.Source, "a row answered from the known list keeps its source")
	require.Equal(t, classifier.SourceOverride, got.Domains[1].Result.Source)
	require.Equal(t, "alice", got.Domains[1].Result.SetBy)

	_, err = migrations.DownTo(ctx, 9)
	require.NoError(t, err)
	require.False(t, exists("override"))
	rows, err := d.Pool.Query(ctx, `SELECT domain, name, updated_at FROM known_company ORDER BY domain`)
	require.NoError(t, err)
	type known struct {
		Domain, Name string
		At           time.Time
	}
	restored, err := pgx.CollectRows(rows, pgx.RowToStructByPos[known])
	require.NoError(t, err)
	require.Len(t, restored, 2, "the yes overrides come back, the no one has no place")
	require.Equal(t, []string{"pg.com", "Procter & Gamble (P&G)", "unilever.com", "Unilever"},
		[]string{restored[0].Domain, restored[0].Name, restored[1].Domain, restored[1].Name})
	var sources []string
	var provenance int
	require.NoError(t, d.Pool.QueryRow(ctx, `SELECT array_agg(source || ':' || coalesce(provenance_id::text, '-') ORDER BY position)
		FROM classify_job_domain WHERE job_id = $1`, job).Scan(&sources))
	require.Equal(t, []string{"known:-", "known:-"}, sources, "an override's row reads as known, without provenance")
	require.NoError(t, d.Pool.QueryRow(ctx, `SELECT count(*) FROM provenance`).Scan(&provenance))
	require.Zero(t, provenance, "the overrides' provenance goes with them")

	_, err = migrations.UpByOne(ctx)
	require.NoError(t, err, "and up again")
	overrides, err = db.OverrideList(ctx, d.Pool, "")
	require.NoError(t, err)
	require.Len(t, overrides, 2)
}
