package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/db/dbtest"
	"github.com/domainclass/domainclass/httpapi"
	"github.com/domainclass/domainclass/jobs"
	"github.com/domainclass/domainclass/wire"
)

// trickle is an upload whose body comes a byte at a time, over a socket
// of its own: its headers promise a 10 MB body and ask for 100-continue,
// so the server says when its handler starts reading the body.
type trickle struct {
	conn      net.Conn
	continued chan struct{} // closed at the server's 100 Continue
	answer    chan response // the final answer, when one comes
	stop      chan struct{}
	stopOnce  sync.Once
}

// startTrickle sends the headers of POST path with key and contentType,
// and, once the server asks for the body, one byte every interval until
// close (or until the server answers).
func startTrickle(t *testing.T, base, key, path, contentType string, every time.Duration) *trickle {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	require.NoError(t, err)
	tr := &trickle{conn: conn, continued: make(chan struct{}), answer: make(chan response, 1), stop: make(chan struct{})}
	t.Cleanup(tr.close)
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: %s\r\n"+
		"Content-Length: 10000000\r\nExpect: 100-continue\r\n\r\n", path, key, contentType)
	_, err = conn.Write([]byte(head))
	require.NoError(t, err)
	go func() {
		br := bufio.NewReader(conn)
		for {
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				return
			}
			if resp.StatusCode == http.StatusContinue {
				close(tr.continued)
				go tr.send(every)
				continue
			}
			body, _ := io.ReadAll(resp.Body)
			tr.answer <- response{status: resp.StatusCode, header: resp.Header, body: body}
			tr.close()
			return
		}
	}()
	return tr
}

func (tr *trickle) send(every time.Duration) {
	body := "trickle.com\n"
	tick := time.NewTicker(every)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-tr.stop:
			return
		case <-tick.C:
			if _, err := tr.conn.Write([]byte{body[i%len(body)]}); err != nil {
				return
			}
		}
	}
}

func (tr *trickle) close() {
	tr.stopOnce.Do(func() {
		close(tr.stop)
		_ = tr.conn.Close()
	})
}

// reading reports whether the server started reading the body within d
// (0: by now).
func (tr *trickle) reading(d time.Duration) bool {
	select {
	case <-tr.continued:
		return true
	default:
	}
	select {
	case <-tr.continued:
		return true
	case <-time.After(d):
		return false
	}
}

// answered returns the server's final answer, or nil when none came
// within d (0: by now).
func (tr *trickle) answered(d time.Duration) *response {
	select {
	case r := <-tr.answer:
		return &r
	default:
	}
	select {
	case r := <-tr.answer:
		return &r
	case <-time.After(d):
		return nil
	}
}

// noopArgs is a River job that does nothing: River working at all.
type noopArgs struct{}

func (noopArgs) Kind() string { return "test_noop" }

type noopWorker struct{ river.WorkerDefaults[noopArgs] }

func (noopWorker) Work(context.Context, *river.Job[noopArgs]) error { return nil }

// lenientRate lets a trickle of a byte a second go on for the test's
// length: the tests of the other bounds do not meet the minimum rate.
var lenientRate = httpapi.ListLimits{UploadMinRate: 1, UploadRateWindow: 10 * time.Minute}

// uploadBounds is lenientRate with room for n uploads of one caller at
// once: a caller's second and later uploads leave a quarter of the
// process's places free, so the process has twice n.
func uploadBounds(n int) setupOpts {
	l := lenientRate
	l.MaxUploads = 2 * n
	return setupOpts{lists: l, limits: httpapi.CallerLimits{MaxUploads: n, MaxActiveLists: 100}}
}

