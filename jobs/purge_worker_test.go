package jobs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/db/dbtest"
	"github.com/domainclass/domainclass/jobs"
)

const month = 30 * 24 * time.Hour

// storedList writes a list of caller, one row per domain, kept for
// retention once it ends, as an upload does.
func storedList(t *testing.T, exec db.DBTX, caller string, retention time.Duration, domains ...string) *classifier.List {
	t.Helper()
	ctx := context.Background()
	src := &rowSlice{}
	for i, d := range domains {
		src.add(db.ListRowIn{Row: i + 1, Input: d, Domain: d})
	}
	l := &classifier.List{ID: uuid.New(), Caller: caller, Classifier: "cpg", Rows: len(domains), Domains: len(domains),
		ChunkRows: 200, Chunks: 1, Retention: retention}
	_, err := db.ListRowsCopy(ctx, exec, l.ID, src)
	require.NoError(t, err)
	require.NoError(t, db.ListInsert(ctx, exec, l, 0))
	return l
}

// ended marks list id ended with status, ago.
func ended(t *testing.T, exec db.DBTX, id uuid.UUID, status classifier.Status, ago time.Duration) {
	t.Helper()
	_, err := exec.Exec(context.Background(), `UPDATE list SET status = $2, completed_at = now() - make_interval(secs => $3)
		WHERE id = $1`, id, status, ago.Seconds())
	require.NoError(t, err)
}

// fromModel is a fresh model answer for domain (a provenance row of its
// own once stored).
func fromModel(domain string) classifier.Result {
	return classifier.Result{Domain: domain, Classifier: "cpg", Status: classifier.StatusCompleted, Answer: true,
		Confidence: 4, Reasoning: "Snacks.", Source: classifier.SourceLLM, ClassifiedAt: time.Now(), Model: "m",
		PromptVersion: "v1"}
}

// answerRow stores r as the answer of a list's row and returns the
// provenance the row now points at.
func answerRow(t *testing.T, exec db.DBTX, listID uuid.UUID, row int, r classifier.Result) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	_, err := db.ListRowFinish(ctx, exec, listID, row, r, "o")
	require.NoError(t, err)
	var id uuid.UUID
	require.NoError(t, exec.QueryRow(ctx, `SELECT provenance_id FROM list_row WHERE list_id = $1 AND row = $2`, listID, row).Scan(&id))
	return id
}

// cached is what the cache answers for domain now.
func cached(t *testing.T, exec db.DBTX, domain string) classifier.Result {
	t.Helper()
	r, err := db.ResultGet(context.Background(), exec, "cpg", domain)
	require.NoError(t, err)
	r.Source = classifier.SourceCache
	return *r
}

func ids(t *testing.T, exec db.DBTX, sql string, args ...any) []uuid.UUID {
	t.Helper()
	rows, err := exec.Query(context.Background(), sql, args...)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	require.NoError(t, err)
	return out
}

