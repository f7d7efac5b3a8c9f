package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertest"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/jobs"
)

// jobWorker is a classify worker on e's transaction whose pipeline would
// wait an hour on another call's claim: a test that finishes did not wait.
func (e *economyBundle) jobWorker(t *testing.T) *rivertest.Worker[jobs.ClassifyArgs, pgx.Tx] {
	t.Helper()
	logger := testLogger(t)
	s := e.s
	s.DomainConcurrency = 1
	return rivertest.NewWorker(t, riverpgxv5.New(nil), &river.Config{Logger: logger}, &jobs.ClassifyWorker{
		DB: e.tx, Pipeline: newPipeline(t, e.tx, e.llm, setupOpts{claimWait: time.Hour}, s, logger),
		Registry: classifier.DefaultRegistry(), Settings: s, Logger: logger,
	})
}

// ageClaim makes the batch's claim on domain as old as a day.
func ageClaim(t *testing.T, tx pgx.Tx, domain string) {
	t.Helper()
	_, err := tx.Exec(context.Background(), `UPDATE domain_claim SET claimed_at = now() - interval '1 day' WHERE domain = $1`, domain)
	require.NoError(t, err)
}

// chatCalls counts the calls (not batch requests) asked about domain.
func (e *economyBundle) chatCalls(domain string) int {
	n := 0
	for _, r := range e.llm.Requests() {
		if r.Domain == domain && r.Batch == "" {
			n++
		}
	}
	return n
}

// spent is what caller_spend counted for the economy lists' caller.
func (e *economyBundle) spent(t *testing.T) (calls int, usd float64) {
	t.Helper()
	require.NoError(t, e.tx.QueryRow(context.Background(),
		`SELECT coalesce(sum(model_calls), 0)::int, coalesce(sum(spend_usd), 0)::float8 FROM caller_spend WHERE caller = 'test'`).
		Scan(&calls, &usd))
	return calls, usd
}

