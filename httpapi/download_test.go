package httpapi_test

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/db/dbtest"
	"github.com/domainclass/domainclass/httpapi"
	"github.com/domainclass/domainclass/wire"
)

// download is a GET of a list's results over a socket of its own whose
// receive buffer is 4 KiB: once the test stops reading, the server's
// writes block as soon as the sockets' buffers are full.
type download struct {
	conn      net.Conn
	resp      *http.Response
	closeOnce sync.Once
}

// startDownload sends GET path with key and reads the answer's header and,
// when it is a 200, the first 64 bytes of the body: the download is then
// in progress, and nothing more is read. Another answer is returned whole.
func startDownload(t *testing.T, base, key, path string) (*download, *response) {
	t.Helper()
	dialer := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
		return cmp.Or(err, serr)
	}}
	conn, err := dialer.Dial("tcp", strings.TrimPrefix(base, "http://"))
	require.NoError(t, err)
	d := &download{conn: conn}
	t.Cleanup(d.close)
	_, err = fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", path, key)
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(dbtest.Patience())))
	d.resp, err = http.ReadResponse(bufio.NewReaderSize(conn, 16), nil)
	require.NoError(t, err, "GET %s answers", path)
	if d.resp.StatusCode != http.StatusOK {
		body, err := io.ReadAll(d.resp.Body)
		require.NoError(t, err)
		d.close()
		return nil, &response{status: d.resp.StatusCode, header: d.resp.Header, body: body}
	}
	_, err = io.ReadFull(d.resp.Body, make([]byte, 64))
	require.NoError(t, err, "the download's first bytes")
	require.NoError(t, conn.SetReadDeadline(time.Time{}))
	return d, nil
}

// trickle reads 16 bytes every interval until the download ends.
func (d *download) trickle(every time.Duration) {
	go func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		buf := make([]byte, 16)
		for range tick.C {
			if _, err := d.resp.Body.Read(buf); err != nil {
				return
			}
		}
	}()
}

// rest reads what is left of the body, and returns the error a client
// would see at its end (nil: the download ended whole).
func (d *download) rest(t *testing.T) error {
	t.Helper()
	require.NoError(t, d.conn.SetReadDeadline(time.Now().Add(dbtest.Patience())))
	_, err := io.Copy(io.Discard, d.resp.Body)
	require.NotErrorIs(t, err, syscall.ETIMEDOUT)
	return err
}

func (d *download) close() { d.closeOnce.Do(func() { _ = d.conn.Close() }) }

// downloadBounds lets n downloads run at once, per caller too, and a
// reader that stops go on for the test's length.
func downloadBounds(n int) setupOpts {
	return setupOpts{lists: httpapi.ListLimits{MaxDownloads: n, DownloadMinRate: 1024, DownloadRateWindow: 10 * time.Minute},
		limits: httpapi.CallerLimits{MaxDownloads: n}}
}

// bigList uploads a list of n rows with key: every seventh row is not
// a domain (REJECTED), starting with "=" (a formula the CSV escapes);
// every row has a long ref, so that a page of CSV is megabytes. It
// returns the list's id and each row's input.
func bigList(t *testing.T, b *testBundle, key string, n int) (string, []string) {
	t.Helper()
	var body strings.Builder
	body.WriteString("domain,ref\n")
	inputs := make([]string, n+1)
	for i := 1; i <= n; i++ {
		inputs[i] = fmt.Sprintf("d%06d.com", i)
		if i%7 == 0 {
			inputs[i] = fmt.Sprintf("=bad %d", i)
		}
		fmt.Fprintf(&body, "%s,%s\n", inputs[i], listRef(i))
	}
	r, a := b.upload(t, "text/csv", body.String(), "Authorization", "Bearer "+key)
	require.Equal(t, http.StatusAccepted, r.status, "%.300s", r.body)
	require.Equal(t, n, a.Rows)
	return a.ListID, inputs
}

func listRef(row int) string { return fmt.Sprintf("ref-%d-%s", row, strings.Repeat("x", 400)) }

