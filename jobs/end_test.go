package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/admission"
	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/db/dbtest"
	"github.com/domainclass/domainclass/jobs"
)

// seamBundle runs the seam's steps in a test transaction, with a
// pool-less River client that inserts, lists and cancels in it.
type seamBundle struct {
	tx     pgx.Tx
	client *jobs.Client
	s      jobs.Settings
}

func setupSeam(t *testing.T) *seamBundle {
	t.Helper()
	client, err := river.NewClient(riverpgxv5.New(nil), &river.Config{})
	require.NoError(t, err)
	return &seamBundle{tx: dbtest.TestTx(t), client: client, s: listSettings(2, 2)}
}

// jobsOf returns the River jobs of kind in tx, their args decoded as T.
func jobsOf[T any](t *testing.T, b *seamBundle, kind string) ([]*rivertype.JobRow, []T) {
	t.Helper()
	res, err := b.client.JobListTx(context.Background(), b.tx, river.NewJobListParams().Kinds(kind).
		States(rivertype.JobStateAvailable, rivertype.JobStateCancelled, rivertype.JobStateScheduled).First(100))
	require.NoError(t, err)
	args := make([]T, len(res.Jobs))
	for i, j := range res.Jobs {
		require.NoError(t, json.Unmarshal(j.EncodedArgs, &args[i]))
	}
	return res.Jobs, args
}

// A list ends once, whichever way and however often it is told to: one
// webhook for the end that took, none for the others.
func TestEndList(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("CancelThenEndQueuesOneWebhook", func(t *testing.T) {
		t.Parallel()
		b := setupSeam(t)
		l := acceptList(t, b.tx, b.client, b.s, "https://example.com/hooks", "a.com", "b.com", "c.com")

		ended, err := jobs.EndList(ctx, b.tx, b.client, b.s, l.ID, jobs.Completed())
		require.NoError(t, err)
		require.False(t, ended, "a list with rows not final does not complete")
		_, hooks := jobsOf[jobs.WebhookArgs](t, b, jobs.WebhookArgs{}.Kind())
		require.Empty(t, hooks)

		ended, err = jobs.CancelList(ctx, b.tx, b.client, b.s, l.ID, "test")
		require.NoError(t, err)
		require.True(t, ended)
		for _, e := range []jobs.Ending{jobs.Completed(), jobs.Failed("given up"), jobs.Cancelled("test")} {
			again, err := jobs.EndList(ctx, b.tx, b.client, b.s, l.ID, e)
			require.NoError(t, err)
			require.False(t, again, "an ended list does not end %s", e.Status)
		}
		again, err := jobs.CancelList(ctx, b.tx, b.client, b.s, l.ID, "test")
		require.NoError(t, err)
		require.False(t, again)

		now, err := db.ListGet(ctx, b.tx, l.ID)
		require.NoError(t, err)
		require.Equal(t, classifier.StatusCancelled, now.Status)
		_, hooks = jobsOf[jobs.WebhookArgs](t, b, jobs.WebhookArgs{}.Kind())
		require.Equal(t, []jobs.WebhookArgs{{ListID: l.ID.String(), EndedAt: hooks[0].EndedAt}}, hooks, "one webhook")
		require.True(t, now.CompletedAt.Equal(hooks[0].EndedAt), "the webhook names the end that took")
		chunks, _ := jobsOf[jobs.ClassifyListArgs](t, b, jobs.ClassifyListArgs{}.Kind())
		require.Len(t, chunks, 1)
		require.Equal(t, rivertype.JobStateCancelled, chunks[0].State, "the waiting chunk is cancelled with the list")
	})

	t.Run("AnotherCallersCancelChangesNothing", func(t *testing.T) {
		t.Parallel()
		b := setupSeam(t)
		l := acceptList(t, b.tx, b.client, b.s, "https://example.com/hooks", "a.com")
		ended, err := jobs.CancelList(ctx, b.tx, b.client, b.s, l.ID, "mallory")
		require.NoError(t, err)
		require.False(t, ended)
		now, err := db.ListGet(ctx, b.tx, l.ID)
		require.NoError(t, err)
		require.Equal(t, classifier.StatusPending, now.Status)
		chunks, _ := jobsOf[jobs.ClassifyListArgs](t, b, jobs.ClassifyListArgs{}.Kind())
		require.Len(t, chunks, 1)
		require.Equal(t, rivertype.JobStateAvailable, chunks[0].State)
		_, hooks := jobsOf[jobs.WebhookArgs](t, b, jobs.WebhookArgs{}.Kind())
		require.Empty(t, hooks)
	})
}

