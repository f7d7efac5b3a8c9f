package httpapi_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/httpapi"
	"github.com/domainclass/domainclass/wire"
)

// TestCallerLimits_OneSource: a caller's six limits come from one struct,
// the deployment's (Config.Callers) under its key's own: GET /callers/me
// reports exactly that struct, and the checks hold the caller to the same
// figures (here its active lists: a key's own, then the deployment's).
func TestCallerLimits_OneSource(t *testing.T) {
	t.Parallel()
	deployment := httpapi.CallerLimits{RatePerMinute: 50, MaxQueuedDomains: 60, MaxStoredRows: 70_000,
		MaxActiveLists: 1, MaxUploads: 5, MaxDownloads: 7}
	b := setup(t, setupOpts{limits: deployment})
	own := createKey(t, b.db, "team-c", db.APIKey{RatePerMinute: 9, MaxStoredRows: 11_000})
	me := func(key string) wire.CallerLimits {
		r := b.do(t, http.MethodGet, "/callers/me", "", "Authorization", "Bearer "+key)
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		var report wire.CallerReport
		require.NoError(t, json.Unmarshal(r.body, &report))
		return report.Limits
	}
	require.Equal(t, wire.CallerLimits{RatePerMinute: 50, MaxQueuedDomains: 60, MaxStoredRows: 70_000,
		MaxActiveLists: 1, MaxUploads: 5, MaxDownloads: 7}, me(b.keyA), "the deployment's, all six")
	require.Equal(t, wire.CallerLimits{RatePerMinute: 9, MaxQueuedDomains: 60, MaxStoredRows: 11_000,
		MaxActiveLists: 1, MaxUploads: 5, MaxDownloads: 7}, me(own), "the key's own over the deployment's")

	r, _ := b.upload(t, "text/plain", "a.com")
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
	r = b.do(t, "POST", "/lists", "a.com", "Content-Type", "text/plain", "Authorization", "Bearer "+b.keyA)
	requireProblem(t, r, http.StatusTooManyRequests, "too-many-lists")
	require.Contains(t, string(r.body), "the limit is 1.", "the check holds the figure /callers/me reports")
}
