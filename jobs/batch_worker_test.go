package jobs_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertest"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/classifier/llm"
	"github.com/domainclass/domainclass/classifier/llm/llmtest"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/db/dbtest"
	"github.com/domainclass/domainclass/jobs"
	"github.com/domainclass/domainclass/spend"
)

// economyBundle works an economy list's chunks and batches in a test
// transaction, against the fake provider's chat and Batch APIs.
type economyBundle struct {
	*txBundle
	s      jobs.Settings
	chunks *rivertest.Worker[jobs.ClassifyListArgs, pgx.Tx]
	batch  *rivertest.Worker[jobs.BatchArgs, pgx.Tx]
	// batchWith makes a batch worker like batch that asks another Batch
	// API (nil: none).
	batchWith func(jobs.Batcher) *rivertest.Worker[jobs.BatchArgs, pgx.Tx]
}

// testPrice: $1 per million prompt tokens and $2 per million completion
// tokens, half in a batch.
func testPrice(_ string, promptTokens, completionTokens float64, batch bool) (float64, bool) {
	usd := (promptTokens*1 + completionTokens*2) / 1e6
	if batch {
		usd /= 2
	}
	return usd, true
}

func setupEconomy(t *testing.T, handle func(llmtest.Request) llmtest.Reply, mutate func(*jobs.Settings)) *economyBundle {
	return setupEconomyFile(t, handle, mutate, 0)
}

func setupEconomyFile(t *testing.T, handle func(llmtest.Request) llmtest.Reply, mutate func(*jobs.Settings), maxFile int) *economyBundle {
	t.Helper()
	b := setupTx(t, handle, setupOpts{})
	s := testSettings()
	s.ListDomainConcurrency, s.BatchMaxRequests, s.ListChunksInFlight = 1, 10, 1
	if mutate != nil {
		mutate(&s)
	}
	logger := testLogger(t)
	pipeline := newPipeline(t, b.tx, b.llm, setupOpts{}, s, logger)
	client, err := llm.New(llm.Config{BaseURL: b.llm.BaseURL(), APIKey: "sk-test", Timeout: dbtest.Patience()})
	require.NoError(t, err)
	cfg := &river.Config{Logger: logger}
	batchWith := func(batcher jobs.Batcher) *rivertest.Worker[jobs.BatchArgs, pgx.Tx] {
		return rivertest.NewWorker(t, riverpgxv5.New(nil), cfg, &jobs.BatchWorker{
			DB: b.tx, Batcher: batcher, Pipeline: pipeline, Registry: classifier.DefaultRegistry(), Settings: s,
			Logger: logger, Price: testPrice, MaxFileBytes: maxFile})
	}
	return &economyBundle{txBundle: b, s: s,
		chunks: rivertest.NewWorker(t, riverpgxv5.New(nil), cfg, &jobs.ClassifyListWorker{
			DB: b.tx, Pipeline: pipeline, Registry: classifier.DefaultRegistry(), Settings: s, Logger: logger, Price: testPrice,
			Spend: &spend.Spenders{DB: b.tx, Price: testPrice, Logger: logger}}),
		batch:     batchWith(client),
		batchWith: batchWith,
	}
}

func (e *economyBundle) accept(t *testing.T, inputs ...string) *classifier.List {
	t.Helper()
	return acceptTier(t, e.tx, e.client, e.s, &classifier.List{Tier: classifier.TierEconomy,
		CallbackURL: "https://example.com/hooks"}, inputs...)
}

// stage works the list's first chunk.
func (e *economyBundle) stage(t *testing.T) *rivertest.WorkResult {
	t.Helper()
	ctx := context.Background()
	chunk := rivertest.RequireInsertedTx[*riverpgxv5.Driver](ctx, t, e.tx, &jobs.ClassifyListArgs{}, nil)
	res, err := e.chunks.WorkJob(ctx, t, e.tx, chunk.JobRow)
	require.NoError(t, err)
	return res
}

