package db_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/db/dbtest"
)

func TestMigrate_TwiceAndConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbtest.URL())
	require.NoError(t, err)
	defer conn.Close(ctx)
	// Not dbtest.Schema: that one comes migrated already.
	const name = "test_migrate_concurrently"
	_, err = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+name+" CASCADE; CREATE SCHEMA "+name)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = conn.Exec(context.Background(), "DROP SCHEMA "+name+" CASCADE") })

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