// TestHostileDownloads holds the third hostile review's finding on result
// downloads (issue 36; docs/RELIABILITY.md, "Hostile input"): 20 downloads
// of one caller that read 64 bytes each held as many API connections in
// ClientWrite, for 30 minutes, and other callers got 503s.
func TestHostileDownloads(t *testing.T) {
	t.Parallel()

	// The bounds on downloads in progress are lifted here: holding no
	// connection while writing must stand on its own.
	t.Run("SlowReadersHoldNoDatabaseConnection", func(t *testing.T) {
		t.Parallel()
		const conns, readers = 4, 8
		opts := downloadBounds(readers)
		opts.apiMaxConns = conns
		b := setup(t, opts)
		id, _ := bigList(t, b, b.keyA, 20_000)
		// B's key is looked up before the downloads start.
		require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/callers/me", "", "Authorization", "Bearer "+b.keyB).status)

		for i := range readers {
			_, refused := startDownload(t, b.url, b.keyA, "/lists/"+id+"/results")
			require.Nil(t, refused, "download %d of %d on %d connections", i+1, readers, conns)
		}
		require.Eventually(t, func() bool { return b.apiDB.Pool.Stat().AcquiredConns() == 0 }, dbtest.Patience(), 10*time.Millisecond,
			"no connection is held while %d downloads wait on their clients", readers)

		for i := range 5 {
			r := b.do(t, http.MethodPost, "/domains/classify", fmt.Sprintf(`{"domains": ["probe%d.com"]}`, i),
				"Authorization", "Bearer "+b.keyB)
			require.Equal(t, http.StatusAccepted, r.status, "another caller's job while %d downloads stall: %s", readers, r.body)
		}
		require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/callers/me", "", "Authorization", "Bearer "+b.keyB).status)
		require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/readyz", "").status)
		require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/lists/"+id, "").status, "the list's own status too")
		// A stalled download still reads its next page when its client's
		// socket takes a little more (a connection for a moment, never
		// while it writes): none is held once that is done.
		require.Eventually(t, func() bool { return b.apiDB.Pool.Stat().AcquiredConns() == 0 }, dbtest.Patience(), 10*time.Millisecond,
			"and still none is held")
	})

	t.Run("DownloadsInProgressAreBoundedPerCallerAndPerProcess", func(t *testing.T) {
		t.Parallel()
		bounds := downloadBounds(0)
		bounds.lists.MaxDownloads, bounds.limits.MaxDownloads = 3, 2
		b := setup(t, bounds)
		idA, _ := bigList(t, b, b.keyA, 20_000)
		idB, _ := bigList(t, b, b.keyB, 20_000)
		a1, _ := startDownload(t, b.url, b.keyA, "/lists/"+idA+"/results")
		require.NotNil(t, a1)
		a2, _ := startDownload(t, b.url, b.keyA, "/lists/"+idA+"/results?status=PENDING")
		require.NotNil(t, a2)

		// A's third is refused, whatever it asks for.
		for _, path := range []string{"/lists/" + idA + "/results", "/lists/" + idA + "/results?after=19000"} {
			r := b.do(t, http.MethodGet, path, "", "Accept", "application/x-ndjson")
			p := requireProblem(t, r, http.StatusTooManyRequests, "too-many-downloads")
			require.Equal(t, "10", r.header.Get("Retry-After"), path)
			require.Equal(t, "You have 2 downloads in progress; the limit is 2 at once. "+
				"Retry when one has ended, after the seconds in Retry-After.", p.Detail)
		}

		// B has its own share, within the process's three.
		b1, _ := startDownload(t, b.url, b.keyB, "/lists/"+idB+"/results")
		require.NotNil(t, b1)
		small := "/lists/" + idB + "/results?after=19999"
		r := b.do(t, http.MethodGet, small, "", "Authorization", "Bearer "+b.keyB)
		p := requireProblem(t, r, http.StatusTooManyRequests, "too-many-downloads")
		require.Equal(t, "10", r.header.Get("Retry-After"))
		require.Equal(t, "The service is sending 3 downloads, as many as it sends at once; retry after the seconds in Retry-After.", p.Detail)

		// One ends (its caller hangs up): its place is free again.
		a1.close()
		require.Eventually(t, func() bool {
			return b.do(t, http.MethodGet, small, "", "Authorization", "Bearer "+b.keyB).status == http.StatusOK
		}, dbtest.Patience(), 20*time.Millisecond)
	})

	t.Run("AReaderBelowTheMinimumRateIsCutOff", func(t *testing.T) {
		t.Parallel()
		// 64 KiB must be taken within each second.
		b := setup(t, setupOpts{lists: httpapi.ListLimits{DownloadMinRate: 64 << 10, DownloadRateWindow: time.Second},
			limits: httpapi.CallerLimits{MaxDownloads: 1}})
		id, _ := bigList(t, b, b.keyA, 20_000)
		probe := "/lists/" + id + "/results?after=20000" // the header alone
		// 320 bytes a second, then nothing at all.
		for _, every := range []time.Duration{50 * time.Millisecond, 0} {
			d, refused := startDownload(t, b.url, b.keyA, "/lists/"+id+"/results")
			require.Nil(t, refused)
			if every > 0 {
				d.trickle(every)
			}
			requireProblem(t, b.do(t, http.MethodGet, probe, ""), http.StatusTooManyRequests, "too-many-downloads")
			// The caller's one download is cut off: its place is free again.
			require.Eventually(t, func() bool { return b.do(t, http.MethodGet, probe, "").status == http.StatusOK },
				dbtest.Patience(), 20*time.Millisecond, "a reader of 16 bytes every %s is cut off", every)
			if every == 0 {
				err := d.rest(t)
				require.ErrorIs(t, err, io.ErrUnexpectedEOF, "the client sees the download break, not end")
			}
			d.close()
		}
		// A download read at any ordinary pace is not.
		r := b.do(t, http.MethodGet, "/lists/"+id+"/results", "")
		require.Equal(t, http.StatusOK, r.status)
		require.Equal(t, 20_001, bytes.Count(r.body, []byte("\n")))
	})
}

