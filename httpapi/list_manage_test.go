package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/httpapi"
	"github.com/domainclass/domainclass/jobs"
	"github.com/domainclass/domainclass/wire"
)

// retried reads the answer to POST /lists/{id}/retry.
func retried(t *testing.T, r response) wire.ListRetried {
	t.Helper()
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var out wire.ListRetried
	require.NoError(t, json.Unmarshal(r.body, &out))
	return out
}

// rowStatuses returns each row's status and error, in row order.
func (b *testBundle) rowStatuses(t *testing.T, id string) []string {
	t.Helper()
	rows, err := b.db.Pool.Query(context.Background(),
		`SELECT row, status, coalesce(error, '') FROM list_row WHERE list_id = $1 ORDER BY row`, id)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var (
			n             int
			status, error string
		)
		require.NoError(t, rows.Scan(&n, &status, &error))
		out = append(out, fmt.Sprintf("%d %s %s", n, status, error))
	}
	require.NoError(t, rows.Err())
	return out
}

func TestListRetry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	finish := func(t *testing.T, b *testBundle, id string, row int, domain string, status classifier.Status) {
		t.Helper()
		r := classifier.Result{Domain: domain, Classifier: "cpg", Status: status, ClassifiedAt: at}
		if status == classifier.StatusCompleted {
			r.Answer, r.Confidence, r.Reasoning, r.Source = true, 5, "Snacks.", classifier.SourceLLM
		} else {
			r.Error = "gave up after 8 attempts: error asking the model about " + domain + ": 503"
		}
		_, err := db.ListRowFinish(ctx, b.db.Pool, uuid.MustParse(id), row, r, "o")
		require.NoError(t, err)
	}
	// A list of 6 rows in chunks of 2: acme (COMPLETED, and its duplicate
	// in row 5), bad (FAILED), localhost (REJECTED), slow (PENDING), bad2
	// (FAILED).
	newList := func(t *testing.T, b *testBundle) string {
		t.Helper()
		r, a := b.upload(t, "text/plain", "acme.com\nbad.com\nlocalhost\nslow.com\nwww.acme.com\nbad2.com\n")
		require.Equal(t, http.StatusAccepted, r.status)
		finish(t, b, a.ListID, 1, "acme.com", classifier.StatusCompleted)
		finish(t, b, a.ListID, 2, "bad.com", classifier.StatusFailed)
		finish(t, b, a.ListID, 6, "bad2.com", classifier.StatusFailed)
		// No worker runs here: the upload's chunk ends as if one had.
		_, err := b.db.Pool.Exec(ctx, `UPDATE river_job SET state = 'completed', finalized_at = now() WHERE args->>'list_id' = $1`, a.ListID)
		require.NoError(t, err)
		return a.ListID
	}
	lists := setupOpts{queue: chunking(2, 2)}

	t.Run("ACompletedListsFailedRowsAreQueuedAgainOnceAndCounted", func(t *testing.T) {
		t.Parallel()
		b := setup(t, lists)
		id := newList(t, b)
		finish(t, b, id, 4, "slow.com", classifier.StatusCompleted)
		_, ended, err := db.ListComplete(ctx, b.db.Pool, uuid.MustParse(id))
		require.NoError(t, err)
		require.True(t, ended)

		out := retried(t, b.do(t, "POST", "/lists/"+id+"/retry", ""))
		require.Equal(t, 2, out.Requeued, "the two FAILED rows")
		require.Equal(t, classifier.StatusRunning, out.List.Status)
		require.Nil(t, out.List.CompletedAt)
		require.Equal(t, wire.ListProgress{Done: 4, Total: 6, Completed: 3, Rejected: 1, LLM: 3}, out.List.Progress,
			"done and failed go down by the rows queued again")
		require.Equal(t, []string{"1 COMPLETED ", "2 PENDING ", "3 REJECTED " + classifier.ReasonLocalhost, "4 COMPLETED ",
			"5 COMPLETED ", "6 PENDING "}, b.rowStatuses(t, id))
		// Chunks of a new pass, fed from the first with rows to answer:
		// chunk 0 (row 2), then chunk 2 (row 6); chunk 1 has none.
		require.ElementsMatch(t, []jobs.ClassifyListArgs{{ListID: id, Chunk: 0}, {ListID: id, Chunk: 0, Pass: 1},
			{ListID: id, Chunk: 2, Pass: 1}}, b.chunkJobs(t, id))

		again := retried(t, b.do(t, "POST", "/lists/"+id+"/retry", ""))
		require.Zero(t, again.Requeued, "a second retry while the first runs changes nothing")
		require.Equal(t, out.List, again.List)
		require.Len(t, b.chunkJobs(t, id), 3)
		status := b.do(t, "GET", "/lists/"+id, "")
		var s wire.ListStatus
		require.NoError(t, json.Unmarshal(status.body, &s))
		require.Equal(t, out.List, s)
	})

	t.Run("AFailedListsNeverAnsweredRowsAreQueuedToo", func(t *testing.T) {
		t.Parallel()
		b := setup(t, lists)
		id := newList(t, b)
		_, ended, err := db.ListFail(ctx, b.db.Pool, uuid.MustParse(id), "the service could not go on")
		require.NoError(t, err)
		require.True(t, ended)

		out := retried(t, b.do(t, "POST", "/lists/"+id+"/retry", ""))
		require.Equal(t, 3, out.Requeued, "two FAILED rows and the one never answered")
		require.Equal(t, classifier.StatusRunning, out.List.Status)
		require.Empty(t, out.List.Error)
		require.Equal(t, wire.ListProgress{Done: 3, Total: 6, Completed: 2, Rejected: 1, LLM: 2}, out.List.Progress)
		require.ElementsMatch(t, []jobs.ClassifyListArgs{{ListID: id, Chunk: 0}, {ListID: id, Chunk: 0, Pass: 1},
			{ListID: id, Chunk: 1, Pass: 1}}, b.chunkJobs(t, id))
	})

	t.Run("ARunningOrAnsweredListIsLeftAsItIs", func(t *testing.T) {
		t.Parallel()
		b := setup(t, lists)
		running := newList(t, b)
		before := b.rowStatuses(t, running)
		out := retried(t, b.do(t, "POST", "/lists/"+running+"/retry", ""))
		require.Zero(t, out.Requeued, "a list still running is retried once it has ended")
		require.Equal(t, classifier.StatusPending, out.List.Status)
		require.Equal(t, before, b.rowStatuses(t, running))
		require.Len(t, b.chunkJobs(t, running), 1, "nothing queued")

		r, a := b.upload(t, "text/plain", "good.com\n")
		require.Equal(t, http.StatusAccepted, r.status)
		finish(t, b, a.ListID, 1, "good.com", classifier.StatusCompleted)
		_, _, err := db.ListComplete(ctx, b.db.Pool, uuid.MustParse(a.ListID))
		require.NoError(t, err)
		out = retried(t, b.do(t, "POST", "/lists/"+a.ListID+"/retry", ""))
		require.Zero(t, out.Requeued)
		require.Equal(t, classifier.StatusCompleted, out.List.Status, "nothing failed: it stays COMPLETED")
	})

	t.Run("ACancelledListIsNotResumed", func(t *testing.T) {
		t.Parallel()
		b := setup(t, lists)
		id := newList(t, b)
		require.Equal(t, http.StatusOK, b.do(t, "DELETE", "/lists/"+id, "").status)
		before := b.rowStatuses(t, id)
		requireProblem(t, b.do(t, "POST", "/lists/"+id+"/retry", ""), http.StatusConflict, "list-cancelled")
		require.Equal(t, before, b.rowStatuses(t, id))
	})

	t.Run("AnotherCallersListIsNotFound", func(t *testing.T) {
		t.Parallel()
		b := setup(t, lists)
		id := newList(t, b)
		_, _, err := db.ListFail(ctx, b.db.Pool, uuid.MustParse(id), "x")
		require.NoError(t, err)
		requireProblem(t, b.do(t, "POST", "/lists/"+id+"/retry", "", "Authorization", "Bearer "+b.keyB), 404, "not-found")
		requireProblem(t, b.do(t, "POST", "/lists/"+uuid.NewString()+"/retry", ""), 404, "not-found")
		requireProblem(t, b.do(t, "POST", "/lists/nope/retry", ""), 400, "invalid-list-id")
		require.Equal(t, classifier.StatusFailed, mustList(t, b, id).Status)
	})

	t.Run("RetryingCountsTowardTheCallersActiveLists", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{queue: chunking(2, 2), limits: httpapi.CallerLimits{MaxActiveLists: 1}})
		id := newList(t, b)
		_, _, err := db.ListFail(ctx, b.db.Pool, uuid.MustParse(id), "x")
		require.NoError(t, err)
		r, _ := b.upload(t, "text/plain", "other.com\n")
		require.Equal(t, http.StatusAccepted, r.status)
		limited := b.do(t, "POST", "/lists/"+id+"/retry", "")
		requireProblem(t, limited, http.StatusTooManyRequests, "too-many-lists")
		require.Equal(t, "60", limited.header.Get("Retry-After"))
		require.Equal(t, classifier.StatusFailed, mustList(t, b, id).Status, "nothing changed")
	})
}