func count(t *testing.T, exec db.DBTX, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, exec.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// TestPurgeWorker_Purge: lists ended longer ago than their retention go,
// with their rows, keys and batches, and so does every provenance row only
// they (or a purged job) referred to; everything else stays.
func TestPurgeWorker_Purge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("RemovesWhatExpiredAndNothingElse", func(t *testing.T) {
		t.Parallel()
		d := dbtest.New(t)
		exec := d.Pool

		// Lists that expired: ended (each way) longer ago than they are kept.
		completed := storedList(t, exec, "a", month, "only.com", "shared.com", "res.com", "ov.com")
		pOnly := answerRow(t, exec, completed.ID, 1, fromModel("only.com"))
		pShared := answerRow(t, exec, completed.ID, 2, fromModel("shared.com"))
		pRes := answerRow(t, exec, completed.ID, 3, fromModel("res.com"))
		ov1 := setOverride(t, exec, "ov.com", true, 5, "alice", "Makes soap.")
		answerRow(t, exec, completed.ID, 4, ov1.Result())
		require.NoError(t, db.IdempotencyKeyInsert(ctx, exec, db.IdempotencyKey{Caller: "a", Key: "k", Fingerprint: []byte("f"),
			ListID: completed.ID, Response: []byte("{}")}))
		ended(t, exec, completed.ID, classifier.StatusCompleted, month+time.Hour)
		cancelled := storedList(t, exec, "a", month, "x.com")
		ended(t, exec, cancelled.ID, classifier.StatusCancelled, month+time.Hour)
		economy := storedList(t, exec, "b", month, "y.com", "z.com")
		batch, err := db.BatchOfChunk(ctx, exec, economy.ID, 0)
		require.NoError(t, err)
		for row, domain := range map[int]string{1: "y.com", 2: "z.com"} {
			require.NoError(t, db.BatchItemAdd(ctx, exec, batch.ID, db.BatchItem{Row: row, Domain: domain,
				Body: json.RawMessage(`{}`), PromptVersion: "v1"}))
		}
		ended(t, exec, economy.ID, classifier.StatusFailed, month+time.Hour)
		short := storedList(t, exec, "a", time.Hour, "s.com")
		ended(t, exec, short.ID, classifier.StatusCompleted, 2*time.Hour)

		// Lists that stay: ended lately, kept longer, or not ended.
		recent := storedList(t, exec, "a", month, "shared.com", "only.com")
		answerRow(t, exec, recent.ID, 1, cached(t, exec, "shared.com"))
		pOnly2 := answerRow(t, exec, recent.ID, 2, fromModel("only.com")) // a refresh: the result moves on
		ended(t, exec, recent.ID, classifier.StatusCompleted, 24*time.Hour)
		long := storedList(t, exec, "a", 3*month, "l.com")
		ended(t, exec, long.ID, classifier.StatusCompleted, month+time.Hour)
		running := storedList(t, exec, "a", time.Hour, "r.com")
		_, err = exec.Exec(ctx, `UPDATE list SET status = 'RUNNING', created_at = now() - interval '60 days' WHERE id = $1`, running.ID)
		require.NoError(t, err)
		ov2 := setOverride(t, exec, "ov.com", false, 4, "bob", "Not a maker.") // replaces ov1

		// A job purged by JOB_RETENTION, whose answer was then refreshed.
		oldJob, newJob := uuid.New(), uuid.New()
		for _, id := range []uuid.UUID{oldJob, newJob} {
			require.NoError(t, db.JobInsert(ctx, exec, db.JobInsertParams{ID: id, Caller: "a", Classifier: "cpg",
				Domains: []classifier.DomainInput{{Input: "job.com", Domain: "job.com"}}, RiverJobID: 1}))
			require.NoError(t, db.JobDomainFinish(ctx, exec, id, 0, fromModel("job.com"), "o"))
		}
		pJob, pJob2 := ids(t, exec, `SELECT provenance_id FROM classify_job_domain WHERE job_id = $1`, oldJob)[0],
			ids(t, exec, `SELECT provenance_id FROM classify_job_domain WHERE job_id = $1`, newJob)[0]
		_, err = exec.Exec(ctx, `UPDATE classify_job SET status = 'COMPLETED', completed_at = now() - interval '31 days' WHERE id = $1`, oldJob)
		require.NoError(t, err)

		w := &jobs.PurgeWorker{DB: exec, Logger: testLogger(t), JobRetention: month}
		got, err := w.Purge(ctx)
		require.NoError(t, err)
		require.Equal(t, jobs.PurgeCounts{Jobs: 1, BatchItems: 2, Lists: 4, ListRows: 4 + 1 + 2 + 1, Provenance: 3}, got)

		require.ElementsMatch(t, []uuid.UUID{recent.ID, long.ID, running.ID}, ids(t, exec, `SELECT id FROM list`))
		require.ElementsMatch(t, []uuid.UUID{recent.ID, long.ID, running.ID}, ids(t, exec, `SELECT DISTINCT list_id FROM list_row`),
			"a purged list's rows go with it")
		require.ElementsMatch(t, []uuid.UUID{pShared, pRes, pOnly2, ov2.ProvenanceID, pJob2}, ids(t, exec, `SELECT id FROM provenance`),
			"kept: what a kept row, a result or an override points at; gone: %v", []uuid.UUID{pOnly, ov1.ProvenanceID, pJob})
		require.Zero(t, count(t, exec, `SELECT count(*) FROM idempotency_key`), "a purged list's key goes with it")
		require.Zero(t, count(t, exec, `SELECT count(*) FROM llm_batch`)+count(t, exec, `SELECT count(*) FROM llm_batch_item`))
		require.Zero(t, count(t, exec, `SELECT count(*) FROM list_purge`)+count(t, exec, `SELECT count(*) FROM provenance_candidate`),
			"nothing left for the next run")
		require.Equal(t, 4, count(t, exec, `SELECT count(*) FROM result`), "the shared answers stay")

		again, err := w.Purge(ctx)
		require.NoError(t, err)
		require.Equal(t, jobs.PurgeCounts{}, again)
	})

	// A 200k-row list is purged in batches of at most jobs.PurgeBatch rows,
	// each its own short transaction: between two batches the purge holds
	// no transaction open, and writers (a row being answered, an upload by
	// the same caller) go through.
	t.Run("ABigListGoesInBatchesWithoutBlockingWriters", func(t *testing.T) {
		t.Parallel()
		d := dbtest.New(t)
		exec := d.Pool
		const rows, answered = 200_000, 12_000
		src := &rowSlice{}
		for i := 1; i <= rows; i++ {
			src.add(db.ListRowIn{Row: i, Input: fmt.Sprintf("d%d.com", i), Domain: fmt.Sprintf("d%d.com", i)})
		}
		big := &classifier.List{ID: uuid.New(), Caller: "a", Classifier: "cpg", Rows: rows, Domains: rows, ChunkRows: 200,
			Chunks: rows / 200, Retention: time.Hour}
		_, err := db.ListRowsCopy(ctx, exec, big.ID, src)
		require.NoError(t, err)
		require.NoError(t, db.ListInsert(ctx, exec, big, 0))
		// Its first rows answered, each with a provenance of its own.
		_, err = exec.Exec(ctx, `INSERT INTO provenance (id, model) SELECT gen_random_uuid(), 'm' FROM generate_series(1, $1)`, answered)
		require.NoError(t, err)
		_, err = exec.Exec(ctx, `UPDATE list_row r SET status = 'COMPLETED', provenance_id = p.id
			FROM (SELECT id, row_number() OVER () AS n FROM provenance) p WHERE r.list_id = $1 AND r.row = p.n`, big.ID)
		require.NoError(t, err)
		ended(t, exec, big.ID, classifier.StatusCompleted, 2*time.Hour)
		live := storedList(t, exec, "a", time.Hour, "live.com")

		batches := map[string][]int64{}
		wrote := false
		w := &jobs.PurgeWorker{DB: exec, Logger: testLogger(t), JobRetention: month,
			BatchDoneFunc: func(what string, n int64) {
				batches[what] = append(batches[what], n)
				if what != jobs.PurgedListRows || wrote {
					return
				}
				wrote = true
				require.Zero(t, count(t, exec, `SELECT count(*) FROM pg_stat_activity
					WHERE application_name = $1 AND state LIKE 'idle in transaction%'`, d.Schema),
					"between batches the purge holds no transaction open")
				wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				answerRow(t, exec, live.ID, 1, fromModel("live.com"))
				tx, err := exec.Begin(wctx)
				require.NoError(t, err)
				defer func() { _ = tx.Rollback(wctx) }()
				upload := storedList(t, tx, "a", time.Hour, "new.com")
				require.NoError(t, db.ListActiveLock(wctx, tx, "a"))
				_, err = db.ListStorageOf(wctx, tx, "a")
				require.NoError(t, err)
				require.NoError(t, tx.Commit(wctx), "an upload by the same caller, list %s", upload.ID)
			}}
		got, err := w.Purge(ctx)
		require.NoError(t, err)
		require.True(t, wrote)
		require.EqualValues(t, rows, got.ListRows)
		require.EqualValues(t, answered, got.Provenance)
		require.GreaterOrEqual(t, len(batches[jobs.PurgedListRows]), rows/jobs.PurgeBatch, "several batches")
		require.GreaterOrEqual(t, len(batches[jobs.PurgedProvenance]), answered/jobs.PurgeBatch)
		for what, ns := range batches {
			for _, n := range ns {
				require.LessOrEqual(t, n, int64(jobs.PurgeBatch), "a batch of %s", what)
			}
		}
		require.Equal(t, 2, count(t, exec, `SELECT count(*) FROM list_row`), "the live list's row and the new upload's")
		require.Equal(t, 1, count(t, exec, `SELECT count(*) FROM provenance`), "the live row's answer")
	})
}
