package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/db/dbtest"
	"github.com/domainclass/domainclass/httpapi"
)

// TestHealthHEAD (issue 36, a new user): HEAD /healthz and /readyz, what a
// load balancer or `curl -I` sends, answer as GET does, without a body
// (they answered 405).
func TestHealthHEAD(t *testing.T) {
	t.Parallel()
	up := setup(t, setupOpts{})
	down := setup(t, setupOpts{db: downDB(t)})
	for _, tc := range []struct {
		name   string
		b      *testBundle
		path   string
		status int
	}{
		{"up", up, "/healthz", http.StatusOK}, {"up", up, "/readyz", http.StatusOK},
		{"postgres down", down, "/healthz", http.StatusOK}, {"postgres down", down, "/readyz", http.StatusServiceUnavailable},
	} {
		get := tc.b.do(t, http.MethodGet, tc.path, "")
		head := tc.b.do(t, http.MethodHead, tc.path, "")
		require.Equal(t, tc.status, get.status, "%s GET %s", tc.name, tc.path)
		require.Equal(t, get.status, head.status, "%s HEAD %s", tc.name, tc.path)
		require.Empty(t, head.body)
		require.Equal(t, get.header.Get("Content-Type"), head.header.Get("Content-Type"))
		require.Equal(t, get.header.Get("Retry-After"), head.header.Get("Retry-After"))
	}
}

// TestWorkerHealth (issue 38): a worker process's /healthz and /readyz
// (WORKER_ADDR) are the API's, written once: the same status, type,
// Retry-After and body, Postgres up or down, GET and HEAD; its readiness
// carries the worker's detail, and /metrics is the handler given.
func TestWorkerHealth(t *testing.T) {
	t.Parallel()
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("metrics\n")) })
	for _, tc := range []struct {
		name string
		api  *testBundle
		pool *db.DB
	}{
		{"up", setup(t, setupOpts{}), dbtest.New(t)},
		{"postgres down", setup(t, setupOpts{db: downDB(t)}), downDB(t)},
	} {
		worker := httptest.NewServer(httpapi.WorkerHealth(tc.pool, func() string { return "" }, metrics))
		t.Cleanup(worker.Close)
		w := &testBundle{url: worker.URL}
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			for _, path := range []string{"/healthz", "/readyz"} {
				want, got := tc.api.do(t, method, path, ""), w.do(t, method, path, "")
				require.Equal(t, want.status, got.status, "%s %s %s", tc.name, method, path)
				require.Equal(t, want.header.Get("Content-Type"), got.header.Get("Content-Type"), "%s %s %s", tc.name, method, path)
				require.Equal(t, want.header.Get("Retry-After"), got.header.Get("Retry-After"), "%s %s %s", tc.name, method, path)
				require.Equal(t, string(want.body), string(got.body), "%s %s %s", tc.name, method, path)
			}
		}
		got := w.do(t, http.MethodGet, "/metrics", "")
		require.Equal(t, http.StatusOK, got.status)
		require.Equal(t, "metrics\n", string(got.body))
	}

	detailed := httptest.NewServer(httpapi.WorkerHealth(dbtest.New(t), func() string { return "no limit known" }, metrics))
	t.Cleanup(detailed.Close)
	got := (&testBundle{url: detailed.URL}).do(t, http.MethodGet, "/readyz", "")
	require.Equal(t, http.StatusOK, got.status)
	require.JSONEq(t, `{"status":"ok","detail":"no limit known"}`, string(got.body))
}