// The server's own read and write timeouts are for short requests (15 s
// and 30 s in cmd/domainclass): a download read at a good pace for longer
// than both comes whole, however long it takes.
func TestListResultsOutlastTheServerTimeouts(t *testing.T) {
	t.Parallel()
	const timeouts = 500 * time.Millisecond
	b := setup(t, setupOpts{serverTimeouts: timeouts, lists: httpapi.ListLimits{DownloadMinRate: 16 << 10, DownloadRateWindow: time.Second}})
	id, _ := bigList(t, b, b.keyA, 20_000) // 8.6 MB: more than the sockets' buffers hold
	d, refused := startDownload(t, b.url, b.keyA, "/lists/"+id+"/results")
	require.Nil(t, refused)
	start := time.Now()
	// 64 KiB every 20 ms (3.2 MB/s), about 2.7 s in all.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	buf := make([]byte, 64<<10)
	lines := 0
	for range tick.C {
		n, err := io.ReadFull(d.resp.Body, buf)
		lines += bytes.Count(buf[:n], []byte("\n"))
		if err != nil {
			require.ErrorIs(t, err, io.ErrUnexpectedEOF, "the last read is short")
			break
		}
	}
	require.Greater(t, time.Since(start), 2*timeouts, "the download outlasted the server's timeouts")
	require.Equal(t, 20_001, lines, "the header's end and every row came (the 64 bytes read first are the header's start)")
	require.NoError(t, d.rest(t), "and the download ended whole")
}

