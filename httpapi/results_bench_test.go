package httpapi_test

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/httpapi"
)

// BenchmarkListResults streams the CSV results of a list of
// BENCH_RESULTS_ROWS rows (default a million, all PENDING, as the bench's
// results row) over loopback, and reports rows a second: the results bar
// is 200k rows/s (DESIGN §11). It uses only the API, so that the same file
// measures another version of the handler.
//
//	go test ./httpapi -run '^$' -bench BenchmarkListResults -benchtime 3x
func BenchmarkListResults(b *testing.B) {
	n := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("BENCH_RESULTS_ROWS")); err == nil && v > 0 {
		n = v
	}
	tb := setup(b, setupOpts{lists: httpapi.ListLimits{MaxRows: n}, limits: httpapi.CallerLimits{MaxActiveLists: 100}})
	var body strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&body, "company%07d.com\n", i)
	}
	req, err := http.NewRequest(http.MethodPost, tb.url+"/lists", strings.NewReader(body.String()))
	require.NoError(b, err)
	req.Header.Set("Authorization", "Bearer "+tb.keyA)
	req.Header.Set("Content-Type", "text/plain")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(b, err)
	var id string
	{
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var out strings.Builder
		for sc.Scan() {
			out.Write(sc.Bytes())
		}
		resp.Body.Close()
		require.Equal(b, http.StatusAccepted, resp.StatusCode, "%.300s", out.String())
		_, rest, _ := strings.Cut(out.String(), `"list_id":"`)
		id, _, _ = strings.Cut(rest, `"`)
	}

	b.ResetTimer()
	for b.Loop() {
		req, err := http.NewRequest(http.MethodGet, tb.url+"/lists/"+id+"/results", nil)
		require.NoError(b, err)
		req.Header.Set("Authorization", "Bearer "+tb.keyA)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(b, err)
		require.Equal(b, http.StatusOK, resp.StatusCode)
		sc := bufio.NewScanner(resp.Body)
		lines := 0
		for sc.Scan() {
			lines++
		}
		resp.Body.Close()
		require.NoError(b, sc.Err())
		require.Equal(b, n+1, lines, "a header and every row")
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
