package db_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/db/dbtest"
)

func domains(ds ...string) []classifier.DomainInput {
	var out []classifier.DomainInput
	for _, d := range ds {
		out = append(out, classifier.DomainInput{Input: d, Domain: d})
	}
	return out
}

func insertJob(t *testing.T, tx pgx.Tx, caller string, max int, ds ...string) (uuid.UUID, error) {
	t.Helper()
	id := uuid.New()
	return id, db.JobInsert(context.Background(), tx, db.JobInsertParams{
		ID: id, Caller: caller, Classifier: "cpg", Domains: domains(ds...), RiverJobID: 1, MaxQueuedDomains: max,
	})
}

func TestJobInsert_QueuedDomainsLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.TestTx(t)

	id, err := insertJob(t, tx, "a", 3, "a.com", "b.com")
	require.NoError(t, err)
	_, err = insertJob(t, tx, "a", 3, "c.com", "d.com")
	var full *db.QueueFullError
	require.ErrorAs(t, err, &full, "2 queued + 2 new > 3")
	require.Equal(t, db.QueueFullError{Queued: 2, Limit: 3}, *full)
	_, err = insertJob(t, tx, "b", 3, "c.com", "d.com")
	require.NoError(t, err, "another caller's queue is its own")

	// A job's domains count until the job ends.
	require.NoError(t, db.JobDomainFinish(ctx, tx, id, 0, classifier.Result{Domain: "a.com", Classifier: "cpg",
		Status: classifier.StatusCompleted, Answer: true, Confidence: 5, Source: classifier.SourceKnown, ClassifiedAt: time.Now()}, "o"))
	_, err = insertJob(t, tx, "a", 3, "c.com", "d.com")
	require.ErrorAs(t, err, &full, "a domain answered: the job is still running")
	_, ended, err := db.JobFail(ctx, tx, id, "given up")
	require.NoError(t, err)
	require.True(t, ended)
	id2, err := insertJob(t, tx, "a", 3, "c.com", "d.com")
	require.NoError(t, err, "a job ended (FAILED here) leaves the queue")

	// Retried by an operator, the failed job counts again: 2 + 2 + 1 > 4.
	_, err = db.JobStart(ctx, tx, id)
	require.NoError(t, err)
	_, err = insertJob(t, tx, "a", 4, "e.com")
	require.ErrorAs(t, err, &full)
	require.Equal(t, db.QueueFullError{Queued: 4, Limit: 4}, *full)
	for _, j := range []uuid.UUID{id, id2} {
		_, ended, err := db.JobComplete(ctx, tx, j)
		require.NoError(t, err)
		require.True(t, ended)
		_, ended, err = db.JobComplete(ctx, tx, j)
		require.NoError(t, err)
		require.False(t, ended, "ending twice takes nothing off twice")
	}
	_, err = insertJob(t, tx, "a", 3, "x.com", "y.com", "z.com")
	require.NoError(t, err, "both ended: the queue is empty")
}

// TestJobInsert_QueuedDomainsLimitUnderConcurrency: a hostile review sent
// 50 concurrent 10-domain jobs against a limit of 100 and got 170 in.
func TestJobInsert_QueuedDomainsLimitUnderConcurrency(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)
	start := make(chan struct{})
	var accepted, refused atomic.Int32
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			<-start
			tx, err := d.Pool.Begin(ctx)
			if !assert.NoError(t, err) {
				return
			}
			defer db.Rollback(ctx, tx)
			ds := make([]string, 10)
			for k := range ds {
				ds[k] = fmt.Sprintf("d%d-%d.com", i, k)
			}
			_, err = insertJob(t, tx, "a", 100, ds...)
			if full := (*db.QueueFullError)(nil); errors.As(err, &full) {
				refused.Add(1)
				return
			}
			if assert.NoError(t, err) && assert.NoError(t, tx.Commit(ctx)) {
				accepted.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	require.EqualValues(t, 10, accepted.Load(), "exactly the limit: 10 jobs of 10")
	require.EqualValues(t, 40, refused.Load())
	var queued int
	require.NoError(t, d.Pool.QueryRow(ctx, `SELECT domains FROM caller_queue WHERE caller = 'a'`).Scan(&queued))
	require.Equal(t, 100, queued)
}

