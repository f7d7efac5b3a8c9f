package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/httpapi"
	"github.com/domainclass/domainclass/jobs"
	"github.com/domainclass/domainclass/wire"
)

// kept is queue settings with lists kept for retention.
func kept(retention time.Duration) jobs.Settings {
	s := jobs.DefaultSettings()
	s.ListRetention = retention
	return s
}

// domainLines is n made-up domains, one a line.
func domainLines(prefix string, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%s%d.com\n", prefix, i)
	}
	return b.String()
}

func TestListRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("StatusSaysUntilWhenAndAPurgedListIsNotFound", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{queue: kept(48 * time.Hour)})
		r, a := b.upload(t, "text/plain", "acme.com\nbeta.com\n")
		require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
		status := func() (wire.ListStatus, map[string]any) {
			t.Helper()
			r := b.do(t, "GET", "/lists/"+a.ListID, "")
			require.Equal(t, http.StatusOK, r.status, "%s", r.body)
			var s wire.ListStatus
			var raw map[string]any
			require.NoError(t, json.Unmarshal(r.body, &s))
			require.NoError(t, json.Unmarshal(r.body, &raw))
			return s, raw
		}
		_, raw := status()
		require.Contains(t, raw, "expires_at")
		require.Nil(t, raw["expires_at"], "null while the list runs")

		r = b.do(t, "DELETE", "/lists/"+a.ListID, "")
		require.Equal(t, http.StatusOK, r.status)
		var cancelled wire.ListStatus
		require.NoError(t, json.Unmarshal(r.body, &cancelled))
		require.NotNil(t, cancelled.ExpiresAt)
		require.Equal(t, cancelled.CompletedAt.Add(48*time.Hour), *cancelled.ExpiresAt, "LIST_RETENTION after it ended")
		s, _ := status()
		require.Equal(t, cancelled.ExpiresAt, s.ExpiresAt)

		// Past its date, the list is purged; until the purge, it is all there.
		_, err := b.db.Pool.Exec(ctx, `UPDATE list SET completed_at = completed_at - interval '49 hours'`)
		require.NoError(t, err)
		r = b.do(t, "GET", "/lists/"+a.ListID+"/results", "")
		require.Equal(t, http.StatusOK, r.status)
		require.Equal(t, 3, strings.Count(string(r.body), "\n"), "the header and both rows: %s", r.body)
		_, err = (&jobs.PurgeWorker{DB: b.db.Pool, Logger: slog.New(slog.DiscardHandler), JobRetention: 30 * 24 * time.Hour}).Purge(ctx)
		require.NoError(t, err)
		for _, req := range [][2]string{{"GET", ""}, {"GET", "/results"}, {"DELETE", ""}} {
			requireProblem(t, b.do(t, req[0], "/lists/"+a.ListID+req[1], ""), http.StatusNotFound, "not-found")
		}
	})

	t.Run("StoredRowsAreCappedPerCaller", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{limits: httpapi.CallerLimits{RatePerMinute: 1000, MaxQueuedDomains: 1000, MaxStoredRows: 25,
			MaxActiveLists: 10}, queue: kept(48 * time.Hour)})
		var first wire.ListAccepted
		for i := range 2 {
			r, a := b.upload(t, "text/plain", domainLines(fmt.Sprint("a", i), 10))
			require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
			first = a
		}
		before := b.listCounts(t)
		p := requireProblem(t, b.do(t, "POST", "/lists", domainLines("c", 10), "Content-Type", "text/plain"),
			http.StatusTooManyRequests, "too-many-stored-rows")
		require.Contains(t, p.Detail, "20 rows")
		require.Contains(t, p.Detail, "25")
		require.Equal(t, before, b.listCounts(t), "nothing written")

		// Once a list has ended, the refusal says when its rows stop counting.
		r := b.do(t, "DELETE", "/lists/"+first.ListID, "")
		require.Equal(t, http.StatusOK, r.status)
		var ended wire.ListStatus
		require.NoError(t, json.Unmarshal(r.body, &ended))
		r = b.do(t, "POST", "/lists", domainLines("c", 10), "Content-Type", "text/plain")
		p = requireProblem(t, r, http.StatusTooManyRequests, "too-many-stored-rows")
		require.Contains(t, p.Detail, ended.ExpiresAt.UTC().Format(time.RFC3339))
		retryAfter, err := strconv.Atoi(r.header.Get("Retry-After"))
		require.NoError(t, err)
		require.InDelta(t, time.Until(*ended.ExpiresAt).Seconds(), retryAfter, 5, "until then")

		r, _ = b.upload(t, "text/plain", domainLines("d", 5))
		require.Equal(t, http.StatusAccepted, r.status, "up to the cap: %s", r.body)
		requireProblem(t, b.do(t, "POST", "/lists", "e.com", "Content-Type", "text/plain"),
			http.StatusTooManyRequests, "too-many-stored-rows")
		other, _ := b.upload(t, "text/plain", domainLines("b", 10), "Authorization", "Bearer "+b.keyB)
		require.Equal(t, http.StatusAccepted, other.status, "another caller has its own cap")
		requireProblem(t, b.do(t, "POST", "/lists", domainLines("f", 26), "Content-Type", "text/plain",
			"Authorization", "Bearer "+b.keyB), http.StatusRequestEntityTooLarge, "list-too-large")
	})

	t.Run("AKeyHasItsOwnCap", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		key := createKey(t, b.db, "small", db.APIKey{MaxStoredRows: 5})
		p := requireProblem(t, b.do(t, "POST", "/lists", domainLines("a", 6), "Content-Type", "text/plain",
			"Authorization", "Bearer "+key), http.StatusRequestEntityTooLarge, "list-too-large")
		require.Contains(t, p.Detail, "5")
		r, _ := b.upload(t, "text/plain", domainLines("a", 5), "Authorization", "Bearer "+key)
		require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
		r, _ = b.upload(t, "text/plain", domainLines("a", 6))
		require.Equal(t, http.StatusAccepted, r.status, "the default cap for the others")
	})

	t.Run("TheCapIsExactUnderConcurrentUploads", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{limits: httpapi.CallerLimits{RatePerMinute: 1000, MaxQueuedDomains: 1000, MaxStoredRows: 25,
			MaxActiveLists: 20}})
		var (
			wg       sync.WaitGroup
			mu       sync.Mutex
			statuses = map[int]int{}
		)
		for i := range 10 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequest("POST", b.url+"/lists", strings.NewReader(domainLines(fmt.Sprint("p", i), 10)))
				req.Header.Set("Authorization", "Bearer "+b.keyA)
				req.Header.Set("Content-Type", "text/plain")
				resp, err := http.DefaultClient.Do(req)
				code := 0
				if err == nil {
					code = resp.StatusCode
					resp.Body.Close()
				}
				mu.Lock()
				statuses[code]++
				mu.Unlock()
			}()
		}
		wg.Wait()
		require.Equal(t, map[int]int{http.StatusAccepted: 2, http.StatusTooManyRequests: 8}, statuses)
		require.Equal(t, 20, b.listCounts(t)["list_row"])
	})
}