func mustList(t *testing.T, b *testBundle, id string) *classifier.List {
	t.Helper()
	l, err := db.ListGet(context.Background(), b.db.Pool, uuid.MustParse(id))
	require.NoError(t, err)
	return l
}

func TestListIndex(t *testing.T) {
	t.Parallel()

	t.Run("ACallersListsNewestFirstAPageAtATime", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{limits: httpapi.CallerLimits{MaxActiveLists: 10}})
		var ids []string
		for i := range 5 {
			r, a := b.upload(t, "text/plain", fmt.Sprintf("brand%d.com\n", i))
			require.Equal(t, http.StatusAccepted, r.status)
			ids = append([]string{a.ListID}, ids...) // newest first
		}
		other, _ := b.upload(t, "text/plain", "theirs.com\n", "Authorization", "Bearer "+b.keyB)
		require.Equal(t, http.StatusAccepted, other.status)

		var got []string
		cursor := ""
		for page := 0; ; page++ {
			require.Less(t, page, 5)
			path := "/lists?limit=2"
			if cursor != "" {
				path += "&cursor=" + url.QueryEscape(cursor)
			}
			r := b.do(t, "GET", path, "")
			require.Equal(t, http.StatusOK, r.status, "%s", r.body)
			var idx wire.ListIndex
			require.NoError(t, json.Unmarshal(r.body, &idx))
			require.LessOrEqual(t, len(idx.Lists), 2)
			for _, l := range idx.Lists {
				require.Equal(t, classifier.StatusPending, l.Status)
				require.Equal(t, 1, l.Rows)
				got = append(got, l.ListID)
			}
			if idx.NextCursor == "" {
				break
			}
			cursor = idx.NextCursor
		}
		require.Equal(t, ids, got, "every list of the caller's, newest first, once; none of another caller's")

		r := b.do(t, "GET", "/lists", "")
		var all wire.ListIndex
		require.NoError(t, json.Unmarshal(r.body, &all))
		require.Len(t, all.Lists, 5)
		require.Empty(t, all.NextCursor)

		empty := b.do(t, "GET", "/lists", "", "Authorization", "Bearer "+createKey(t, b.db, "team-c", db.APIKey{}))
		require.Equal(t, http.StatusOK, empty.status)
		require.JSONEq(t, `{"lists": []}`, string(empty.body))
	})

	t.Run("RejectsABadLimitOrCursor", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		for _, q := range []string{"limit=0", "limit=101", "limit=x", "cursor=nope", "cursor=" + url.QueryEscape("MjAyNg")} {
			requireProblem(t, b.do(t, "GET", "/lists?"+q, ""), http.StatusBadRequest, "invalid-query")
		}
		requireProblem(t, b.do(t, "GET", "/lists", "", "Authorization", ""), http.StatusUnauthorized, "unauthorized")
	})
}