// TestListResultsPages holds a list's results read a page at a time: pages
// end at a number of rows, or early at a number of bytes (each row here is
// about 500 bytes, so a CSV page fills up); the rows come whole and in
// order across the pages, with ?after=, ?status=, formulas escaped, and
// the list's status read once.
func TestListResultsPages(t *testing.T) {
	t.Parallel()
	const n = 12_345
	b := setup(t, setupOpts{})
	id, inputs := bigList(t, b, b.keyA, n)

	// want is the rows after `after` in statuses, as row, input (escaped
	// in CSV), ref and status.
	want := func(after int, status string, csvEscaped bool, shownPending string) [][4]string {
		var out [][4]string
		for i := after + 1; i <= n; i++ {
			s := shownPending
			if i%7 == 0 {
				s = "REJECTED"
			}
			if status != "" && s != status {
				continue
			}
			in := inputs[i]
			if csvEscaped && strings.HasPrefix(in, "=") {
				in = "'" + in
			}
			out = append(out, [4]string{strconv.Itoa(i), in, listRef(i), s})
		}
		return out
	}
	readCSV := func(t *testing.T, query string) [][4]string {
		t.Helper()
		r := b.do(t, http.MethodGet, "/lists/"+id+"/results"+query, "")
		require.Equal(t, http.StatusOK, r.status, "%.300s", r.body)
		records, err := csv.NewReader(bytes.NewReader(r.body)).ReadAll()
		require.NoError(t, err)
		require.Equal(t, wire.ListRowColumns("is_cpg"), records[0])
		var out [][4]string
		for _, rec := range records[1:] {
			out = append(out, [4]string{rec[0], rec[1], rec[2], rec[4]})
		}
		return out
	}
	readNDJSON := func(t *testing.T, query string) [][4]string {
		t.Helper()
		r := b.do(t, http.MethodGet, "/lists/"+id+"/results"+query, "", "Accept", "application/x-ndjson")
		require.Equal(t, http.StatusOK, r.status, "%.300s", r.body)
		var out [][4]string
		dec := json.NewDecoder(bytes.NewReader(r.body))
		for dec.More() {
			var row wire.ListRow
			require.NoError(t, dec.Decode(&row))
			out = append(out, [4]string{strconv.Itoa(row.Row), row.Input, row.Ref, string(row.Status)})
		}
		return out
	}

	require.Equal(t, want(0, "", true, "PENDING"), readCSV(t, ""), "every row, in order")
	require.Equal(t, want(4_999, "", false, "PENDING"), readCSV(t, "?after=4999&escape_formulas=false"))
	require.Equal(t, want(0, "", false, "PENDING"), readNDJSON(t, ""))
	require.Equal(t, want(999, "REJECTED", false, "PENDING"), readNDJSON(t, "?after=999&status=REJECTED"),
		"a filter keeps a few rows of each page")
	require.Equal(t, want(7_777, "PENDING", true, "PENDING"), readCSV(t, "?after=7777&status=pending"))
	require.Empty(t, readCSV(t, fmt.Sprintf("?after=%d", n)), "past the last row: the header alone")

	require.Equal(t, http.StatusOK, b.do(t, http.MethodDelete, "/lists/"+id, "").status)
	require.Equal(t, want(3_000, "CANCELLED", false, "CANCELLED"), readNDJSON(t, "?after=3000&status=CANCELLED"),
		"the rows not final in a cancelled list are CANCELLED on every page")
}

// A download reads its rows a page at a time, not from one snapshot: a
// list purged while it is read (LIST_RETENTION; the list is taken off
// before its rows) breaks the download, never ends it short and whole.
func TestListResultsPurgedDuringADownload(t *testing.T) {
	t.Parallel()
	b := setup(t, downloadBounds(4))
	id, _ := bigList(t, b, b.keyA, 20_000)
	d, refused := startDownload(t, b.url, b.keyA, "/lists/"+id+"/results")
	require.Nil(t, refused)
	_, err := b.db.Pool.Exec(context.Background(), `DELETE FROM list WHERE id = $1`, id)
	require.NoError(t, err)
	_, err = b.db.Pool.Exec(context.Background(), `DELETE FROM list_row WHERE list_id = $1`, id)
	require.NoError(t, err)
	require.ErrorIs(t, d.rest(t), io.ErrUnexpectedEOF, "the client sees the download break")
}
