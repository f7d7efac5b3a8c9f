package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/cli"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/db/dbtest"
	"github.com/domainclass/domainclass/db/pools"
	"github.com/domainclass/domainclass/wire"
)

// In `all` neither the API's requests nor interactive jobs wait behind
// list work's connections: while list work holds every connection it may
// open, another caller's accept and status poll, the list owner's status
// poll, /readyz and River UI are answered, none with a 503, and the
// accepted job is worked to its end.
func TestAll_APIAndJobsGoOnWhileListWorkHoldsEveryListConnection(t *testing.T) {
	t.Parallel()
	const conns = 8
	e := newE2E(t, nil, map[string]string{
		"AUTH": "on", "DB_MAX_CONNS": fmt.Sprint(conns), "RIVERUI_USER": "ops", "RIVERUI_PASSWORD": "secret",
		// More model calls may start than there are connections, as with
		// LLM_MAX_CONCURRENCY=32 and a fast model in issue 26.
		"LLM_MAX_CONCURRENCY": "64", "LIST_DOMAIN_CONCURRENCY": "1", "LIST_CHUNKS_IN_FLIGHT": "2",
	})
	m := e.start(cli.RoleAll)
	require.NotSame(t, m.DB.Pool, m.WorkerDB.Pool, "the API and the workers have a pool each")
	require.NotSame(t, m.ListDB.Pool, m.WorkerDB.Pool, "list work has a pool of its own")
	listConns := int(m.Config.poolSizes().List())
	owner, other := e.apiKey("team-a"), e.apiKey("app")
	// A request that waits for a worker connection would wait as long as
	// the gate is held (the whole test): the client gives up only after
	// the tests' patience, so an answer at all is the proof.
	api := &http.Client{Timeout: dbtest.Patience()}

	// A cancel of each list that has taken its gate and not committed (by
	// a caller who does not own them, so nothing changes when it ends),
	// taken as soon as the list is accepted: every model call of the lists
	// that starts now waits for its list's gate, in a transaction on a
	// connection of list work, until every connection does. A worker
	// process's calls of one list wait on one connection (jobs.ListGates),
	// so it takes as many lists as list work has connections, of callers
	// of their own (a caller has a few at most), each with a few calls at
	// once (all of them get a model slot).
	ctx := context.Background()
	d, err := db.Open(ctx, db.Config{URL: dbtest.URL(), Schema: e.schema, MaxConns: 2})
	require.NoError(t, err)
	t.Cleanup(d.Close)
	tx, err := d.Pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	lists := make([]wire.ListAccepted, listConns)
	var status int
	var body string
	for i := range lists {
		key := owner
		if i > 0 {
			key = e.apiKey(fmt.Sprintf("team-a%d", i))
		}
		status, body = call(t, api, http.MethodPost, e.api.APIURL()+"/lists", key, "text/plain", domainsOf(fmt.Sprintf("big%d", i), 1000))
		require.Equal(t, http.StatusAccepted, status, "%s", body)
		requireJSON(t, body, &lists[i])
		_, _, err = db.ListCancel(ctx, tx, uuid.MustParse(lists[i].ListID), "nobody")
		require.NoError(t, err)
	}
	list := lists[0]
	var gatePID int
	require.NoError(t, tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&gatePID))
	waiting := func() (n int) {
		require.NoError(t, d.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`,
			gatePID).Scan(&n))
		return n
	}
	require.Eventually(t, func() bool { return waiting() >= listConns }, dbtest.Patience(), 50*time.Millisecond,
		"every connection of list work waits at the list's gate")

	// Another caller's first request (its key is looked up), its status
	// poll, the owner's poll of the list, and readiness.
	status, body = call(t, api, http.MethodPost, e.api.APIURL()+"/domains/classify", other, "application/json",
		`{"domains": ["probe-a.com", "probe-b.com"]}`)
	require.Equal(t, http.StatusAccepted, status, "an accept while list work holds the workers' connections: %s", body)
	var job wire.Accepted
	requireJSON(t, body, &job)
	status, body = call(t, api, http.MethodGet, e.api.APIURL()+job.StatusURL, other, "", "")
	require.Equal(t, http.StatusOK, status, "a job's status poll: %s", body)
	status, body = call(t, api, http.MethodGet, e.api.APIURL()+list.StatusURL, owner, "", "")
	require.Equal(t, http.StatusOK, status, "the list's status poll: %s", body)
	status, body = call(t, api, http.MethodGet, e.api.APIURL()+"/readyz", "", "", "")
	require.Equal(t, http.StatusOK, status, "readiness: %s", body)
	status, body = call(t, api, http.MethodGet, e.api.APIURL()+"/riverui/api/health-checks/complete", "", "", "")
	require.Equal(t, http.StatusOK, status, "River UI, which queries through the API's own River client: %s", body)

	// The job is worked meanwhile: its statements and River's run on the
	// workers' other connections.
	completed := assert.Eventually(t, func() bool {
		status, body = call(t, api, http.MethodGet, e.api.APIURL()+job.StatusURL, other, "", "")
		return status == http.StatusOK && strings.Contains(body, `"status":"COMPLETED"`)
	}, dbtest.Patience(), 50*time.Millisecond)
	require.True(t, completed, "the job completes while list work waits at the gate; last seen %d %s", status, body)

	require.GreaterOrEqual(t, waiting(), listConns, "list work's connections were held all along")
	require.NoError(t, tx.Rollback(ctx))
}

// call sends one request with key (when set) and returns its status and body.
func call(t *testing.T, c *http.Client, method, url, key, contentType, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.Do(req)
	require.NoError(t, err, "%s %s", method, url)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func requireJSON(t *testing.T, body string, v any) {
	t.Helper()
	require.NoError(t, json.Unmarshal([]byte(body), v), body)
}

// domainsOf is n distinct domains, one a line.
func domainsOf(prefix string, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%s-%d.com\n", prefix, i)
	}
	return b.String()
}

// The pools' setting is read from its variable, and a refusal names it
// (db/pools' TestSizes holds the arithmetic).
func TestConfig_PoolSizes(t *testing.T) {
	t.Parallel()
	cfg, err := LoadConfig([]string{"DB_MAX_CONNS=12", "CLASSIFY_WORKERS=20", "LIST_WORKERS=2"})
	require.NoError(t, err)
	require.Equal(t, pools.Sizes{DBMaxConns: 12, ClassifyWorkers: 20, ListWorkers: 2}, cfg.poolSizes())
	_, err = LoadConfig([]string{"DB_MAX_CONNS=-1"})
	require.EqualError(t, err, "DB_MAX_CONNS must not be negative (0 is each role's default)")
	_, err = LoadConfig([]string{"DB_MAX_CONNS=2"})
	require.EqualError(t, err, "DB_MAX_CONNS (2) must leave at least 2 connections to classify jobs and River beside list work's 1: set at least 3")
}
