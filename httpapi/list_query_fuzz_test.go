package httpapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/wire"
)

// FuzzListResultsQuery sends any query string to GET /lists/{id}/results
// of a real list on a real server: whatever a caller puts there, the
// answer is a whole response below 500, never a 5xx or a connection cut
// off midway (after=2147483648 once reached Postgres as an int4 and
// aborted the stream). `go test` runs the seeds; `go test -fuzz
// FuzzListResultsQuery ./httpapi` looks for more.
func FuzzListResultsQuery(f *testing.F) {
	b := setup(f, setupOpts{})
	req, err := http.NewRequest(http.MethodPost, b.url+"/lists", strings.NewReader("domain,ref\nacme.com,1\nlocalhost,2\nbeta.com,3\n"))
	require.NoError(f, err)
	req.Header.Set("Authorization", "Bearer "+b.keyA)
	req.Header.Set("Content-Type", "text/csv")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(f, err)
	var a wire.ListAccepted
	require.NoError(f, json.NewDecoder(resp.Body).Decode(&a))
	resp.Body.Close()
	require.Equal(f, http.StatusAccepted, resp.StatusCode)
	results := b.url + wire.ListResultsURL(a.ListID)

	for _, seed := range []string{
		"", "after=0", "after=1", "after=2147483647", "after=2147483648", "after=9223372036854775807",
		"after=9223372036854775808", "after=99999999999999999999999", "after=-1", "after=-2147483649", "after=1e3",
		"after=0x10", "after=%201", "after=+1", "after=1&after=2147483648", "after=", "after", "status=completed&after=1",
		"status=DONE", "status=%00", "status=" + strings.Repeat("COMPLETED,", 500), "status=,,,", "escape_formulas=maybe",
		"escape_formulas=false&after=2", "%zz", "after=%FF", "after=１",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, query string) {
		for _, c := range []byte(query) {
			if c <= ' ' || c >= 0x7f || c == '#' {
				return // not a request line a client sends
			}
		}
		req, err := http.NewRequest(http.MethodGet, results, nil)
		require.NoError(t, err)
		req.URL.RawQuery = query
		req.Header.Set("Authorization", "Bearer "+b.keyA)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err, "?%s", query)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err, "?%s: the answer was cut off", query)
		require.Less(t, resp.StatusCode, 500, "?%s: %s", query, body)
	})
}
