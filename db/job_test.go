package db_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/db/dbtest"
)

func TestIdempotencyKeyPurge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)
	var riverID int64
	enqueue := func(context.Context, pgx.Tx, uuid.UUID) (int64, error) { riverID++; return riverID, nil }
	for _, key := range []string{"fresh", "old-1", "old-2", "old-3"} {
		_, err := d.JobCreate(ctx, db.JobCreateParams{ID: uuid.New(), Caller: "c", Classifier: "cpg",
			Domains: []classifier.DomainInput{{Input: "a.com", Domain: "a.com"}}, IdempotencyKey: key,
			Fingerprint: []byte(key), Response: []byte("{}")}, enqueue)
		require.NoError(t, err)
	}
	_, err := d.Pool.Exec(ctx, `UPDATE idempotency_key SET created_at = now() - interval '25 hours' WHERE key LIKE 'old-%'`)
	require.NoError(t, err)

	n, err := d.IdempotencyKeyPurge(ctx, 2)
	require.NoError(t, err)
	require.Equal(t, int64(2), n, "one batch at most")
	n, err = d.IdempotencyKeyPurge(ctx, 2)
	require.NoError(t, err)
	require.Equal(t, int64(1), n)

	var left []string
	rows, err := d.Pool.Query(ctx, `SELECT key FROM idempotency_key`)
	require.NoError(t, err)
	left, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"fresh"}, left, "keys younger than 24 hours stay")
}