func TestJobGet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.TestTx(t)
	id, err := insertJob(t, tx, "a", 0, "a.com", "b.com")
	require.NoError(t, err)

	j, err := db.JobGetOfCaller(ctx, tx, id, "a")
	require.NoError(t, err)
	require.Equal(t, classifier.StatusPending, j.Status)
	require.Len(t, j.Domains, 2)
	require.Equal(t, "b.com", j.Domains[1].Result.Domain)

	_, err = db.JobGetOfCaller(ctx, tx, id, "b")
	require.ErrorIs(t, err, db.ErrNotFound, "another caller's job")
	_, err = db.JobGet(ctx, tx, uuid.New())
	require.ErrorIs(t, err, db.ErrNotFound)
}

func TestJobComplete_EndsOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.TestTx(t)
	id := uuid.New()
	require.NoError(t, db.JobInsert(ctx, tx, db.JobInsertParams{ID: id, Caller: "a", Classifier: "cpg",
		Domains: domains("a.com"), CallbackURL: "https://example.com/hook", RiverJobID: 1}))

	end, ended, err := db.JobComplete(ctx, tx, id)
	require.NoError(t, err)
	require.True(t, ended)
	require.Equal(t, classifier.StatusCompleted, end.Status)
	require.Equal(t, "https://example.com/hook", end.CallbackURL)
	require.False(t, end.CompletedAt.IsZero())

	_, ended, err = db.JobComplete(ctx, tx, id)
	require.NoError(t, err)
	require.False(t, ended, "a redelivered job ends nothing twice")
	_, ended, err = db.JobFail(ctx, tx, id, "too late")
	require.NoError(t, err)
	require.False(t, ended, "a COMPLETED job is not failed afterwards")
}

func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.TestTx(t)
	_, err := db.IdempotencyKeyGet(ctx, tx, "c", "k")
	require.ErrorIs(t, err, db.ErrNotFound)

	id, err := insertJob(t, tx, "c", 0, "a.com")
	require.NoError(t, err)
	require.NoError(t, db.IdempotencyKeyInsert(ctx, tx, db.IdempotencyKey{Caller: "c", Key: "k", Fingerprint: []byte("f"),
		JobID: id, Response: []byte("{}")}))
	k, err := db.IdempotencyKeyGet(ctx, tx, "c", "k")
	require.NoError(t, err)
	require.Equal(t, id, k.JobID)
	_, err = db.IdempotencyKeyGet(ctx, tx, "other", "k")
	require.ErrorIs(t, err, db.ErrNotFound, "keys are per caller")

	locked, err := db.IdempotencyKeyLock(ctx, tx, "c", "k")
	require.NoError(t, err)
	require.True(t, locked)
}

func TestIdempotencyKeyPurge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.TestTx(t)
	for _, key := range []string{"fresh", "old-1", "old-2", "old-3"} {
		id, err := insertJob(t, tx, "c", 0, "a.com")
		require.NoError(t, err)
		require.NoError(t, db.IdempotencyKeyInsert(ctx, tx, db.IdempotencyKey{Caller: "c", Key: key,
			Fingerprint: []byte(key), JobID: id, Response: []byte("{}")}))
	}
	_, err := tx.Exec(ctx, `UPDATE idempotency_key SET created_at = now() - interval '25 hours' WHERE key LIKE 'old-%'`)
	require.NoError(t, err)

	n, err := db.IdempotencyKeyPurge(ctx, tx, 2)
	require.NoError(t, err)
	require.Equal(t, int64(2), n, "one batch at most")
	n, err = db.IdempotencyKeyPurge(ctx, tx, 2)
	require.NoError(t, err)
	require.Equal(t, int64(1), n)

	rows, err := tx.Query(ctx, `SELECT key FROM idempotency_key`)
	require.NoError(t, err)
	left, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"fresh"}, left, "keys younger than 24 hours stay")
}

