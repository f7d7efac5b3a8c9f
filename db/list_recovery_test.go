package db_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/db/dbtest"
)

// TestListRetryRows: a retry makes a list's FAILED rows PENDING with
// nothing of their failed answer left, its counters go down by them, and
// the provenance a failed answer pointed at is named for the purge (a
// refusal is the model's answer too, with its provenance).
func TestListRetryRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.TestTx(t)
	l := &classifier.List{ID: uuid.New(), Caller: "test", Classifier: "cpg", Rows: 20, Domains: 18, Duplicates: 2,
		ChunkRows: 5, Chunks: 4, Retention: time.Hour}
	_, err := db.ListRowsCopy(ctx, tx, l.ID, &rows{n: 20})
	require.NoError(t, err)
	require.NoError(t, db.ListInsert(ctx, tx, l, 1))
	now := time.Now()
	for row := 1; row <= 9; row++ {
		r := classifier.Result{Domain: "d" + string(rune('0'+row)) + ".com", Classifier: "cpg", Status: classifier.StatusCompleted,
			Answer: true, Confidence: 5, Reasoning: "x", Source: classifier.SourceLLM, ClassifiedAt: now, Model: "m", PromptVersion: "v1"}
		if row == 5 { // refused: FAILED, with the call's provenance; row 10 repeats it
			r.Status, r.Answer, r.Confidence, r.Reasoning, r.Error = classifier.StatusFailed, false, 0, "", "model refused: no"
		}
		_, err := db.ListRowFinish(ctx, tx, l.ID, row, r, "o")
		require.NoError(t, err)
	}
	var released uuid.UUID
	require.NoError(t, tx.QueryRow(ctx, `SELECT provenance_id FROM list_row WHERE list_id = $1 AND row = 5`, l.ID).Scan(&released))
	_, err = tx.Exec(ctx, `DELETE FROM provenance_candidate`)
	require.NoError(t, err)
	_, ended, err := db.ListFail(ctx, tx, l.ID, "given up")
	require.NoError(t, err)
	require.True(t, ended)
	before, err := db.ListGet(ctx, tx, l.ID)
	require.NoError(t, err)
	require.Equal(t, []int{10, 2}, []int{before.Done, before.Failed}, "row 5 and its duplicate, row 10")

	locked, err := db.ListLock(ctx, tx, l.ID)
	require.NoError(t, err)
	r, err := db.ListRetryRows(ctx, tx, locked)
	require.NoError(t, err)
	require.Equal(t, db.ListRetried{Rows: 12, Pass: 1}, r, "2 FAILED rows and the 10 never answered")
	after, err := db.ListGet(ctx, tx, l.ID)
	require.NoError(t, err)
	require.Equal(t, classifier.StatusRunning, after.Status)
	require.Empty(t, after.Error)
	require.Nil(t, after.CompletedAt)
	require.Equal(t, []int{8, 0, 8, 1}, []int{after.Done, after.Failed, after.Completed, after.Retries})

	var status string
	var provenance *uuid.UUID
	var errText, model *string
	require.NoError(t, tx.QueryRow(ctx, `SELECT status, provenance_id, error, model FROM list_row WHERE list_id = $1 AND row = 10`, l.ID).
		Scan(&status, &provenance, &errText, &model))
	require.Equal(t, "PENDING", status)
	require.Nil(t, provenance)
	require.Nil(t, errText)
	require.Nil(t, model)
	var left int
	require.NoError(t, tx.QueryRow(ctx, `SELECT sum(10 - num_nulls(answer, confidence, reasoning, source, error, classified_at,
		provenance_id, model, prompt_version, evidence_urls))::int FROM list_row WHERE list_id = $1 AND row IN (5, 10)`, l.ID).Scan(&left))
	require.Zero(t, left, "nothing of the failed attempt is left (the trigger list_row_requeued clears it)")
	var candidate bool
	require.NoError(t, tx.QueryRow(ctx, `SELECT EXISTS (SELECT FROM provenance_candidate WHERE id = $1)`, released).Scan(&candidate))
	require.True(t, candidate, "the failed answer's provenance is named for the purge")

	// Nothing left to retry: nothing changes.
	again, err := db.ListRetryRows(ctx, tx, after)
	require.NoError(t, err)
	require.Equal(t, 12, again.Rows, "the rows not answered yet are still to answer")
}

// TestListPurge_SparesAListRetriedMeanwhile: a list retried at the moment
// it expires is running again, and the purge that found it expired must
// not take it off (the purge waits for the retry's row lock, then reads
// the list as the retry left it).
func TestListPurge_SparesAListRetriedMeanwhile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)
	l := newList(t, d.Pool, "a", time.Hour, "a.com", "b.com")
	expire(t, d.Pool, l.ID)

	retry, err := d.Pool.Begin(ctx)
	require.NoError(t, err)
	defer db.Rollback(ctx, retry)
	locked, err := db.ListLock(ctx, retry, l.ID)
	require.NoError(t, err)
	_, err = db.ListRetryRows(ctx, retry, locked)
	require.NoError(t, err)

	purged := make(chan int64, 1)
	go func() {
		n, err := db.ListPurge(ctx, d.Pool, 100) // waits for the retry's lock
		if err != nil {
			n = -1
		}
		purged <- n
	}()
	require.True(t, waitForLockWaiter(t, d, "DELETE FROM list"), "the purge did not reach the list's lock")
	require.NoError(t, retry.Commit(ctx))
	require.Zero(t, <-purged, "the retried list is running again: it is not purged")
	now, err := db.ListGet(ctx, d.Pool, l.ID)
	require.NoError(t, err)
	require.Equal(t, classifier.StatusRunning, now.Status)
}

// waitForLockWaiter polls until a session of d's schema waits for a lock
// in a statement that starts with prefix.
func waitForLockWaiter(t *testing.T, d *db.DB, prefix string) bool {
	t.Helper()
	deadline := time.Now().Add(dbtest.Patience())
	for time.Now().Before(deadline) {
		var n int
		require.NoError(t, d.Pool.QueryRow(context.Background(), `
			SELECT count(*) FROM pg_stat_activity
			WHERE application_name = $2 AND wait_event_type = 'Lock' AND ltrim(query) LIKE '%' || $1 || '%'`,
			prefix, d.Schema).Scan(&n))
		if n > 0 {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}
