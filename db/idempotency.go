package db

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// IdempotencyKeyTTL is how long a key replays its first answer.
const IdempotencyKeyTTL = 24 * time.Hour

// IdempotencyKey is a stored Idempotency-Key: a fingerprint of the request
// it was first used with, what that request made (a job or a list), and the
// answer it got.
type IdempotencyKey struct {
	Caller      string
	Key         string
	Fingerprint []byte
	JobID       uuid.UUID // uuid.Nil for a list's key
	ListID      uuid.UUID // uuid.Nil for a job's key
	Response    []byte
}

// IdempotencyKeyLock takes the lock of caller's key for the rest of tx, a
// transaction. It returns false, at once, while another transaction holds
// it: a request with that key is still in flight.
func IdempotencyKeyLock(ctx context.Context, tx DBTX, caller, key string) (bool, error) {
	var locked bool
	err := tx.QueryRow(ctx,
		// Advisory locks are database-wide: the key names the schema, and the
		// caller by length so that ("a:b", "c") and ("a", "b:c") differ.
		`SELECT pg_try_advisory_xact_lock(hashtextextended(
			'idempotency:' || current_schema() || ':' || length($1) || ':' || $1 || $2, 0))`,
		caller, key,
	).Scan(&locked)
	return locked, translate(err)
}

// IdempotencyKeyGet returns caller's key if it was used within
// IdempotencyKeyTTL, or ErrNotFound.
func IdempotencyKeyGet(ctx context.Context, exec DBTX, caller, key string) (*IdempotencyKey, error) {
	k := &IdempotencyKey{Caller: caller, Key: key}
	var jobID, listID *uuid.UUID
	err := exec.QueryRow(ctx, `
		SELECT fingerprint, response, job_id, list_id FROM idempotency_key
		WHERE caller = $1 AND key = $2 AND created_at > now() - make_interval(secs => $3)`,
		caller, key, IdempotencyKeyTTL.Seconds(),
	).Scan(&k.Fingerprint, &k.Response, &jobID, &listID)
	if err != nil {
		return nil, translate(err)
	}
	k.JobID, k.ListID = deref(jobID), deref(listID)
	return k, nil
}

// IdempotencyKeyInsert stores a key with its request's fingerprint and
// answer, replacing an expired one.
func IdempotencyKeyInsert(ctx context.Context, exec DBTX, k IdempotencyKey) error {
	_, err := exec.Exec(ctx, `
		INSERT INTO idempotency_key (caller, key, fingerprint, job_id, list_id, response)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (caller, key) DO UPDATE
		SET fingerprint = excluded.fingerprint, job_id = excluded.job_id, list_id = excluded.list_id,
		    response = excluded.response, created_at = now()`,
		k.Caller, k.Key, k.Fingerprint, nullUUID(k.JobID), nullUUID(k.ListID), k.Response)
	return translate(err)
}

// IdempotencyKeyPurge deletes keys older than IdempotencyKeyTTL, at most
// batch at a time, and returns how many it deleted.
func IdempotencyKeyPurge(ctx context.Context, exec DBTX, batch int) (int64, error) {
	tag, err := exec.Exec(ctx, `
		DELETE FROM idempotency_key WHERE ctid = ANY (ARRAY(
			SELECT ctid FROM idempotency_key
			WHERE created_at < now() - make_interval(secs => $1)
			LIMIT $2))`, IdempotencyKeyTTL.Seconds(), batch)
	if err != nil {
		return 0, translate(err)
	}
	return tag.RowsAffected(), nil
}

func nullUUID(id uuid.UUID) *uuid.UUID {
	if id == uuid.Nil {
		return nil
	}
	return &id
}
