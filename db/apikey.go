package db

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/domainclass/domainclass/classifier"
)

// APIKey is a caller's key as stored: never the key itself.
type APIKey struct {
	Name             string
	Prefix           string
	RatePerMinute    int // 0: the default
	MaxQueuedDomains int // 0: the default
	CreatedAt        time.Time
	LastUsedAt       *time.Time
	RevokedAt        *time.Time
}

// APIKeyCreate stores a new key's hash under name. It returns ECONFLICT when
// the name is taken (revoked keys keep their names).
func (db *DB) APIKeyCreate(ctx context.Context, k APIKey, hash []byte) error {
	_, err := db.Pool.Exec(ctx, `
		INSERT INTO api_key (name, key_hash, key_prefix, rate_per_minute, max_queued_domains)
		VALUES ($1, $2, $3, NULLIF($4, 0), NULLIF($5, 0))`,
		k.Name, hash, k.Prefix, k.RatePerMinute, k.MaxQueuedDomains)
	if classifier.ErrorCode(translate(err)) == classifier.ECONFLICT {
		return classifier.Errorf(classifier.ECONFLICT, "an API key named %q already exists", k.Name)
	}
	return translate(err)
}

// APIKeyByHash returns the key with this hash, revoked or not, or ENOTFOUND.
func (db *DB) APIKeyByHash(ctx context.Context, hash []byte) (*APIKey, error) {
	rows, err := db.Pool.Query(ctx, apiKeySelect+` WHERE key_hash = $1`, hash)
	if err != nil {
		return nil, translate(err)
	}
	k, err := pgx.CollectExactlyOneRow(rows, scanAPIKey)
	if err != nil {
		return nil, translate(err)
	}
	return k, nil
}

// APIKeyList returns every key, oldest first.
func (db *DB) APIKeyList(ctx context.Context) ([]*APIKey, error) {
	rows, err := db.Pool.Query(ctx, apiKeySelect+` ORDER BY created_at, name`)
	if err != nil {
		return nil, translate(err)
	}
	keys, err := pgx.CollectRows(rows, scanAPIKey)
	return keys, translate(err)
}

// APIKeyRevoke revokes the key named name. It returns ENOTFOUND for an
// unknown name; revoking twice is not an error.
func (db *DB) APIKeyRevoke(ctx context.Context, name string) error {
	tag, err := db.Pool.Exec(ctx, `UPDATE api_key SET revoked_at = coalesce(revoked_at, now()) WHERE name = $1`, name)
	if err != nil {
		return translate(err)
	}
	if tag.RowsAffected() == 0 {
		return classifier.Errorf(classifier.ENOTFOUND, "no API key named %q", name)
	}
	return nil
}

// APIKeySetLimits overrides a key's limits; 0 restores the default.
func (db *DB) APIKeySetLimits(ctx context.Context, name string, ratePerMinute, maxQueuedDomains int) error {
	tag, err := db.Pool.Exec(ctx, `
		UPDATE api_key SET rate_per_minute = NULLIF($2, 0), max_queued_domains = NULLIF($3, 0) WHERE name = $1`,
		name, ratePerMinute, maxQueuedDomains)
	if err != nil {
		return translate(err)
	}
	if tag.RowsAffected() == 0 {
		return classifier.Errorf(classifier.ENOTFOUND, "no API key named %q", name)
	}
	return nil
}

// APIKeyTouch records that the key was used now.
func (db *DB) APIKeyTouch(ctx context.Context, name string) error {
	_, err := db.Pool.Exec(ctx, `UPDATE api_key SET last_used_at = now() WHERE name = $1`, name)
	return translate(err)
}

const apiKeySelect = `
	SELECT name, key_prefix, coalesce(rate_per_minute, 0), coalesce(max_queued_domains, 0),
	       created_at, last_used_at, revoked_at
	FROM api_key`

func scanAPIKey(row pgx.CollectableRow) (*APIKey, error) {
	k := new(APIKey)
	err := row.Scan(&k.Name, &k.Prefix, &k.RatePerMinute, &k.MaxQueuedDomains, &k.CreatedAt, &k.LastUsedAt, &k.RevokedAt)
	return k, err
}
