package jobs_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/classifier/llm/llmtest"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/jobs"
)

// TestOverride_SetWhileAJobRuns: an operator sets an override while a job
// is being answered, one domain at a time. The override answers the next
// of the job's domains to be answered, and a model answer that was already
// on its way never replaces it.
func TestOverride_SetWhileAJobRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	oneAtATime := setupOpts{settings: func(s *jobs.Settings) { s.DomainConcurrency = 1 }}
	// set is what the model's handler does when a call about domain
	// arrives: set an override, through the pool, as `override set` does.
	type set struct{ when, domain string }
	start := func(t *testing.T, s set) *testBundle {
		var pool atomic.Pointer[db.DB]
		b := setup(t, func(r llmtest.Request) llmtest.Reply {
			if r.Domain == s.when && r.Call == 1 {
				_, _, err := db.OverrideSet(ctx, pool.Load().Pool, []classifier.Override{{Classifier: "cpg", Domain: s.domain,
					Answer: false, Confidence: 5, Note: "A software firm since 2024.", SetBy: "ops"}})
				assert.NoError(t, err)
			}
			return llmtest.Answer(true, 4, "Sells packaged goods.")
		}, oneAtATime)
		pool.Store(b.db)
		return b
	}

	t.Run("TheNextDomainAnsweredGetsIt", func(t *testing.T) {
		t.Parallel()
		b := start(t, set{when: "first.com", domain: "later.com"})
		job := b.waitJob(t, b.submit(t, "first.com", "later.com"), classifier.StatusCompleted)

		require.Equal(t, classifier.SourceLLM, resultOf(job, "first.com").Source)
		later := resultOf(job, "later.com")
		require.Equal(t, classifier.SourceOverride, later.Source, "set while the job ran, the override answers its next domain")
		require.False(t, later.Answer)
		require.Equal(t, "Set by ops: A software firm since 2024.", later.Reasoning)
		require.Zero(t, b.llm.Calls("later.com"), "the model is never asked about it")
		require.Equal(t, jobs.Counts{Override: 1, LLM: 1}, output(t, b.riverJob(t, job)).Counts)
	})

	t.Run("AModelAnswerInFlightNeverReplacesIt", func(t *testing.T) {
		t.Parallel()
		b := start(t, set{when: "inflight.com", domain: "inflight.com"})
		first := b.waitJob(t, b.submit(t, "inflight.com"), classifier.StatusCompleted)
		require.Equal(t, classifier.SourceLLM, resultOf(first, "inflight.com").Source,
			"the call had started before the override: this job gets the model's answer")

		o, err := db.OverrideGet(ctx, b.db.Pool, "cpg", "inflight.com")
		require.NoError(t, err)
		require.Equal(t, []any{false, 5, "ops", "A software firm since 2024."}, []any{o.Answer, o.Confidence, o.SetBy, o.Note},
			"the override is as the operator set it")
		stored, err := db.ResultGet(ctx, b.db.Pool, "cpg", "inflight.com")
		require.NoError(t, err)
		require.True(t, stored.Answer, "the model's answer is stored apart")

		second := b.waitJob(t, b.submit(t, "inflight.com"), classifier.StatusCompleted)
		got := resultOf(second, "inflight.com")
		require.Equal(t, classifier.SourceOverride, got.Source, "the override wins on the next job, over the fresh cached answer")
		require.False(t, got.Answer)
		require.Equal(t, o.ProvenanceID, got.ProvenanceID)
		require.Equal(t, 1, b.llm.Calls("inflight.com"))
	})
}
