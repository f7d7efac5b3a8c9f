package jobs_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

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
)

// faultyProvider stands in front of the fake provider, on loopback, and
// answers the requests whose method and path start with route with status
// (while it is not 0), as a provider in trouble does; the rest go through.
type faultyProvider struct {
	route  string
	status atomic.Int32
	url    string
}

func newFaultyProvider(t *testing.T, model *llmtest.Server, route string, status int) *faultyProvider {
	t.Helper()
	target, err := url.Parse(model.URL)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	f := &faultyProvider{route: route}
	f.status.Store(int32(status))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code := int(f.status.Load())
		if code == 0 || !strings.HasPrefix(r.Method+" "+r.URL.Path, f.route) {
			proxy.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"error":{"message":"test fault %d","type":"invalid_request_error","code":"test_fault"}}`, code)
	}))
	t.Cleanup(srv.Close)
	f.url = srv.URL + "/v1"
	return f
}

// client is a Batch API client that asks through the fault.
func (f *faultyProvider) client(t *testing.T) *llm.Client {
	t.Helper()
	c, err := llm.New(llm.Config{BaseURL: f.url, APIKey: "sk-test", Timeout: dbtest.Patience()})
	require.NoError(t, err)
	return c
}

// batchJob is the list's batch job as it is now.
func (e *economyBundle) batchJob(t *testing.T) *rivertype.JobRow {
	t.Helper()
	return rivertest.RequireInsertedTx[*riverpgxv5.Driver](context.Background(), t, e.tx, &jobs.BatchArgs{}, nil).JobRow
}

func (e *economyBundle) requireNoClaims(t *testing.T) {
	t.Helper()
	var claims int
	require.NoError(t, e.tx.QueryRow(context.Background(), `SELECT count(*) FROM domain_claim`).Scan(&claims))
	require.Zero(t, claims, "the batch's claims are given up")
}

// requireRowsFailed checks that the list ended with every row FAILED for
// reason, and that its end is delivered.
func (e *economyBundle) requireRowsFailed(t *testing.T, l *classifier.List, reason string) {
	t.Helper()
	now, rows := e.list(t, l)
	require.Equal(t, classifier.StatusCompleted, now.Status, "every row is final: the list ends")
	require.Equal(t, len(rows), now.Failed)
	for row, r := range rows {
		require.Equal(t, classifier.StatusFailed, r.Result.Status, "row %d", row)
		require.Contains(t, r.Result.Error, reason, "row %d", row)
	}
	e.requireNoClaims(t)
	rivertest.RequireInsertedTx[*riverpgxv5.Driver](context.Background(), t, e.tx, &jobs.WebhookArgs{},
		&rivertest.RequireInsertedOpts{Queue: jobs.QueueWebhook})
}

// TestBatchWorker_Work covers the batch's steps that end it early: no model,
// a refused file, nothing left to send, a cancelled list, a throttled or
// failing provider.
func TestBatchWorker_Work(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("WithoutAModelItsRowsFail", func(t *testing.T) {
		t.Parallel()
		e := setupEconomy(t, byDomain(nil), nil)
		l := e.accept(t, "a.com", "b.com")
		e.stage(t)
		res, err := e.batchWith(nil).WorkJob(ctx, t, e.tx, e.batchJob(t))
		require.NoError(t, err)
		require.Equal(t, rivertype.JobStateCompleted, res.Job.State)
		e.requireRowsFailed(t, l, classifier.ErrNoLLM)
	})

	t.Run("AFileTheProviderRefusesFailsItsRowsAtOnce", func(t *testing.T) {
		t.Parallel()
		e := setupEconomy(t, byDomain(nil), nil)
		f := newFaultyProvider(t, e.llm, "POST /v1/files", http.StatusBadRequest)
		l := e.accept(t, "a.com", "b.com")
		e.stage(t)
		res, err := e.batchWith(f.client(t)).WorkJob(ctx, t, e.tx, e.batchJob(t))
		require.NoError(t, err)
		require.Equal(t, rivertype.JobStateCompleted, res.Job.State, "no retry: the provider will not take this file")
		batches, _ := e.llm.Batches()
		require.Zero(t, batches)
		require.Zero(t, e.llm.Total())
		e.requireRowsFailed(t, l, "the provider refused the batch")
	})

	t.Run("RowsAnsweredMeanwhileAreNotSent", func(t *testing.T) {
		t.Parallel()
		e := setupEconomy(t, byDomain(nil), nil)
		l := e.accept(t, "a.com", "b.com")
		e.stage(t)
		var batchID string
		require.NoError(t, e.tx.QueryRow(ctx, `SELECT id::text FROM llm_batch`).Scan(&batchID))
		for row, d := range []string{"a.com", "b.com"} {
			_, err := db.ListRowFinish(ctx, e.tx, l.ID, row+1, classifier.Result{Domain: d, Classifier: "cpg",
				Status: classifier.StatusCompleted, Source: classifier.SourceOverride, Confidence: 5}, "batch:"+batchID)
			require.NoError(t, err)
		}
		require.Equal(t, []rivertype.JobState{"completed"}, e.follow(t))
		batches, _ := e.llm.Batches()
		require.Zero(t, batches, "nothing left to ask: no batch")
		now, _ := e.list(t, l)
		require.Equal(t, classifier.StatusCompleted, now.Status)
		require.Equal(t, 2, now.Completed)
		e.requireNoClaims(t)
	})

	t.Run("CancellingTheListBeforeItsBatchIsSentSendsNothing", func(t *testing.T) {
		t.Parallel()
		e := setupEconomy(t, byDomain(nil), nil)
		l := e.accept(t, "a.com", "b.com")
		e.stage(t)
		_, ended, err := db.ListCancel(ctx, e.tx, l.ID, "test")
		require.NoError(t, err)
		require.True(t, ended)
		require.Equal(t, []rivertype.JobState{"completed"}, e.follow(t))
		batches, _ := e.llm.Batches()
		require.Zero(t, batches)
		require.Empty(t, e.llm.BatchStatuses(), "nothing to cancel at the provider")
		e.requireNoClaims(t)
	})

	t.Run("AThrottledProviderIsWaitedForWithoutAnAttempt", func(t *testing.T) {
		t.Parallel()
		e := setupEconomy(t, byDomain(nil), nil)
		f := newFaultyProvider(t, e.llm, "GET /v1/batches/", http.StatusTooManyRequests)
		l := e.accept(t, "a.com", "b.com")
		e.stage(t)
		res, err := e.batch.WorkJob(ctx, t, e.tx, e.batchJob(t)) // submitted
		require.NoError(t, err)
		require.Equal(t, rivertype.JobStateScheduled, res.Job.State)
		res, err = e.batchWith(f.client(t)).WorkJob(ctx, t, e.tx, res.Job)
		require.NoError(t, err)
		require.Equal(t, rivertype.JobStateScheduled, res.Job.State, "snoozed")
		require.Empty(t, res.Job.Errors, "a throttle is no failure")
		require.Equal(t, []string{"validating"}, e.llm.BatchStatuses(), "the provider was not read")

		states := e.follow(t)
		require.Equal(t, rivertype.JobStateCompleted, states[len(states)-1])
		now, _ := e.list(t, l)
		require.Equal(t, classifier.StatusCompleted, now.Status)
		require.Equal(t, 2, now.Completed)
	})

	t.Run("TheLastAttemptGivesItsRowsUp", func(t *testing.T) {
		t.Parallel()
		e := setupEconomy(t, byDomain(nil), nil)
		f := newFaultyProvider(t, e.llm, "GET /v1/batches/", http.StatusInternalServerError)
		l := e.accept(t, "a.com", "b.com")
		e.stage(t)
		res, err := e.batch.WorkJob(ctx, t, e.tx, e.batchJob(t)) // submitted
		require.NoError(t, err)
		require.Equal(t, rivertype.JobStateScheduled, res.Job.State)

		job := res.Job
		res, _ = e.batchWith(f.client(t)).WorkJob(ctx, t, e.tx, job)
		require.Contains(t, []rivertype.JobState{rivertype.JobStateRetryable, rivertype.JobStateAvailable}, res.Job.State,
			"an attempt left: River retries")
		require.Len(t, res.Job.Errors, 1)
		now, _ := e.list(t, l)
		require.Equal(t, 0, now.Failed)

		job = res.Job
		job.Attempt = job.MaxAttempts - 1
		res, _ = e.batchWith(f.client(t)).WorkJob(ctx, t, e.tx, job)
		require.Equal(t, rivertype.JobStateDiscarded, res.Job.State)
		e.requireRowsFailed(t, l, fmt.Sprintf("gave up after %d attempts", job.MaxAttempts))
	})
}