// A job's end queues its webhook once, however often it is reported (a
// redelivered job completing again), and none without a callback URL.
func TestEndJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupSeam(t)
	failed, _ := accept(t, b.tx, b.client, "https://example.com/hooks", "a.com")
	completed, _ := accept(t, b.tx, b.client, "https://example.com/hooks", "b.com")
	quiet, _ := accept(t, b.tx, b.client, "", "c.com")
	for _, step := range []struct {
		id  uuid.UUID
		end jobs.Ending
	}{{failed, jobs.Failed("gave up")}, {completed, jobs.Completed()}, {quiet, jobs.Completed()}} {
		ended, err := jobs.EndJob(ctx, b.tx, b.client, b.s, step.id, step.end)
		require.NoError(t, err)
		require.True(t, ended, "%s", step.end.Status)
		again, err := jobs.EndJob(ctx, b.tx, b.client, b.s, step.id, step.end)
		require.NoError(t, err)
		require.False(t, again, "%s again", step.end.Status)
	}
	_, err := jobs.EndJob(ctx, b.tx, b.client, b.s, quiet, jobs.Cancelled("test"))
	require.Error(t, err, "a job is not cancelled")

	_, hooks := jobsOf[jobs.WebhookArgs](t, b, jobs.WebhookArgs{}.Kind())
	got := map[string]int{}
	for _, h := range hooks {
		got[h.JobID]++
	}
	require.Equal(t, map[string]int{failed.String(): 1, completed.String(): 1}, got)
}

// failingInserter refuses every insert, as River does when Postgres does.
type failingInserter struct{}

var errRiverDown = errors.New("river is down")

func (failingInserter) InsertManyTx(context.Context, pgx.Tx, []river.InsertManyParams) ([]*rivertype.JobInsertResult, error) {
	return nil, errRiverDown
}

