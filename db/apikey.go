package db

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// APIKey is a caller's key as stored: never the key itself.
type APIKey struct {
	Name             string
	Prefix           string
	RatePerMinute    int // 0: the default
	MaxQueuedDomains int // 0: the default
	MaxStoredRows    int // 0: the default
	CreatedAt        time.Time
	LastUsedAt       *time.Time
	RevokedAt        *time.Time
}

// APIKeyInsert stores a new key's hash under k.Name. It returns ErrConflict
// when the name is taken (revoked keys keep their names).
func APIKeyInsert(ctx context.Context, exec DBTX, k APIKey, hash []byte) error {
	_, err := exec.Exec(ctx, `
		INSERT INTO api_key (name, key_hash, key_prefix, rate_per_minute, max_queued_domains, max_stored_rows)
		VALUES ($1, $2, $3, NULLIF($4, 0), NULLIF($5, 0), NULLIF($6, 0))`,
		k.Name, hash, k.Prefix, k.RatePerMinute, k.MaxQueuedDomains, k.MaxStoredRows)
	return translate(err)
}

// APIKeyGetByHash returns the key with this hash, revoked or not, or
// ErrNotFound.
func APIKeyGetByHash(ctx context.Context, exec DBTX, hash []byte) (*APIKey, error) {
	rows, err := exec.Query(ctx, apiKeySelect+` WHERE key_hash = $1`, hash)
	if err != nil {
		return nil, translate(err)
	}
	k, err := pgx.CollectExactlyOneRow(rows, scanAPIKey)
	return k, translate(err)
}

// APIKeyList returns every key, oldest first.
func APIKeyList(ctx context.Context, exec DBTX) ([]*APIKey, error) {
	rows, err := exec.Query(ctx, apiKeySelect+` ORDER BY created_at, name`)
	return collect(rows, err, scanAPIKey)
}

// APIKeyRevoke revokes the key named name. It returns ErrNotFound for an
// unknown name; revoking twice is not an error.
func APIKeyRevoke(ctx context.Context, exec DBTX, name string) error {
	tag, err := exec.Exec(ctx, `UPDATE api_key SET revoked_at = coalesce(revoked_at, now()) WHERE name = $1`, name)
	return rowsAffected(tag.RowsAffected(), err)
}

// APIKeySetLimits overrides a key's limits (RatePerMinute,
// MaxQueuedDomains, MaxStoredRows of k); 0 restores the default. It returns
// ErrNotFound for an unknown name.
func APIKeySetLimits(ctx context.Context, exec DBTX, name string, k APIKey) error {
	tag, err := exec.Exec(ctx, `
		UPDATE api_key SET rate_per_minute = NULLIF($2, 0), max_queued_domains = NULLIF($3, 0),
		       max_stored_rows = NULLIF($4, 0)
		WHERE name = $1`,
		name, k.RatePerMinute, k.MaxQueuedDomains, k.MaxStoredRows)
	return rowsAffected(tag.RowsAffected(), err)
}

// APIKeyTouch records that the key was used now.
func APIKeyTouch(ctx context.Context, exec DBTX, name string) error {
	_, err := exec.Exec(ctx, `UPDATE api_key SET last_used_at = now() WHERE name = $1`, name)
	return translate(err)
}

const apiKeySelect = `
	SELECT name, key_prefix, coalesce(rate_per_minute, 0), coalesce(max_queued_domains, 0),
	       coalesce(max_stored_rows, 0), created_at, last_used_at, revoked_at
	FROM api_key`

func scanAPIKey(row pgx.CollectableRow) (*APIKey, error) {
	k := new(APIKey)
	err := row.Scan(&k.Name, &k.Prefix, &k.RatePerMinute, &k.MaxQueuedDomains, &k.MaxStoredRows, &k.CreatedAt, &k.LastUsedAt, &k.RevokedAt)
	return k, err
}

// rowsAffected turns an update of no row into ErrNotFound.
func rowsAffected(n int64, err error) error {
	if err != nil {
		return translate(err)
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}

// APIKeyGetByName returns the key named name, revoked or not, or
// ErrNotFound.
func APIKeyGetByName(ctx context.Context, exec DBTX, name string) (*APIKey, error) {
	rows, err := exec.Query(ctx, apiKeySelect+` WHERE name = $1`, name)
	if err != nil {
		return nil, translate(err)
	}
	k, err := pgx.CollectExactlyOneRow(rows, scanAPIKey)
	return k, translate(err)
}