func TestTranslate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.TestTx(t)
	require.ErrorIs(t, db.APIKeyRevoke(ctx, tx, "nobody"), db.ErrNotFound)
	require.NoError(t, db.APIKeyInsert(ctx, tx, db.APIKey{Name: "a", Prefix: "dc_x"}, []byte("h1")))
	err := db.APIKeyInsert(ctx, tx, db.APIKey{Name: "a", Prefix: "dc_y"}, []byte("h2"))
	require.ErrorIs(t, err, db.ErrConflict, "a unique violation")

	down, err := db.Open(ctx, db.Config{URL: "postgres://postgres@127.0.0.1:1/x?sslmode=disable"})
	require.NoError(t, err)
	defer down.Close()
	err = down.Ping(ctx)
	require.ErrorIs(t, err, db.ErrUnavailable)
	require.False(t, errors.Is(err, db.ErrNotFound))
}

func TestJobPurge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.TestTx(t)
	ids := map[string]uuid.UUID{}
	for _, name := range []string{"old-completed", "old-failed", "old-running", "fresh-completed"} {
		id, err := insertJob(t, tx, "c", 0, name+".com")
		require.NoError(t, err)
		ids[name] = id
		require.NoError(t, db.JobDomainFinish(ctx, tx, id, 0, classifier.Result{Domain: name + ".com", Classifier: "cpg",
			Status: classifier.StatusCompleted, Answer: true, Confidence: 5, Reasoning: "x", Source: classifier.SourceLLM,
			ClassifiedAt: time.Now()}, "o"))
		require.NoError(t, db.IdempotencyKeyInsert(ctx, tx, db.IdempotencyKey{Caller: "c", Key: name,
			Fingerprint: []byte(name), JobID: id, Response: []byte("{}")}))
	}
	_, err := tx.Exec(ctx, `UPDATE classify_job SET status = 'COMPLETED', completed_at = now() - interval '31 days'
		WHERE id = $1`, ids["old-completed"])
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `UPDATE classify_job SET status = 'FAILED', completed_at = now() - interval '31 days'
		WHERE id = $1`, ids["old-failed"])
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `UPDATE classify_job SET status = 'RUNNING', started_at = now() - interval '31 days'
		WHERE id = $1`, ids["old-running"])
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `UPDATE classify_job SET status = 'COMPLETED', completed_at = now() - interval '1 day'
		WHERE id = $1`, ids["fresh-completed"])
	require.NoError(t, err)

	n, err := db.JobPurge(ctx, tx, 30*24*time.Hour, 1)
	require.NoError(t, err)
	require.Equal(t, int64(1), n, "one batch at most")
	n, err = db.JobPurge(ctx, tx, 30*24*time.Hour, 10)
	require.NoError(t, err)
	require.Equal(t, int64(1), n)

	for name, id := range ids {
		_, err := db.JobGet(ctx, tx, id)
		if strings.HasPrefix(name, "old-") && name != "old-running" {
			require.ErrorIs(t, err, db.ErrNotFound, name)
		} else {
			require.NoError(t, err, "%s is kept: not ended, or ended lately", name)
		}
	}
	var answers, domainRows, keys int
	require.NoError(t, tx.QueryRow(ctx, `SELECT (SELECT count(*) FROM result), (SELECT count(*) FROM classify_job_domain),
		(SELECT count(*) FROM idempotency_key)`).Scan(&answers, &domainRows, &keys))
	require.Equal(t, 4, answers, "the shared answers stay")
	require.Equal(t, 2, domainRows, "a purged job's own rows go with it")
	require.Equal(t, 2, keys)
}