// follow works the list's batch job until it stops snoozing, and returns
// the states it was left in after each run.
func (e *economyBundle) follow(t *testing.T) []rivertype.JobState {
	t.Helper()
	ctx := context.Background()
	job := rivertest.RequireInsertedTx[*riverpgxv5.Driver](ctx, t, e.tx, &jobs.BatchArgs{}, nil).JobRow
	var states []rivertype.JobState
	for i := 0; ; i++ {
		require.Less(t, i, 20, "the batch job never ended: %v", states)
		res, err := e.batch.WorkJob(ctx, t, e.tx, job)
		require.NoError(t, err)
		states = append(states, res.Job.State)
		if res.Job.State != rivertype.JobStateScheduled {
			return states
		}
		job = res.Job
	}
}

func (e *economyBundle) list(t *testing.T, l *classifier.List) (*classifier.List, map[int]classifier.ListRow) {
	t.Helper()
	now, err := db.ListGet(context.Background(), e.tx, l.ID)
	require.NoError(t, err)
	return now, listRows(t, e.tx, now)
}

func TestEconomyList(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("FreshDomainsAreAnsweredByOneBatchAtHalfThePrice", func(t *testing.T) {
		t.Parallel()
		e := setupEconomy(t, byDomain(map[string]llmtest.Reply{"crm.io": llmtest.Answer(false, 4, "Software.")}), nil)
		_, _, err := db.OverrideSet(ctx, e.tx, []classifier.Override{{Classifier: "cpg", Domain: "unilever.com", Answer: true, Confidence: 5,
			Note: "Unilever makes soap and food.", SetBy: "test"}})
		require.NoError(t, err)
		l := e.accept(t, "acme.com", "unilever.com", "crm.io", "www.acme.com", "localhost")

		res := e.stage(t)
		require.Equal(t, rivertype.JobStateCompleted, res.Job.State, "the chunk's job ends once its batch is handed over")
		require.Equal(t, 0, e.llm.Total(), "staging asks the model nothing")
		var out jobs.ListChunkOutput
		require.NoError(t, json.Unmarshal(res.Job.Output(), &out))
		require.Equal(t, jobs.Counts{Override: 1, Batched: 2}, out.Counts)
		now, rows := e.list(t, l)
		require.Equal(t, classifier.StatusRunning, now.Status)
		require.Equal(t, classifier.SourceOverride, rows[2].Result.Source, "an overridden domain is answered at once")
		require.Equal(t, classifier.StatusPending, rows[1].Result.Status)

		states := e.follow(t)
		require.Equal(t, []rivertype.JobState{"scheduled", "scheduled", "scheduled", "completed"}, states,
			"submitted (validating), then in_progress, finalizing: a snooze each, no slot held between; then stored")
		batches, requests := e.llm.Batches()
		require.Equal(t, []int{1, 2}, []int{batches, requests})
		require.Equal(t, 1, e.llm.Calls("acme.com"))
		require.Equal(t, 1, e.llm.Calls("crm.io"))
		require.Equal(t, 2, e.llm.Total(), "one request per fresh domain, the duplicate included")

		now, rows = e.list(t, l)
		require.Equal(t, classifier.StatusCompleted, now.Status)
		require.Equal(t, classifier.SourceLLM, rows[1].Result.Source)
		require.True(t, rows[1].Result.Answer)
		require.False(t, rows[3].Result.Answer)
		require.Equal(t, "Software.", rows[3].Result.Reasoning)
		require.Equal(t, rows[1].Result.Reasoning, rows[4].Result.Reasoning, "the duplicate has its first row's answer")
		require.Equal(t, []string{"test-model", "none"}, []string{rows[1].Result.Model, rows[1].Result.Search},
			"a batch answer's provenance is the request's, as a call's is")
		require.NotEmpty(t, rows[1].Result.PromptVersion)
		require.Equal(t, rows[1].Result.ProvenanceID, rows[4].Result.ProvenanceID)
		require.NotZero(t, rows[1].Result.ProvenanceID)
		require.Equal(t, []int{5, 4, 1, 1, 3}, []int{now.Done, now.Completed, now.Override, now.Rejected, now.LLM})
		batch, _ := testPrice("", 120, 25, true)
		want := 2 * batch
		require.InDelta(t, want, now.CostUSD, 1e-12, "two answers at the batch price")

		cached, err := db.ResultGet(ctx, e.tx, "cpg", "acme.com")
		require.NoError(t, err)
		require.True(t, cached.Answer, "cached for the next list or job")
		var batchID string
		require.NoError(t, e.tx.QueryRow(ctx, `SELECT batch_id FROM result WHERE domain = 'acme.com'`).Scan(&batchID))
		require.Equal(t, "batch_1", batchID, "the answer records the batch it came by")
		var claims int
		require.NoError(t, e.tx.QueryRow(ctx, `SELECT count(*) FROM domain_claim`).Scan(&claims))
		require.Zero(t, claims, "every claim is released with its answer")
		rivertest.RequireInsertedTx[*riverpgxv5.Driver](ctx, t, e.tx, &jobs.WebhookArgs{}, &rivertest.RequireInsertedOpts{Queue: jobs.QueueWebhook})
	})

	t.Run("WhatTheBatchDidNotAnswerIsAskedAsACallOnce", func(t *testing.T) {
		t.Parallel()
		e := setupEconomy(t, func(r llmtest.Request) llmtest.Reply {
			switch {
			case r.Domain == "garbled.com" && r.Call == 1:
				return llmtest.Reply{Raw: "<html>upstream error</html>"}
			case r.Domain == "refused.com" && r.Call == 1:
				return llmtest.Status(http.StatusInternalServerError, nil)
			}
			return llmtest.Answer(true, 4, "Food.")
		}, nil)
		e.llm.Batch.End, e.llm.Batch.ExpireAfter = "expired", 2
		l := e.accept(t, "garbled.com", "refused.com", "late-1.com", "late-2.com")
		e.stage(t)
		setOverride(t, e.tx, "late-2.com", false, 5, "ops", "A software firm.") // while the batch runs
		states := e.follow(t)
		require.Equal(t, rivertype.JobStateCompleted, states[len(states)-1])

		for _, d := range []string{"garbled.com", "refused.com", "late-1.com", "late-2.com"} {
			require.LessOrEqual(t, e.llm.Calls(d), 2, d)
		}
		require.Equal(t, 2, e.llm.Calls("garbled.com"), "its batch answer was unreadable: one call")
		require.Equal(t, 2, e.llm.Calls("refused.com"), "its batch request failed: one call")
		require.Equal(t, 1, e.llm.Calls("late-1.com"), "expired before it ran: one call, no batch request")
		require.Zero(t, e.llm.Calls("late-2.com"), "expired, and overridden meanwhile: the override answers, no call")
		now, rows := e.list(t, l)
		require.Equal(t, classifier.StatusCompleted, now.Status)
		for row := 1; row <= 4; row++ {
			require.Equal(t, classifier.StatusCompleted, rows[row].Result.Status, "row %d", row)
		}
		require.Equal(t, classifier.SourceOverride, rows[4].Result.Source)
		require.Equal(t, 1, now.Override)
		full, _ := testPrice("", 120, 25, false)
		require.InDelta(t, 3*full, now.CostUSD, 1e-12, "fallbacks cost the standard price")
	})

	t.Run("ABatchFailedWholeIsSubmittedAgainThenItsRowsFail", func(t *testing.T) {
		t.Parallel()
		e := setupEconomy(t, byDomain(nil), func(s *jobs.Settings) { s.BatchMaxAttempts = 2 })
		e.llm.Batch.End, e.llm.Batch.FailCode, e.llm.Batch.FailMessage = "failed", "token_limit_exceeded", "Enqueued token limit reached for test-model."
		l := e.accept(t, "a.com", "b.com")
		e.stage(t)
		e.follow(t)
		batches, _ := e.llm.Batches()
		require.Equal(t, 2, batches, "submitted twice")
		require.Equal(t, 0, e.llm.Total())
		now, rows := e.list(t, l)
		require.Equal(t, classifier.StatusCompleted, now.Status, "every row is final")
		require.Equal(t, 2, now.Failed)
		require.Equal(t, classifier.StatusFailed, rows[1].Result.Status)
		require.Contains(t, rows[1].Result.Error, "token_limit_exceeded: Enqueued token limit reached for test-model.")
		require.Zero(t, now.CostUSD)
	})

	t.Run("AFileOverTheProvidersLimitIsAskedAsCalls", func(t *testing.T) {
		t.Parallel()
		e := setupEconomyFile(t, byDomain(nil), nil, 1000) // a request is about 2 kB
		l := e.accept(t, "a.com", "b.com")
		e.stage(t)
		require.Equal(t, []rivertype.JobState{"completed"}, e.follow(t))
		batches, _ := e.llm.Batches()
		require.Zero(t, batches, "nothing the provider would refuse is sent")
		require.Equal(t, 1, e.llm.Calls("a.com"))
		require.Equal(t, 1, e.llm.Calls("b.com"))
		now, _ := e.list(t, l)
		require.Equal(t, classifier.StatusCompleted, now.Status)
		require.Equal(t, 2, now.Completed)
	})

	t.Run("ABatchCreatedByARunThatDiedIsFoundNotPaidForTwice", func(t *testing.T) {
		t.Parallel()
		e := setupEconomy(t, byDomain(nil), nil)
		l := e.accept(t, "a.com", "b.com")
		e.stage(t)
		// A run uploaded the file and created the batch, then died before
		// recording it: the provider has a batch carrying our id.
		var id string
		require.NoError(t, e.tx.QueryRow(ctx, `SELECT id::text FROM llm_batch`).Scan(&id))
		client, err := llm.New(llm.Config{BaseURL: e.llm.BaseURL(), APIKey: "sk-test"})
		require.NoError(t, err)
		var input strings.Builder
		for _, d := range []string{"a.com", "b.com"} {
			line, err := client.BatchLine(d, classifier.CompletionRequest{Model: "test-model", User: "Domain: " + d})
			require.NoError(t, err)
			input.Write(line)
			input.WriteByte('\n')
		}
		_, err = client.BatchSubmit(ctx, strings.NewReader(input.String()), id+"/1")
		require.NoError(t, err)

		e.follow(t)
		batches, _ := e.llm.Batches()
		require.Equal(t, 1, batches, "the job took the batch it found")
		require.Equal(t, 1, e.llm.Calls("a.com"))
		now, _ := e.list(t, l)
		require.Equal(t, classifier.StatusCompleted, now.Status)
	})

	t.Run("CancellingTheListCancelsItsRunningBatch", func(t *testing.T) {
		t.Parallel()
		e := setupEconomy(t, byDomain(nil), nil)
		hold := make(chan struct{})
		e.llm.Batch.Hold = hold
		l := e.accept(t, "a.com", "b.com")
		e.stage(t)
		job := rivertest.RequireInsertedTx[*riverpgxv5.Driver](ctx, t, e.tx, &jobs.BatchArgs{}, nil).JobRow
		for range 3 { // submit, validating → in_progress, held
			res, err := e.batch.WorkJob(ctx, t, e.tx, job)
			require.NoError(t, err)
			require.Equal(t, rivertype.JobStateScheduled, res.Job.State)
			job = res.Job
		}
		require.Equal(t, []string{"in_progress"}, e.llm.BatchStatuses())

		_, ended, err := db.ListCancel(ctx, e.tx, l.ID, "test")
		require.NoError(t, err)
		require.True(t, ended)
		res, err := e.batch.WorkJob(ctx, t, e.tx, job)
		require.NoError(t, err)
		require.Equal(t, rivertype.JobStateCompleted, res.Job.State)
		require.Equal(t, []string{"cancelling"}, e.llm.BatchStatuses(), "the provider was asked to cancel")
		require.Equal(t, 0, e.llm.Total())
		var claims int
		require.NoError(t, e.tx.QueryRow(ctx, `SELECT count(*) FROM domain_claim`).Scan(&claims))
		require.Zero(t, claims, "the batch's claims are given up")
	})

	t.Run("ADomainStagedByOneBatchIsNotAskedAgainByAJob", func(t *testing.T) {
		t.Parallel()
		e := setupEconomy(t, byDomain(nil), nil)
		e.llm.Batch.Hold = make(chan struct{})
		e.accept(t, "shared.com")
		e.stage(t)
		var owner string
		require.NoError(t, e.tx.QueryRow(ctx, `SELECT owner FROM domain_claim WHERE domain = 'shared.com'`).Scan(&owner))
		require.Contains(t, owner, "batch:")
		var expires time.Time
		require.NoError(t, e.tx.QueryRow(ctx, `SELECT expires_at FROM domain_claim WHERE domain = 'shared.com'`).Scan(&expires))
		require.Greater(t, time.Until(expires), 24*time.Hour, "held for the batch's whole window")
	})
}