// TestHostileUploads holds the findings of the second hostile review on
// list uploads (issue 22; docs/RELIABILITY.md, "Hostile input"): each
// failed before its fix.
func TestHostileUploads(t *testing.T) {
	t.Parallel()

	// 60 trickling uploads held every connection of the pool in COPY for
	// as long as they trickled: other callers got 503s and River starved.
	// The bounds on uploads in progress are lifted here: holding no
	// connection while reading must stand on its own.
	t.Run("TricklingUploadsHoldNoDatabaseConnection", func(t *testing.T) {
		t.Parallel()
		const conns, trickles = 4, 8
		opts := uploadBounds(trickles)
		opts.apiMaxConns = conns
		b := setup(t, opts)
		workers := river.NewWorkers()
		river.AddWorker(workers, noopWorker{})
		rc, err := jobs.NewClient(b.apiDB.Pool, jobs.ClientConfig{Settings: jobs.DefaultSettings(), Schema: b.db.Schema,
			Workers: workers, TestOnly: true})
		require.NoError(t, err)
		require.NoError(t, rc.Start(context.Background()))
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = rc.Stop(ctx)
		})

		// B's key is looked up before the trickles start (the key lookup's
		// own wait is another finding's).
		require.Equal(t, http.StatusNotFound, b.do(t, http.MethodGet, "/lists/"+uuid.NewString(), "", "Authorization", "Bearer "+b.keyB).status)
		var ts []*trickle
		for i := range trickles {
			query := ""
			if i%2 == 1 {
				query = "?dry_run=true" // today a dry run holds a transaction while it reads
			}
			ts = append(ts, startTrickle(t, b.url, b.keyA, "/lists"+query, "text/plain", time.Second))
		}
		reading := 0
		for _, tr := range ts {
			if tr.reading(dbtest.Patience()) {
				reading++
			}
		}

		// Another caller's jobs are accepted as usual, and River works,
		// while every trickle is still being read.
		for i := range 5 {
			r := b.do(t, http.MethodPost, "/domains/classify", fmt.Sprintf(`{"domains": ["probe%d.com"]}`, i),
				"Authorization", "Bearer "+b.keyB)
			require.Equal(t, http.StatusAccepted, r.status, "another caller's job while %d uploads trickle on %d connections: %s",
				trickles, conns, r.body)
		}
		job, err := rc.Insert(context.Background(), noopArgs{}, &river.InsertOpts{Queue: jobs.QueueClassify})
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			j, err := rc.JobGet(context.Background(), job.Job.ID)
			return err == nil && j.State == rivertype.JobStateCompleted
		}, dbtest.Patience(), 20*time.Millisecond, "River completes a job while the uploads trickle")
		require.Equal(t, trickles, reading, "every upload is read at once: none waits for a connection")
		for _, tr := range ts {
			require.Nil(t, tr.answered(0), "the trickles were still being read")
		}
	})

	t.Run("UploadsInProgressAreBoundedPerCallerAndPerProcess", func(t *testing.T) {
		t.Parallel()
		bounds := lenientRate
		bounds.MaxUploads = 3
		b := setup(t, setupOpts{lists: bounds, limits: httpapi.CallerLimits{MaxUploads: 2}})
		a1 := startTrickle(t, b.url, b.keyA, "/lists", "text/plain", time.Second)
		a2 := startTrickle(t, b.url, b.keyA, "/lists?dry_run=true", "text/plain", time.Second)
		require.True(t, a1.reading(dbtest.Patience()))
		require.True(t, a2.reading(dbtest.Patience()))

		// A's third, a dry run or not, is refused before its body is read.
		for _, path := range []string{"/lists", "/lists?dry_run=true"} {
			third := startTrickle(t, b.url, b.keyA, path, "text/plain", time.Second)
			r := third.answered(dbtest.Patience())
			require.NotNil(t, r, "%s: A's third upload at once is answered without reading its body", path)
			requireProblem(t, *r, http.StatusTooManyRequests, "too-many-uploads")
			require.Equal(t, "10", r.header.Get("Retry-After"), path)
			require.False(t, third.reading(0), "refused before its body was asked for")
		}

		// B has its own share, within the process's three.
		b1 := startTrickle(t, b.url, b.keyB, "/lists", "text/plain", time.Second)
		require.True(t, b1.reading(dbtest.Patience()))
		b2 := startTrickle(t, b.url, b.keyB, "/lists", "text/plain", time.Second)
		r := b2.answered(dbtest.Patience())
		require.NotNil(t, r, "the process's fourth upload is answered at once")
		requireProblem(t, *r, http.StatusTooManyRequests, "too-many-uploads")

		// A's end (its caller hangs up): their places are free again, and
		// B may have a second (not while only the last place was free: it
		// is kept for callers with none in progress).
		a1.close()
		a2.close()
		require.Eventually(t, func() bool {
			r, _ := b.upload(t, "text/plain", "acme.com\n", "Authorization", "Bearer "+b.keyB)
			return r.status == http.StatusAccepted
		}, dbtest.Patience(), 50*time.Millisecond)
		require.Equal(t, 1, b.listCounts(t)["list"])
	})

	// Four callers each trickling two uploads, just above the minimum rate,
	// held all eight places for up to 30 minutes, and a fifth caller's
	// one-row list got 429 (issue 36). A caller's second upload at once
	// now takes a place only while a quarter of them stays free for
	// callers with none in progress.
	t.Run("AFewCallersCannotHoldEveryPlace", func(t *testing.T) {
		t.Parallel()
		bounds := lenientRate
		bounds.MaxUploads = 8
		b := setup(t, setupOpts{lists: bounds, limits: httpapi.CallerLimits{MaxUploads: 2}})
		outcome := func(tr *trickle) string {
			select {
			case <-tr.continued:
				return "reading"
			case r := <-tr.answer:
				if r.status == http.StatusTooManyRequests {
					var p wire.Problem
					require.NoError(t, json.Unmarshal(r.body, &p))
					return p.Detail
				}
				return fmt.Sprintf("%d %s", r.status, r.body)
			case <-time.After(dbtest.Patience()):
				return "no answer"
			}
		}
		var keys []string
		for i := range 4 {
			keys = append(keys, createKey(t, b.db, fmt.Sprintf("trickler-%d", i), db.APIKey{}))
		}
		reading := map[string]int{}
		var refused []string
		for _, upload := range []string{"first", "second"} {
			for _, key := range keys {
				if o := outcome(startTrickle(t, b.url, key, "/lists", "text/plain", time.Second)); o == "reading" {
					reading[upload]++
				} else {
					refused = append(refused, o)
				}
			}
		}

		fifth := createKey(t, b.db, "fifth", db.APIKey{})
		r, _ := b.upload(t, "text/plain", "acme.com\n", "Authorization", "Bearer "+fifth)
		require.Equal(t, http.StatusAccepted, r.status, "a fifth caller's one-row list while four callers trickle two uploads each: %s", r.body)
		require.Equal(t, map[string]int{"first": 4, "second": 2}, reading, "each caller's first upload, and seconds while a quarter stays free")
		require.Len(t, refused, 2)
		for _, detail := range refused {
			require.Equal(t, "You have 1 upload in progress, and the service is reading 6 of the 8 it reads at once: "+
				"the last 2 are kept for callers with none in progress. Retry when yours has ended, after the seconds in Retry-After.", detail)
		}

		// The process stays bounded: two more callers take the last two
		// places, and a third is refused.
		for _, name := range []string{"sixth", "seventh"} {
			require.Equal(t, "reading", outcome(startTrickle(t, b.url, createKey(t, b.db, name, db.APIKey{}), "/lists", "text/plain", time.Second)), name)
		}
		r, _ = b.upload(t, "text/plain", "acme.com\n", "Authorization", "Bearer "+createKey(t, b.db, "eighth", db.APIKey{}))
		p := requireProblem(t, r, http.StatusTooManyRequests, "too-many-uploads")
		require.Contains(t, p.Detail, "The service is reading 8 uploads, as many as it reads at once")
	})

	t.Run("ATrickleIsEndedByTheMinimumReadRate", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{lists: httpapi.ListLimits{UploadMinRate: 100, UploadRateWindow: time.Second}})
		for _, every := range []time.Duration{100 * time.Millisecond, time.Hour} { // a byte at a time; nothing at all
			tr := startTrickle(t, b.url, b.keyA, "/lists", "text/plain", every)
			require.True(t, tr.reading(dbtest.Patience()))
			r := tr.answered(dbtest.Patience())
			require.NotNil(t, r, "a trickle (a byte every %s) is ended", every)
			p := requireProblem(t, *r, http.StatusRequestTimeout, "upload-too-slow")
			require.Regexp(t, `^The upload is too slow: \d+ bytes in the last 1s; the minimum is 100 bytes a second`, p.Detail)
		}
		require.Equal(t, noList, b.listCounts(t))
		// An upload at any ordinary pace is not.
		r, _ := b.upload(t, "text/plain", strings.Repeat("acme.com\n", 10_000))
		require.Equal(t, http.StatusAccepted, r.status)
	})

	t.Run("TheSpoolLivesOnlyAsLongAsItsRequest", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		opts := uploadBounds(4)
		opts.lists.SpoolDir, opts.lists.MaxBytes = dir, 1<<20
		b := setup(t, opts)
		tr := startTrickle(t, b.url, b.keyA, "/lists", "text/plain", 10*time.Millisecond)
		require.True(t, tr.reading(dbtest.Patience()))
		require.Eventually(t, func() bool { return len(openSpools(t, dir)) == 1 }, dbtest.Patience(), 10*time.Millisecond,
			"an upload being read is spooled into LIST_SPOOL_DIR")
		require.Equal(t, []string{}, dirEntries(t, dir), "a spool file has no name: nothing is left behind, even after a crash")
		tr.close()

		for _, req := range []struct{ query, body string }{
			{"", "acme.com\n"},                              // accepted
			{"?dry_run=true", "acme.com\n"},                 // estimated
			{"", "localhost\n"},                             // refused after the body was read
			{"", strings.Repeat("acme.com\n", 200_000)},     // refused mid-body (too large)
			{"?dry_run=true", strings.Repeat("x\n", 1_000)}, // refused after reading
		} {
			_ = b.do(t, http.MethodPost, "/lists"+req.query, req.body, "Content-Type", "text/plain")
		}
		require.Eventually(t, func() bool { return len(openSpools(t, dir)) == 0 }, dbtest.Patience(), 10*time.Millisecond,
			"every spool is closed when its request ends, whatever the answer: %v", openSpools(t, dir))
		require.Equal(t, []string{}, dirEntries(t, dir))
	})
}

