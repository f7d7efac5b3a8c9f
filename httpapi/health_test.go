package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
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