// AcceptList writes a list whole or, with the caller's rollback, not at
// all.
func TestAcceptList(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("AnEconomyListIsChunkedByBatchWithItsKey", func(t *testing.T) {
		t.Parallel()
		b := setupSeam(t)
		b.s.BatchMaxRequests = 2
		l := &classifier.List{ID: uuid.New(), Caller: "test", Classifier: "cpg", Tier: classifier.TierEconomy, Rows: 5, Domains: 5}
		src := &rowSlice{}
		for i, d := range []string{"a.com", "b.com", "c.com", "d.com", "e.com"} {
			src.add(db.ListRowIn{Row: i + 1, Input: d, Domain: d})
		}
		key := &db.IdempotencyKey{Caller: "test", Key: "k1", ListID: l.ID, Fingerprint: []byte{1}, Response: []byte(`{}`)}
		_, err := jobs.AcceptList(ctx, b.tx, b.client, b.s, jobs.ListAccept{List: l, Rows: src, Key: key})
		require.NoError(t, err)
		got, err := db.ListGet(ctx, b.tx, l.ID)
		require.NoError(t, err)
		require.Equal(t, [3]int{5, 2, 3}, [3]int{got.Rows, got.ChunkRows, got.Chunks}, "rows, rows a chunk, chunks")
		_, chunks := jobsOf[jobs.ClassifyListArgs](t, b, jobs.ClassifyListArgs{}.Kind())
		require.Equal(t, []jobs.ClassifyListArgs{{ListID: l.ID.String()}}, chunks, "the first chunk alone")
		kept, err := db.IdempotencyKeyGet(ctx, b.tx, "test", "k1")
		require.NoError(t, err)
		require.Equal(t, l.ID, kept.ListID)
	})

	t.Run("AdmitSeesTheRowsAndItsRefusalWritesNoList", func(t *testing.T) {
		t.Parallel()
		b := setupSeam(t)
		require.NoError(t, db.CallerBudgetSet(ctx, b.tx, "test", db.CallerBudget{ModelCallsPerDay: 1}))
		l := &classifier.List{ID: uuid.New(), Caller: "test", Classifier: "cpg", Rows: 2, Domains: 2}
		src := &rowSlice{}
		src.add(db.ListRowIn{Row: 1, Input: "a.com", Domain: "a.com"})
		src.add(db.ListRowIn{Row: 2, Input: "b.com", Domain: "b.com"})
		admit := &admission.Request{Limits: admission.Limits{MaxActiveLists: 3, MaxStoredRows: 100},
			Estimator: admission.DefaultEstimator()}
		_, err := jobs.AcceptList(ctx, b.tx, b.client, b.s, jobs.ListAccept{List: l, Rows: src, Admit: admit})
		var over *admission.ExceedsBudgetError
		require.ErrorAs(t, err, &over)
		require.Equal(t, 2, over.ModelCalls, "the rows are in: both are counted")
		_, err = db.ListGet(ctx, b.tx, l.ID)
		require.ErrorIs(t, err, db.ErrNotFound, "no list written after a refusal")
		_, chunks := jobsOf[jobs.ClassifyListArgs](t, b, jobs.ClassifyListArgs{}.Kind())
		require.Empty(t, chunks)
	})

	t.Run("ARiverFailureLeavesNothing", func(t *testing.T) {
		t.Parallel()
		b := setupSeam(t)
		l := &classifier.List{ID: uuid.New(), Caller: "test", Classifier: "cpg", Rows: 1, Domains: 1}
		src := &rowSlice{}
		src.add(db.ListRowIn{Row: 1, Input: "a.com", Domain: "a.com"})
		sp, err := b.tx.Begin(ctx) // the caller's transaction, rolled back as a handler's is
		require.NoError(t, err)
		_, err = jobs.AcceptList(ctx, sp, failingInserter{}, b.s, jobs.ListAccept{List: l, Rows: src,
			Key: &db.IdempotencyKey{Caller: "test", Key: "k2", ListID: l.ID, Fingerprint: []byte{1}, Response: []byte(`{}`)}})
		require.ErrorIs(t, err, errRiverDown)
		require.NoError(t, sp.Rollback(ctx))
		require.Zero(t, count(t, b.tx, `SELECT count(*) FROM list_row WHERE list_id = $1`, l.ID))
		_, err = db.ListGet(ctx, b.tx, l.ID)
		require.ErrorIs(t, err, db.ErrNotFound)
		_, err = db.IdempotencyKeyGet(ctx, b.tx, "test", "k2")
		require.ErrorIs(t, err, db.ErrNotFound)
	})
}

// AcceptJob writes River's job and ours together, and a caller over its
// queued domains gets the error the API maps to 429.
func TestAcceptJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupSeam(t)
	id, row := accept(t, b.tx, b.client, "", "a.com")
	var args jobs.ClassifyArgs
	require.NoError(t, json.Unmarshal(row.EncodedArgs, &args))
	require.Equal(t, jobs.ClassifyArgs{JobID: id.String()}, args)

	inputs, _ := classifier.NormalizeDomains([]string{"b.com", "c.com"})
	err := jobs.AcceptJob(ctx, b.tx, b.client, db.JobInsertParams{ID: uuid.New(), Caller: "test", Classifier: "cpg",
		Domains: inputs, MaxQueuedDomains: 2}, nil)
	var full *db.QueueFullError
	require.ErrorAs(t, err, &full)
}
