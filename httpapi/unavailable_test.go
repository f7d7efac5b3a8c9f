package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/db/dbtest"
)

// Every route that touches Postgres answers 503 unavailable, with
// Retry-After, within its bound when it cannot have a connection, instead
// of hanging: the API-key lookup, the jobs' and the lists' routes and
// readiness. Issue 22 saw one GET hang 39 s and get no answer at all.
func TestUnavailable_EveryRouteAnswers503WithinItsBound(t *testing.T) {
	t.Parallel()
	// Nothing here would ever end on its own: the pool stays held, and the
	// silent server's connect timeout is an hour. So a 503 at all proves
	// that the request's own database bound ended it, however slow the
	// machine; the client gives up only after the tests' whole patience.
	const dbTimeout = 300 * time.Millisecond

	for _, tc := range []struct {
		name string
		down func(t *testing.T, b *testBundle)
		db   func(t *testing.T) *db.DB
	}{
		// Every connection of the pool is busy (held here): as when list
		// work or slow uploads hold them all.
		{name: "PoolExhausted", down: func(t *testing.T, b *testBundle) { holdPool(t, b.db.Pool) }},
		// Postgres accepts connections and never answers them (overloaded,
		// or a network that drops its packets): a connection attempt lasts
		// as long as the connect timeout allows.
		{name: "PostgresSilent", db: silentDB},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			opts := setupOpts{dbTimeout: dbTimeout, authTTL: time.Hour} // keyA stays looked up
			if tc.db != nil {
				opts.db = tc.db(t) // every request stops at the key's lookup
			}
			b := setup(t, opts)
			id := uuid.NewString()
			if tc.db == nil {
				// keyA is looked up while the pool is free; keyB is not. On a
				// busy machine the lookup itself may take longer than the
				// short bound: ask again until it is done.
				require.Eventually(t, func() bool {
					return b.do(t, "GET", "/domains/classify/"+id, "").status == http.StatusNotFound
				}, dbtest.Patience(), 50*time.Millisecond, "keyA looked up while the pool is free")
				tc.down(t, b)
			}
			client := &http.Client{Timeout: dbtest.Patience()}
			for _, r := range []struct {
				name, method, path, body string
				header                   []string
			}{
				{"AcceptJob", "POST", "/domains/classify", `{"domains": ["acme.com"]}`, []string{"Content-Type", "application/json"}},
				{"JobStatus", "GET", "/domains/classify/" + id, "", nil},
				{"UploadList", "POST", "/lists", "acme.com\n", []string{"Content-Type", "text/plain"}},
				{"EstimateList", "POST", "/lists?dry_run=true", "acme.com\n", []string{"Content-Type", "text/plain"}},
				{"ListStatus", "GET", "/lists/" + id, "", nil},
				{"ListResults", "GET", "/lists/" + id + "/results", "", nil},
				{"CancelList", "DELETE", "/lists/" + id, "", nil},
				{"ListIndex", "GET", "/lists", "", nil},
				{"RetryList", "POST", "/lists/" + id + "/retry", "", nil},
				{"Readiness", "GET", "/readyz", "", nil},
				{"APIKeyLookup", "GET", "/domains/classify/" + id, "", []string{"Authorization", "Bearer " + b.keyB}},
			} {
				t.Run(r.name, func(t *testing.T) {
					req, err := http.NewRequest(r.method, b.url+r.path, strings.NewReader(r.body))
					require.NoError(t, err)
					req.Header.Set("Authorization", "Bearer "+b.keyA)
					for i := 0; i+1 < len(r.header); i += 2 {
						req.Header.Set(r.header[i], r.header[i+1])
					}
					start := time.Now()
					resp, err := client.Do(req)
					require.NoError(t, err, "%s %s must answer, not hang", r.method, r.path)
					body, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					require.NoError(t, err)
					requireProblem(t, response{status: resp.StatusCode, header: resp.Header, body: body}, http.StatusServiceUnavailable, "unavailable")
					require.Equal(t, "2", resp.Header.Get("Retry-After"))
					t.Logf("%s %s: 503 after %s (its bound: %s)", r.method, r.path, time.Since(start).Round(time.Millisecond), dbTimeout)
				})
			}
		})
	}
}

// holdPool takes every connection of pool until the test ends.
func holdPool(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	for range pool.Config().MaxConns {
		conn, err := pool.Acquire(context.Background())
		require.NoError(t, err)
		t.Cleanup(conn.Release)
	}
	require.Equal(t, pool.Config().MaxConns, pool.Stat().AcquiredConns())
}

// silentDB is a pool pointed at a server that accepts connections and
// never says a word, until the test ends.
func silentDB(t *testing.T) *db.DB {
	t.Helper()
	// An hour to connect: only a request's own bound can end its wait.
	d, err := db.Open(context.Background(), db.Config{URL: "postgres://postgres@" + dbtest.SilentPostgres(t) + "/x?sslmode=disable&connect_timeout=3600"})
	require.NoError(t, err)
	t.Cleanup(d.Close)
	return d
}

// An enqueue that runs out of time is a 503 with Retry-After, like any
// database deadline, not a 500 ("error enqueueing classify job: … context
// deadline exceeded" in issue 27), and writes nothing. Here River's insert
// waits behind a lock on its table until the request's bound.
func TestClassifyCreate_EnqueueDeadlineIs503(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, setupOpts{dbTimeout: 300 * time.Millisecond})
	tx, err := b.db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	_, err = tx.Exec(ctx, `LOCK TABLE river_job IN ACCESS EXCLUSIVE MODE`)
	require.NoError(t, err)

	r := b.do(t, "POST", "/domains/classify", `{"domains": ["acme.com"]}`)
	requireProblem(t, r, http.StatusServiceUnavailable, "unavailable")
	require.Equal(t, "2", r.header.Get("Retry-After"))
	require.NoError(t, tx.Rollback(ctx))
	require.Equal(t, nothing, b.counts(t))
}