// openSpools lists this process's open files in dir.
func openSpools(t *testing.T, dir string) []string {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	var out []string
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && strings.HasPrefix(target, dir+string(filepath.Separator)) {
			out = append(out, target)
		}
	}
	return out
}

func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	out := []string{}
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// TestListCSV holds the CSV reading of a list: records bounded like lines,
// the format's quoting kept, and the column mapping.
func TestListCSV(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// One quoted 250 MiB field took 700 MB of RSS, 20 MiB of commas 2 GB:
	// encoding/csv buffers a whole record.
	t.Run("ARecordIsBoundedLikeALine", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		for _, tt := range []struct{ name, body, detail string }{
			{"AQuotedFieldNeverClosed", "domain,ref\nacme.com,r1\n\"" + strings.Repeat("a", 1<<20),
				"Row 2 of the CSV is longer than 65536 bytes"},
			{"ALongRow", "domain,ref\nacme.com,r1\nbeta.com," + strings.Repeat("b", 70_000) + "\n",
				"Row 2 of the CSV is longer than 65536 bytes"},
			{"Commas", "domain,ref\nacme.com,r1\nbeta.com" + strings.Repeat(",", 3000) + "\n",
				"Row 2 of the CSV has more than 2048 fields"},
			{"ALongHeader", "domain" + strings.Repeat(",column", 10_000) + "\nacme.com\n",
				"The CSV's header row is longer than 65536 bytes"},
		} {
			for _, query := range []string{"", "?dry_run=true"} {
				r := b.do(t, http.MethodPost, "/lists"+query, tt.body, "Content-Type", "text/csv")
				p := requireProblem(t, r, http.StatusRequestEntityTooLarge, "csv-record-too-large")
				require.Contains(t, p.Detail, tt.detail, "%s%s", tt.name, query)
			}
		}
		require.Equal(t, noList, b.listCounts(t))
	})

	t.Run("KeepsQuotingBOMAndCRLF", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		body := "\ufeffCompany,Domain,Ref\r\n" +
			"\"Acme, Inc.\",acme.com,\"r \"\"1\"\"\"\r\n" +
			"\"Multi\r\nline\",\"beta.com\",r2\r\n" +
			"\r\n" +
			"Gamma,gamma.com,\"r\n3\""
		r, a := b.upload(t, "text/csv", body)
		require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
		require.Equal(t, 3, a.Rows)
		require.Equal(t, []string{`1|acme.com|r "1"`, "2|beta.com|r2", "3|gamma.com|r\uFFFD3"}, storedRows(t, b, a.ListID))
	})

	// Issue 27: exports name their columns as they like.
	t.Run("ColumnsAreNamedInTheQuery", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{limits: httpapi.CallerLimits{MaxActiveLists: 100}})
		body := "Company,Domain,Website,Account_ID\nAcme,old.com,acme.com,A-1\nBeta,,https://www.beta.com/,A-2\n"
		r, a := b.upload(t, "text/csv", body)
		require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
		require.Equal(t, []string{"1|old.com|", "2||"}, storedRows(t, b, a.ListID), "by default: the domain column, no ref")

		r = b.do(t, http.MethodPost, "/lists?domain_column=website&ref_column=ACCOUNT_ID", body, "Content-Type", "text/csv")
		require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
		a = acceptedList(t, r)
		require.Equal(t, []string{"1|acme.com|A-1", "2|https://www.beta.com/|A-2"}, storedRows(t, b, a.ListID),
			"header names match in any case; other columns are dropped")
		est := b.do(t, http.MethodPost, "/lists?dry_run=true&domain_column=Website", body, "Content-Type", "text/csv")
		require.Equal(t, http.StatusOK, est.status, "%s", est.body)
		require.Contains(t, string(est.body), `"domains":2`)

		before := b.listCounts(t)
		for _, tt := range []struct{ query, slug, detail string }{
			{"?domain_column=url", "no-domain-column",
				`The CSV header has no column "url" (domain_column); its columns are "Company","Domain","Website","Account_ID".`},
			{"?ref_column=crm_id", "no-ref-column",
				`The CSV header has no column "crm_id" (ref_column); its columns are "Company","Domain","Website","Account_ID".`},
		} {
			p := requireProblem(t, b.do(t, http.MethodPost, "/lists"+tt.query, body, "Content-Type", "text/csv"), http.StatusBadRequest, tt.slug)
			require.Equal(t, tt.detail, p.Detail)
		}
		requireProblem(t, b.do(t, http.MethodPost, "/lists?domain_column=", body, "Content-Type", "text/csv"), http.StatusBadRequest, "invalid-query")
		p := requireProblem(t, b.do(t, http.MethodPost, "/lists?domain_column=website", "acme.com\n", "Content-Type", "text/plain"),
			http.StatusBadRequest, "invalid-query")
		require.Contains(t, p.Detail, "text/csv")
		require.Equal(t, before, b.listCounts(t))
		_ = ctx
	})
}

// storedRows returns a list's stored rows as "row|input|ref".
func storedRows(t *testing.T, b *testBundle, listID string) []string {
	t.Helper()
	rows, err := b.db.Pool.Query(context.Background(), `SELECT row, input, coalesce(ref, '') FROM list_row WHERE list_id = $1 ORDER BY row`, listID)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var (
			n          int
			input, ref string
		)
		require.NoError(t, rows.Scan(&n, &input, &ref))
		out = append(out, fmt.Sprintf("%d|%s|%s", n, input, ref))
	}
	require.NoError(t, rows.Err())
	return out
}

func acceptedList(t *testing.T, r response) wire.ListAccepted {
	t.Helper()
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
	var a wire.ListAccepted
	require.NoError(t, json.Unmarshal(r.body, &a))
	return a
}
