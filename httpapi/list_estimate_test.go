package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/httpapi"
	"github.com/domainclass/domainclass/wire"
)

// TestListEstimateTime: the dry run's time follows what this deployment
// measurably answers, the CPU every row costs, and the lists it would
// share the capacity with; not the model's latency alone (issue 27: "about
// 11m" for a list that took hours).
func TestListEstimateTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// The bounds of one worker process say 8 calls of 2 s at once: 4 a
	// second. The deployment measurably answered 2 a second.
	config := setupOpts{estimate: httpapi.Estimator{ModelConcurrency: 8, ModelRatePerMinute: 60_000, DefaultCallSeconds: 2, Cores: 2},
		limits: httpapi.CallerLimits{MaxActiveLists: 10}}
	dryRun := func(t *testing.T, b *testBundle, body string) wire.ListEstimate {
		t.Helper()
		r := b.do(t, "POST", "/lists?dry_run=true", body, "Content-Type", "text/plain")
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		var est wire.ListEstimate
		require.NoError(t, json.Unmarshal(r.body, &est))
		return est
	}
	domains := func(prefix string, n int) string {
		var s strings.Builder
		for i := range n {
			fmt.Fprintf(&s, "%s%05d.com\n", prefix, i)
		}
		return s.String()
	}
	// seedThroughput writes what a list that ran for the last 10 minutes
	// left behind: model answers at perSecond, 2 s each.
	seedThroughput := func(t *testing.T, b *testBundle, perSecond float64) {
		t.Helper()
		r, a := b.upload(t, "text/plain", "seed.com\n")
		require.Equal(t, http.StatusAccepted, r.status)
		_, err := b.db.Pool.Exec(ctx, `UPDATE list SET status = 'COMPLETED', started_at = now() - interval '10 minutes',
			completed_at = now() WHERE id = $1`, a.ListID)
		require.NoError(t, err)
		n := int(perSecond * 600)
		_, err = b.db.Pool.Exec(ctx, `
			INSERT INTO result (domain, classifier, status, answer, confidence, reasoning, classified_at, latency_ms, prompt_tokens, completion_tokens)
			SELECT 'answered' || i || '.com', 'cpg', 'COMPLETED', true, 4, 'x', now() - make_interval(secs => 600.0 * i / $1), 2000, 800, 60
			FROM generate_series(1, $1) i`, n)
		require.NoError(t, err)
	}
	within := func(t *testing.T, want, got float64, msg string) {
		t.Helper()
		require.InDelta(t, want, got, want*0.1, "%s: want about %.1f s, got %.1f s", msg, want, got)
	}

	t.Run("FromTheMeasuredThroughput", func(t *testing.T) {
		t.Parallel()
		b := setup(t, config)
		seedThroughput(t, b, 2)
		est := dryRun(t, b, domains("fresh", 200))
		require.Equal(t, 200, est.Fresh)
		within(t, 100, est.EstimatedSeconds, "200 fresh domains at the measured 2 a second")
		require.True(t, est.Basis.Measured)
		require.InDelta(t, 2, est.Basis.ModelAnswersPerSecond, 0.2)
		require.Zero(t, est.Basis.ListsSharing)
	})

	t.Run("SharedWithTheListsRunning", func(t *testing.T) {
		t.Parallel()
		b := setup(t, config)
		seedThroughput(t, b, 2)
		// Another caller's list with 1,000 rows to answer, and a small one.
		other, a := b.upload(t, "text/plain", domains("theirs", 1000), "Authorization", "Bearer "+b.keyB)
		require.Equal(t, http.StatusAccepted, other.status)
		_, err := b.db.Pool.Exec(ctx, `UPDATE list SET status = 'RUNNING', started_at = now() WHERE id = $1`, uuid.MustParse(a.ListID))
		require.NoError(t, err)
		small, _ := b.upload(t, "text/plain", domains("small", 50))
		require.Equal(t, http.StatusAccepted, small.status)

		est := dryRun(t, b, domains("fresh", 200))
		// Fair share: 200 of ours beside 200 of the big list's and the small
		// list's 50, at 2 a second.
		within(t, (200+200+50)/2.0, est.EstimatedSeconds, "shared with two lists")
		require.Equal(t, 2, est.Basis.ListsSharing)
	})

	cached := func(t *testing.T, b *testBundle, n int) {
		t.Helper()
		_, err := b.db.Pool.Exec(ctx, `
			INSERT INTO result (domain, classifier, status, answer, confidence, reasoning, classified_at)
			SELECT 'cached' || lpad(i::text, 5, '0') || '.com', 'cpg', 'COMPLETED', true, 5, 'x', now()
			FROM generate_series(0, $1 - 1) i`, n)
		require.NoError(t, err)
	}

	// Issue 37: rows answered by overrides and the cache go as sets, the
	// whole list by its first chunk: about 50 µs of CPU a row, 40,000 a
	// second on two cores (4 ms a row, 500 a second, one at a time before).
	t.Run("CachedRowsAtTheSetsRate", func(t *testing.T) {
		t.Parallel()
		b := setup(t, config)
		cached(t, b, 4000)
		est := dryRun(t, b, domains("cached", 4000))
		require.Equal(t, 4000, est.Cached)
		require.Equal(t, 0.1, est.EstimatedSeconds, "4,000 rows at 40,000 a second")
		require.InDelta(t, 40_000, est.Basis.RowsPerSecond, 1)
		require.False(t, est.Basis.RowsMeasured)
		require.Equal(t, "rows", est.Basis.Bound)
		require.Contains(t, est.Basis.Summary, "rows answered by overrides and the cache go at 40000 a second")
	})

	// A fresh domain's rows still cost its look-ups and store, one domain
	// at a time: with a model that keeps up, they bound the list.
	t.Run("NeverFasterThanTheFreshRowsCPU", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{estimate: httpapi.Estimator{ModelConcurrency: 1000, ModelRatePerMinute: 6_000_000,
			DefaultCallSeconds: 0.01, Cores: 2}})
		est := dryRun(t, b, domains("fresh", 2000))
		within(t, 4, est.EstimatedSeconds, "2,000 fresh rows at 4 ms of CPU each on 2 cores")
		require.Equal(t, "rows", est.Basis.Bound)
	})

	// Issue 36: cached rows were priced at a fixed 250 a second, 4× slower
	// than a new user's deployment answered them. A list of recent hours
	// answered without the model says what the deployment does.
	t.Run("CachedRowsAtTheMeasuredRate", func(t *testing.T) {
		t.Parallel()
		b := setup(t, config)
		r, a := b.upload(t, "text/plain", "seed.com\n")
		require.Equal(t, http.StatusAccepted, r.status)
		_, err := b.db.Pool.Exec(ctx, `UPDATE list SET status = 'COMPLETED', rows = 6000, domains = 6000, done = 6000,
			completed = 6000, cache = 6000, llm = 0, started_at = now() - interval '70 seconds', completed_at = now() - interval '60 seconds'
			WHERE id = $1`, a.ListID)
		require.NoError(t, err)
		cached(t, b, 4000)
		est := dryRun(t, b, domains("cached", 4000))
		within(t, 4000/600.0, est.EstimatedSeconds, "4,000 rows at the 600 a second measured")
		require.True(t, est.Basis.RowsMeasured)
		require.InDelta(t, 600, est.Basis.RowsPerSecond, 1)
	})

	// Issue 36: a list that stalled (the model down, no call in flight) for
	// half the window made the measured rate half what the model answers.
	t.Run("StallsAreNotMeasured", func(t *testing.T) {
		t.Parallel()
		b := setup(t, config)
		r, a := b.upload(t, "text/plain", "seed.com\n")
		require.Equal(t, http.StatusAccepted, r.status)
		_, err := b.db.Pool.Exec(ctx, `UPDATE list SET status = 'COMPLETED', started_at = now() - interval '10 minutes',
			completed_at = now() WHERE id = $1`, a.ListID)
		require.NoError(t, err)
		// 2 answers a second in the first 5 minutes, then none for 5.
		_, err = b.db.Pool.Exec(ctx, `
			INSERT INTO result (domain, classifier, status, answer, confidence, reasoning, classified_at, latency_ms, prompt_tokens, completion_tokens)
			SELECT 'answered' || i || '.com', 'cpg', 'COMPLETED', true, 4, 'x', now() - interval '5 minutes' - make_interval(secs => 300.0 * i / 600), 2000, 800, 60
			FROM generate_series(1, 600) i`)
		require.NoError(t, err)
		est := dryRun(t, b, domains("fresh", 200))
		require.True(t, est.Basis.Measured)
		require.InDelta(t, 2, est.Basis.ModelAnswersPerSecond, 0.2, "the answers over the time they were answered in")
		within(t, 100, est.EstimatedSeconds, "200 fresh domains at the measured 2 a second")
	})

	t.Run("WithoutMeasurementsFromTheConfiguredBounds", func(t *testing.T) {
		t.Parallel()
		b := setup(t, config)
		est := dryRun(t, b, domains("fresh", 200))
		within(t, 50, est.EstimatedSeconds, "8 calls of 2 s at once, 4 a second")
		require.False(t, est.Basis.Measured)
	})

	// Issue 36: with no call measured the estimate assumed 2.5 s a call,
	// ten times a new user's, and did not say it assumed anything; nor
	// which setting bounded the time.
	t.Run("NoCallMeasuredYetSaysWhatItAssumes", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{estimate: httpapi.Estimator{ModelConcurrency: 8, ModelRatePerMinute: 60_000, Cores: 2}})
		est := dryRun(t, b, domains("fresh", 200))
		within(t, 25, est.EstimatedSeconds, "8 calls of the 1 s prior at once, 8 a second")
		require.Zero(t, est.Basis.CallsSampled)
		require.Equal(t, 1.0, est.Basis.SecondsPerCall)
		require.Equal(t, "concurrency", est.Basis.Bound)
		require.Contains(t, est.Basis.Summary, "no model call measured yet; assuming 1 s a call")
		require.Contains(t, est.Basis.Summary, "LLM_MAX_CONCURRENCY=8")
	})

	t.Run("SaysWhichSettingBoundsIt", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{estimate: httpapi.Estimator{ModelConcurrency: 32, ModelRatePerMinute: 300, Cores: 2}})
		est := dryRun(t, b, domains("fresh", 600))
		within(t, 120, est.EstimatedSeconds, "LLM_RATE_PER_MINUTE=300: 5 calls a second, not the 32 in flight")
		require.Equal(t, "rate", est.Basis.Bound)
		require.Contains(t, est.Basis.Summary, "LLM_RATE_PER_MINUTE=300")
		require.Contains(t, est.Basis.Summary, "raise")
	})
}
