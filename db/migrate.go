package db

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"io/fs"
	"log/slog"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// MigrateResult says what a migration run applied.
type MigrateResult struct {
	River []string // River's versions applied, as "NNN name"
	App   []string // ours, as file names
}

// Migrate applies River's migrations (rivermigrate) and then the app's
// (embedded SQL, goose). It is safe to run twice and from several processes
// at once: a session advisory lock, keyed by schema, lets one run at a time
// and the others then find nothing left to do.
func Migrate(ctx context.Context, db *DB, logger *slog.Logger) (*MigrateResult, error) {
	conn, err := db.Pool.Acquire(ctx)
	if err != nil {
		return nil, translate(err)
	}
	defer conn.Release()
	lockKey := migrationLockKey(db.Schema)
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", lockKey); err != nil {
		return nil, translate(fmt.Errorf("error taking the migration lock: %w", err))
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", lockKey) }()

	res := new(MigrateResult)
	migrator, err := rivermigrate.New(riverpgxv5.New(db.Pool), &rivermigrate.Config{Logger: logger, Schema: db.Schema})
	if err != nil {
		return nil, fmt.Errorf("error creating River migrator: %w", err)
	}
	riverRes, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
	if err != nil {
		return nil, translate(fmt.Errorf("error applying River migrations: %w", err))
	}
	for _, v := range riverRes.Versions {
		res.River = append(res.River, fmt.Sprintf("%03d %s", v.Version, v.Name))
	}

	sub, err := fs.Sub(migrationFS, "migrations")
	if err != nil {
		return nil, err
	}
	sqlDB := stdlib.OpenDBFromPool(db.Pool)
	defer sqlDB.Close()
	provider, err := goose.NewProvider(goose.DialectPostgres, sqlDB, sub, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return nil, fmt.Errorf("error reading app migrations: %w", err)
	}
	appRes, err := provider.Up(ctx)
	if err != nil {
		return nil, translate(fmt.Errorf("error applying app migrations: %w", err))
	}
	for _, r := range appRes {
		res.App = append(res.App, r.Source.Path)
	}
	return res, nil
}

// MigrationsFingerprint identifies the migrations this binary applies,
// River's and ours, so that a schema migrated earlier can be known to be
// current (the test kit reuses schemas across runs).
func MigrationsFingerprint() (string, error) {
	h := sha256.New()
	migrator, err := rivermigrate.New(riverpgxv5.New(nil), nil)
	if err != nil {
		return "", err
	}
	for _, m := range migrator.AllVersions() {
		fmt.Fprintf(h, "river %d %s\n", m.Version, m.SQLUp)
	}
	err = fs.WalkDir(migrationFS, "migrations", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := migrationFS.ReadFile(path)
		fmt.Fprintf(h, "app %s %s\n", path, b)
		return err
	})
	return hex.EncodeToString(h.Sum(nil))[:16], err
}

// migrationLockKey is the advisory lock that serializes migrations of one
// schema.
func migrationLockKey(schema string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte("domainclass-migrate:" + schema))
	return int64(h.Sum64())
}
