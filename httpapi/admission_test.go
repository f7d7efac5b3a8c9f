package httpapi_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/httpapi"
)

// TestListAdmission_RefusesBeforeTheBody: a caller at a limit that the
// body cannot change (its lists not yet ended, its stored rows) is told
// before it sends a million rows: the refusal is the answer to the
// request's headers, and the server never asks for the body (no 100
// Continue). The same admission is asked again in the upload's
// transaction (jobs.AcceptList).
func TestListAdmission_RefusesBeforeTheBody(t *testing.T) {
	t.Parallel()

	// headersOnly sends POST /lists's headers, announcing 10 MB that it
	// never sends, and returns the server's first answer.
	headersOnly := func(t *testing.T, b *testBundle) response {
		t.Helper()
		conn, err := net.Dial("tcp", strings.TrimPrefix(b.url, "http://"))
		require.NoError(t, err)
		t.Cleanup(func() { conn.Close() })
		require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
		_, err = fmt.Fprintf(conn, "POST /lists HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: text/plain\r\n"+
			"Content-Length: 10000000\r\nExpect: 100-continue\r\n\r\n", b.keyA)
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err)
		require.NotEqual(t, http.StatusContinue, resp.StatusCode, "the server asked for the body")
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return response{status: resp.StatusCode, header: resp.Header, body: body}
	}

	t.Run("TooManyLists", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{limits: httpapi.CallerLimits{MaxActiveLists: 1}})
		r, _ := b.upload(t, "text/plain", "a.com")
		require.Equal(t, http.StatusAccepted, r.status)
		r = headersOnly(t, b)
		requireProblem(t, r, http.StatusTooManyRequests, "too-many-lists")
		require.Equal(t, "60", r.header.Get("Retry-After"))
	})

	t.Run("StoredRowsFull", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{limits: httpapi.CallerLimits{RatePerMinute: 1000, MaxQueuedDomains: 1000, MaxStoredRows: 10,
			MaxActiveLists: 10}})
		r, _ := b.upload(t, "text/plain", domainLines("a", 10))
		require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
		p := requireProblem(t, headersOnly(t, b), http.StatusTooManyRequests, "too-many-stored-rows")
		require.Contains(t, p.Detail, "You have 10 rows stored in lists; 1 more would cross your limit of 10.")
	})
}