// Issue 36, finding 2: a job that needs a domain an economy list's batch
// holds does not wait for the batch (up to a day) holding a worker.
func TestEconomyList_ClaimsDoNotParkOtherWork(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	batchPrice, _ := testPrice("", 120, 25, true)

	t.Run("AJobSleepsThenTakesTheBatchsClaimOverAndTheBatchDoesNotChargeItAgain", func(t *testing.T) {
		t.Parallel()
		e := setupEconomy(t, byDomain(nil), nil)
		hold := make(chan struct{})
		e.llm.Batch.Hold = hold
		l := e.accept(t, "shared.com", "other.com")
		e.stage(t)
		batchJob := rivertest.RequireInsertedTx[*riverpgxv5.Driver](ctx, t, e.tx, &jobs.BatchArgs{}, nil).JobRow
		for range 3 { // submitted, in_progress, held
			res, err := e.batch.WorkJob(ctx, t, e.tx, batchJob)
			require.NoError(t, err)
			batchJob = res.Job
		}
		calls, _ := e.spent(t)
		require.Equal(t, 2, calls, "staging counts both requests")

		worker := e.jobWorker(t)
		_, row := accept(t, e.tx, e.client, "", "shared.com")
		res, err := worker.WorkJob(ctx, t, e.tx, row)
		require.NoError(t, err)
		require.Equal(t, rivertype.JobStateScheduled, res.Job.State, "the job sleeps: no worker waits for the batch")
		require.Zero(t, e.chatCalls("shared.com"), "before the batch has held it CLAIM_WAIT")

		ageClaim(t, e.tx, "shared.com")
		res, err = worker.WorkJob(ctx, t, e.tx, res.Job)
		require.NoError(t, err)
		require.Equal(t, rivertype.JobStateCompleted, res.Job.State)
		require.Equal(t, 1, e.chatCalls("shared.com"), "after it, the job asks the model itself, once")

		close(hold)
		for res.Job = batchJob; ; {
			res, err = e.batch.WorkJob(ctx, t, e.tx, res.Job)
			require.NoError(t, err)
			if res.Job.State != rivertype.JobStateScheduled {
				break
			}
		}
		now, rows := e.list(t, l)
		require.Equal(t, classifier.StatusCompleted, now.Status)
		require.Equal(t, classifier.SourceCache, rows[1].Result.Source, "the list has the job's answer")
		require.Equal(t, classifier.SourceLLM, rows[2].Result.Source)
		var batchID *string
		require.NoError(t, e.tx.QueryRow(ctx, `SELECT batch_id FROM result WHERE domain = 'shared.com'`).Scan(&batchID))
		require.Nil(t, batchID, "the batch's later answer does not replace the job's")
		calls, usd := e.spent(t)
		require.Equal(t, 1, calls, "the economy list's caller pays for other.com only")
		require.InDelta(t, batchPrice, usd, 1e-12, "at the batch's real price")
		require.InDelta(t, batchPrice, now.CostUSD, 1e-12)
	})

	t.Run("ADomainTakenOverBeforeTheBatchIsSentIsLeftOutOfIt", func(t *testing.T) {
		t.Parallel()
		e := setupEconomy(t, byDomain(nil), nil)
		l := e.accept(t, "shared.com", "other.com")
		e.stage(t)
		ageClaim(t, e.tx, "shared.com")
		_, row := accept(t, e.tx, e.client, "", "shared.com")
		res, err := e.jobWorker(t).WorkJob(ctx, t, e.tx, row)
		require.NoError(t, err)
		require.Equal(t, rivertype.JobStateCompleted, res.Job.State)

		e.follow(t)
		for _, r := range e.llm.Requests() {
			require.False(t, r.Batch != "" && r.Domain == "shared.com", "shared.com was sent in the batch")
		}
		require.Equal(t, 1, e.llm.Calls("shared.com"), "one request for it in all: the job's")
		now, rows := e.list(t, l)
		require.Equal(t, classifier.StatusCompleted, now.Status)
		require.Equal(t, classifier.SourceCache, rows[1].Result.Source)
		calls, _ := e.spent(t)
		require.Equal(t, 1, calls)
	})

	t.Run("AStagedCallIsGivenBackWhenTheListIsCancelled", func(t *testing.T) {
		t.Parallel()
		e := setupEconomy(t, byDomain(nil), nil)
		l := e.accept(t, "a.com", "b.com", "c.com")
		e.stage(t)
		calls, usd := e.spent(t)
		require.Equal(t, 3, calls)
		require.Positive(t, usd)
		_, ended, err := db.ListCancel(ctx, e.tx, l.ID, "test")
		require.NoError(t, err)
		require.True(t, ended)
		e.follow(t)
		require.Zero(t, e.llm.Total())
		calls, usd = e.spent(t)
		require.Zero(t, calls, "no call was made: none is counted")
		require.InDelta(t, 0, usd, 1e-12)
	})

	t.Run("AStagedCallIsGivenBackWhenTheBatchFails", func(t *testing.T) {
		t.Parallel()
		e := setupEconomy(t, byDomain(nil), func(s *jobs.Settings) { s.BatchMaxAttempts = 1 })
		e.llm.Batch.End, e.llm.Batch.FailCode, e.llm.Batch.FailMessage = "failed", "token_limit_exceeded", "Enqueued token limit reached."
		e.accept(t, "a.com", "b.com")
		e.stage(t)
		e.follow(t)
		calls, usd := e.spent(t)
		require.Zero(t, calls)
		require.InDelta(t, 0, usd, 1e-12)
	})

	t.Run("AnotherBatchWaitsForTheBatchWithoutAWorker", func(t *testing.T) {
		t.Parallel()
		e := setupEconomy(t, byDomain(nil), nil)
		e.llm.Batch.Hold = make(chan struct{})
		e.accept(t, "shared.com")
		e.stage(t)
		ageClaim(t, e.tx, "shared.com")
		second := e.accept(t, "shared.com", "new.com")
		chunks := rivertest.RequireManyInsertedTx[*riverpgxv5.Driver](ctx, t, e.tx, []rivertest.ExpectedJob{
			{Args: &jobs.ClassifyListArgs{}}, {Args: &jobs.ClassifyListArgs{}}})
		res, err := e.chunks.WorkJob(ctx, t, e.tx, chunks[1])
		require.NoError(t, err)
		require.Equal(t, rivertype.JobStateScheduled, res.Job.State, "the chunk sleeps at the batch's poll interval")
		require.GreaterOrEqual(t, time.Until(res.Job.ScheduledAt), e.s.BatchPollInterval-5*time.Second)
		var owner string
		require.NoError(t, e.tx.QueryRow(ctx, `SELECT owner FROM domain_claim WHERE domain = 'shared.com'`).Scan(&owner))
		var firstOwner string
		require.NoError(t, e.tx.QueryRow(ctx, `SELECT 'batch:' || id FROM llm_batch WHERE list_id <> $1`, second.ID).Scan(&firstOwner))
		require.Equal(t, firstOwner, owner, "a batch never takes another's claim: both would pay")
	})
}
