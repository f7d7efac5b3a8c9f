package httpapi_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/httpapi"
	"github.com/domainclass/domainclass/jobs"
	"github.com/domainclass/domainclass/wire"
)

// listCounts returns the rows of every table an upload could write.
func (b *testBundle) listCounts(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, table := range []string{"list", "list_row", "idempotency_key", "river_job"} {
		var n int
		require.NoError(t, b.db.Pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n))
		out[table] = n
	}
	return out
}

var noList = map[string]int{"list": 0, "list_row": 0, "idempotency_key": 0, "river_job": 0}

func gz(t *testing.T, s string) string {
	t.Helper()
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	_, err := w.Write([]byte(s))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return buf.String()
}

func (b *testBundle) upload(t *testing.T, contentType, body string, headers ...string) (response, wire.ListAccepted) {
	t.Helper()
	r := b.do(t, "POST", "/lists", body, append([]string{"Content-Type", contentType}, headers...)...)
	var a wire.ListAccepted
	if r.status == http.StatusAccepted {
		require.NoError(t, json.Unmarshal(r.body, &a), "%s", r.body)
	}
	return r, a
}

// chunkJobs returns the River jobs of the list's chunks.
func (b *testBundle) chunkJobs(t *testing.T, id string) []jobs.ClassifyListArgs {
	t.Helper()
	res, err := b.client.JobList(context.Background(), river.NewJobListParams().Kinds("classify_list").First(1000))
	require.NoError(t, err)
	var out []jobs.ClassifyListArgs
	for _, j := range res.Jobs {
		var a jobs.ClassifyListArgs
		require.NoError(t, json.Unmarshal(j.EncodedArgs, &a))
		require.Equal(t, jobs.QueueList, j.Queue)
		if a.ListID == id {
			out = append(out, a)
		}
	}
	return out
}

func TestListCreate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	csvBody := "Company,Domain,Ref\n" +
		"Unilever,https://www.Unilever.com/brands,crm-1\n" +
		"Nope,10.0.0.1,crm-2\n" +
		"Unilever again,unilever.com,crm-3\n" +
		"Acme,acme.io,\n" +
		"Empty,,crm-5\n"

	t.Run("AcceptsACSVWithRefsDuplicatesAndRejectedRowsInOrder", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{queue: chunking(2, 2)})
		r, a := b.upload(t, "text/csv", csvBody)
		require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
		require.Equal(t, "/lists/"+a.ListID, r.header.Get("Location"))
		require.Equal(t, wire.ListAccepted{ListID: a.ListID, Status: "PENDING", StatusURL: "/lists/" + a.ListID,
			ResultsURL: "/lists/" + a.ListID + "/results", Classifier: "cpg", Rows: 5, Domains: 2, Duplicates: 1, Rejected: 2,
			RejectedSample: []wire.RejectedRow{
				{Row: 2, Input: "10.0.0.1", Reason: classifier.ReasonIPAddress},
				{Row: 5, Input: "", Reason: classifier.ReasonEmpty},
			}}, a)

		// Every row is stored in order, the duplicate pointing at its first.
		rows, err := b.db.Pool.Query(ctx, `SELECT row, input, coalesce(ref, ''), coalesce(domain, ''), coalesce(first_row, 0), status
			FROM list_row WHERE list_id = $1 ORDER BY row`, a.ListID)
		require.NoError(t, err)
		var got []string
		for rows.Next() {
			var (
				n, first                   int
				input, ref, domain, status string
			)
			require.NoError(t, rows.Scan(&n, &input, &ref, &domain, &first, &status))
			got = append(got, fmt.Sprintf("%d|%s|%s|%s|%d|%s", n, input, ref, domain, first, status))
		}
		require.NoError(t, rows.Err())
		require.Equal(t, []string{
			"1|https://www.Unilever.com/brands|crm-1|unilever.com|0|PENDING",
			"2|10.0.0.1|crm-2||0|REJECTED",
			"3|unilever.com|crm-3|unilever.com|1|PENDING",
			"4|acme.io||acme.io|0|PENDING",
			"5||crm-5||0|REJECTED",
		}, got)

		// 5 rows in chunks of 2 are 3 chunks; the upload queues the first,
		// which queues the next as it starts.
		require.ElementsMatch(t, []jobs.ClassifyListArgs{{ListID: a.ListID, Chunk: 0}}, b.chunkJobs(t, a.ListID))
		status := b.do(t, "GET", "/lists/"+a.ListID, "")
		require.Equal(t, http.StatusOK, status.status)
		var s wire.ListStatus
		require.NoError(t, json.Unmarshal(status.body, &s))
		require.Equal(t, wire.ListProgress{Done: 2, Total: 5, Rejected: 2}, s.Progress, "rejected rows are final at once")
		require.Equal(t, classifier.StatusPending, s.Status)
	})

	t.Run("AcceptsNDJSONPlainTextAndGzip", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		for _, tc := range []struct {
			contentType, body string
			headers           []string
			rows, rejected    int
		}{
			{"application/x-ndjson", `{"domain": "a.com", "ref": 7}` + "\n\n" + `{"domain": "b.com"}` + "\n" + `not json` + "\n", nil, 3, 1},
			{"text/plain; charset=utf-8", "# my list\na.com\n\nwww.b.com\nlocalhost\n", nil, 3, 1},
			{"text/csv", gz(t, "domain\na.com\nb.com\n"), []string{"Content-Encoding", "gzip"}, 2, 0},
		} {
			r, a := b.upload(t, tc.contentType, tc.body, tc.headers...)
			require.Equal(t, http.StatusAccepted, r.status, "%s: %s", tc.contentType, r.body)
			require.Equal(t, tc.rows, a.Rows, tc.contentType)
			require.Equal(t, tc.rejected, a.Rejected, tc.contentType)
			require.Equal(t, 2, a.Domains, tc.contentType)
		}
		var ref string
		require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT ref FROM list_row WHERE input = 'a.com' AND ref IS NOT NULL`).Scan(&ref))
		require.Equal(t, "7", ref, "an NDJSON ref that is a number is kept as written")
	})

	rejected := []struct {
		name, contentType, body, slug string
		status                        int
		headers                       []string
		query                         string
	}{
		{name: "UnsupportedMediaType", contentType: "application/json", body: `{"domains": ["a.com"]}`, status: 415, slug: "unsupported-media-type"},
		{name: "UnsupportedEncoding", contentType: "text/plain", body: "a.com", status: 415, slug: "unsupported-media-type",
			headers: []string{"Content-Encoding", "br"}},
		{name: "NoDomainColumn", contentType: "text/csv", body: "company,website\nAcme,acme.io\n", status: 400, slug: "no-domain-column"},
		{name: "NoContentType", contentType: "", body: "a.com\n", status: 415, slug: "unsupported-media-type"},
		{name: "EmptyCSV", contentType: "text/csv", body: "", status: 400, slug: "unreadable-list"},
		// A header and no row is a list of no rows, as an empty text/plain
		// or NDJSON body is: 422, as docs/api.md says.
		{name: "HeaderOnlyCSV", contentType: "text/csv", body: "company,domain\n", status: 422, slug: "no-valid-rows"},
		{name: "EmptyText", contentType: "text/plain", body: "", status: 422, slug: "no-valid-rows"},
		// Issue 36: a quote never closed swallowed every row after it into
		// one REJECTED row (c.com here), and the list was accepted.
		{name: "UnclosedQuote", contentType: "text/csv", body: "domain\na.com\n\"b.com\nc.com\n", status: 400, slug: "unreadable-list"},
		{name: "BadGzip", contentType: "text/plain", body: "not gzip", status: 400, slug: "unreadable-list",
			headers: []string{"Content-Encoding", "gzip"}},
		{name: "UnknownClassifier", contentType: "text/plain", body: "a.com", status: 422, slug: "unknown-classifier", query: "?classifier=b2b"},
		{name: "NoValidRow", contentType: "text/plain", body: "localhost\n10.0.0.1\n", status: 422, slug: "no-valid-rows"},
		{name: "BadDryRun", contentType: "text/plain", body: "a.com", status: 400, slug: "invalid-query", query: "?dry_run=maybe"},
		{name: "TooManyRows", contentType: "text/plain", body: "a.com\nb.com\nc.com\nd.com\n", status: 413, slug: "list-too-large"},
		{name: "TooManyBytesAfterGzip", contentType: "text/plain", body: gz(t, strings.Repeat("a.com\n", 400)), status: 413,
			slug: "list-too-large", headers: []string{"Content-Encoding", "gzip"}},
	}
	for _, tt := range rejected {
		t.Run("Rejects"+tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, setupOpts{lists: httpapi.ListLimits{MaxRows: 3, MaxBytes: 1000}})
			r := b.do(t, "POST", "/lists"+tt.query, tt.body, append([]string{"Content-Type", tt.contentType}, tt.headers...)...)
			requireProblem(t, r, tt.status, tt.slug)
			require.Equal(t, noList, b.listCounts(t), "nothing may be written on a %d", tt.status)
		})
	}

	t.Run("AnUnclosedQuoteNamesItsRowAndLine", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		r := b.do(t, "POST", "/lists", "company,domain\nAcme,a.com\n\n\"Beta,b.com\nGamma,c.com\n", "Content-Type", "text/csv")
		p := requireProblem(t, r, http.StatusBadRequest, "unreadable-list")
		require.Equal(t, "Row 2 of the CSV opens a quoted field on line 4 that is never closed: every line after it would be read "+
			"into that field. Close the quote; a quote inside a quoted field is written twice (\"\").", p.Detail)
		r = b.do(t, "POST", "/lists", "\"domain\na.com\n", "Content-Type", "text/csv")
		p = requireProblem(t, r, http.StatusBadRequest, "unreadable-list")
		require.Contains(t, p.Detail, "The CSV's header row opens a quoted field on line 1 that is never closed")
		require.Equal(t, noList, b.listCounts(t))
	})

	// A refusal while the caller is still sending: the answer must reach it.
	// Closing at once with the body unread makes the kernel send a reset,
	// and a client still writing (Go's among them) loses the 413 for a
	// "connection reset by peer", then retries the whole upload.
	t.Run("ATooLargeListIsAnsweredBeforeTheConnectionCloses", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{lists: httpapi.ListLimits{MaxBytes: 1000}})
		conn, err := net.Dial("tcp", strings.TrimPrefix(b.url, "http://"))
		require.NoError(t, err)
		defer conn.Close()
		// 300 kB: little enough to sit in the sockets' buffers, so the write
		// below returns and only the read sees how the connection ended.
		body := bytes.Repeat([]byte("0123456789abcdef.com\n"), 15_000)
		head := fmt.Sprintf("POST /lists HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"+
			"Content-Type: text/plain\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", b.keyA, len(body))
		require.NoError(t, conn.(*net.TCPConn).SetWriteBuffer(len(head)+len(body)))
		require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
		_, err = conn.Write(append([]byte(head), body...))
		require.NoError(t, err)
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusContinue, resp.StatusCode, "curl and the CLI send Expect: 100-continue")
		resp, err = http.ReadResponse(br, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
		require.True(t, resp.Close, "the server says it closes")
		_, err = io.Copy(io.Discard, br)
		require.NoError(t, err, "the connection ends with a FIN after the answer, not a reset")
		require.Equal(t, noList, b.listCounts(t))
	})

	t.Run("NoValidRowListsEveryReason", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		p := requireProblem(t, b.do(t, "POST", "/lists", "localhost\n10.0.0.1\n", "Content-Type", "text/plain"), 422, "no-valid-rows")
		require.Equal(t, []wire.ItemError{
			{Row: 1, Input: "localhost", Reason: classifier.ReasonLocalhost},
			{Row: 2, Input: "10.0.0.1", Reason: classifier.ReasonIPAddress},
		}, p.Errors)
	})

	t.Run("ALimitCrossedOnTheLastRowWritesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{lists: httpapi.ListLimits{MaxRows: 1000}})
		var body strings.Builder
		for i := range 1001 {
			fmt.Fprintf(&body, "brand%04d.com\n", i)
		}
		requireProblem(t, b.do(t, "POST", "/lists", body.String(), "Content-Type", "text/plain"), 413, "list-too-large")
		require.Equal(t, noList, b.listCounts(t), "the rows copied before the limit are rolled back")
	})

	t.Run("ActiveListsAreLimitedPerCaller", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{limits: httpapi.CallerLimits{MaxActiveLists: 2}})
		for range 2 {
			r, _ := b.upload(t, "text/plain", "a.com")
			require.Equal(t, http.StatusAccepted, r.status)
		}
		before := b.listCounts(t)
		r := b.do(t, "POST", "/lists", "a.com", "Content-Type", "text/plain")
		requireProblem(t, r, http.StatusTooManyRequests, "too-many-lists")
		require.Equal(t, "60", r.header.Get("Retry-After"))
		require.Equal(t, before, b.listCounts(t))
		other, _ := b.upload(t, "text/plain", "a.com", "Authorization", "Bearer "+b.keyB)
		require.Equal(t, http.StatusAccepted, other.status, "another caller has its own limit")
	})

	t.Run("IdempotencyKeyReplaysRefusesAnotherBodyAndIsPerCaller", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		first, a := b.upload(t, "text/csv", csvBody, "Idempotency-Key", `"crm-export-1"`)
		require.Equal(t, http.StatusAccepted, first.status)
		again, _ := b.upload(t, "text/csv", csvBody, "Idempotency-Key", `"crm-export-1"`)
		require.Equal(t, http.StatusAccepted, again.status)
		require.Equal(t, first.body, again.body)
		require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
		require.Equal(t, "/lists/"+a.ListID, again.header.Get("Location"))
		before := b.listCounts(t)
		require.Equal(t, 1, before["list"])

		requireProblem(t, b.do(t, "POST", "/lists", csvBody+"extra.com,x,y\n", "Content-Type", "text/csv",
			"Idempotency-Key", `"crm-export-1"`), 422, "idempotency-key-reused")
		require.Equal(t, before, b.listCounts(t))
		other, _ := b.upload(t, "text/csv", csvBody, "Idempotency-Key", `"crm-export-1"`, "Authorization", "Bearer "+b.keyB)
		require.Equal(t, http.StatusAccepted, other.status)
		require.NotEqual(t, first.body, other.body)
	})

	t.Run("DryRunEstimatesAndWritesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{estimate: httpapi.Estimator{ModelConcurrency: 8, ModelRatePerMinute: 60_000,
			Model: "gpt-5.4-mini", DefaultCallSeconds: 2, Cores: 2,
			Price: func(_ string, _, _ float64, batch bool) (float64, bool) {
				if batch {
					return 0.0005, true
				}
				return 0.001, true
			}}})
		_, _, err := db.OverrideSet(ctx, b.db.Pool, []classifier.Override{{Classifier: "cpg", Domain: "unilever.com", Answer: true, Confidence: 5,
			Note: "Unilever makes soap and food.", SetBy: "test"}})
		require.NoError(t, err)
		seed, _ := b.upload(t, "text/plain", "cached.com")
		require.Equal(t, http.StatusAccepted, seed.status)
		var seedList wire.ListAccepted
		require.NoError(t, json.Unmarshal(seed.body, &seedList))
		_, err = db.ListRowFinish(ctx, b.db.Pool, uuid.MustParse(seedList.ListID), 1, classifier.Result{
			Domain: "cached.com", Classifier: "cpg", Status: classifier.StatusCompleted, Answer: true, Confidence: 5,
			Source: classifier.SourceLLM, ClassifiedAt: time.Now()}, "o")
		require.NoError(t, err)
		before := b.listCounts(t)

		var body strings.Builder
		body.WriteString("unilever.com\ncached.com\nwww.cached.com\nlocalhost\n")
		for i := range 8 {
			fmt.Fprintf(&body, "fresh%d.com\n", i)
		}
		r := b.do(t, "POST", "/lists?dry_run=true", body.String(), "Content-Type", "text/plain")
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		var est wire.ListEstimate
		require.NoError(t, json.Unmarshal(r.body, &est))
		cost, economyCost := 0.008, 0.004
		standard := wire.TierEstimate{EstimatedCostUSD: &cost, EstimatedSeconds: 2}
		require.Contains(t, est.Basis.Summary, "LLM_MAX_CONCURRENCY=8 bounds the model", "the basis in words (list_estimate_test.go)")
		require.Equal(t, wire.ListEstimate{Rows: 12, Domains: 10, Duplicates: 1, Rejected: 1, Override: 1, Cache: 1, LLM: 8,
			Overridden: 1, Known: 1, Cached: 1, Fresh: 8,
			ModelCalls: 8, EstimatedCostUSD: &cost, EstimatedSeconds: 2, Model: "gpt-5.4-mini", Tier: "standard",
			Tiers: map[string]wire.TierEstimate{"standard": standard,
				"economy": {EstimatedCostUSD: &economyCost, EstimatedSeconds: 24 * 3600}},
			Basis: wire.EstimateBasis{ModelAnswersPerSecond: 4, SecondsPerCall: 2, RowsPerSecond: 40_000, Bound: "concurrency",
				Summary: est.Basis.Summary}}, est,
			"8 fresh domains at 2 s each, 8 at a time: 2 s; or half the price within the batch window")
		require.Equal(t, before, b.listCounts(t), "a dry run writes nothing")
		var raw map[string]any
		require.NoError(t, json.Unmarshal(r.body, &raw))
		require.Equal(t, []any{1.0, 1.0}, []any{raw["overridden"], raw["known"]},
			"overridden, and known, its deprecated name, with the same value")

		r = b.do(t, "POST", "/lists?dry_run=true&tier=economy", body.String(), "Content-Type", "text/plain")
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		require.NoError(t, json.Unmarshal(r.body, &est))
		require.Equal(t, "economy", est.Tier)
		require.Equal(t, economyCost, *est.EstimatedCostUSD, "the asked tier's estimate on top")
		requireProblem(t, b.do(t, "POST", "/lists?tier=cheap", body.String(), "Content-Type", "text/plain"), 400, "invalid-query")
		require.Equal(t, before, b.listCounts(t))

		unknownPrice := setup(t, setupOpts{estimate: httpapi.Estimator{Model: "my-local-model"}})
		r = unknownPrice.do(t, "POST", "/lists?dry_run=true", "a.com", "Content-Type", "text/plain")
		require.Equal(t, http.StatusOK, r.status)
		require.Contains(t, string(r.body), `"estimated_cost_usd":null`)
	})
}

func TestListReadAndCancel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// A list of 4 rows: one answered, one failed, one rejected, one
	// pending; its duplicate has the first row's answer.
	newList := func(t *testing.T, b *testBundle) string {
		t.Helper()
		r, a := b.upload(t, "text/csv", "domain,ref\nacme.com,r1\nbad.com,r2\nlocalhost,r3\nslow.com,r4\nwww.acme.com,r5\n")
		require.Equal(t, http.StatusAccepted, r.status)
		id := uuid.MustParse(a.ListID)
		at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
		_, err := db.ListRowFinish(ctx, b.db.Pool, id, 1, classifier.Result{Domain: "acme.com", Classifier: "cpg",
			Status: classifier.StatusCompleted, Answer: true, Confidence: 5, Reasoning: "Snacks, \"crisps\".",
			Source: classifier.SourceLLM, ClassifiedAt: at, Model: "gpt-5.4-mini", PromptVersion: "v1", Search: "brave",
			Evidence: []classifier.EvidenceItem{
				{URL: "https://acme.com/", Title: "Acme Snacks", Snippet: "Acme makes chips."},
				{URL: "https://en.wikipedia.org/wiki/Acme", Title: "Acme - Wikipedia", Snippet: "Acme is a snack company."},
			}}, "o")
		require.NoError(t, err)
		_, err = db.ListRowFinish(ctx, b.db.Pool, id, 2, classifier.Result{Domain: "bad.com", Classifier: "cpg",
			Status: classifier.StatusFailed, Error: "no LLM configured", ClassifiedAt: at}, "o")
		require.NoError(t, err)
		return a.ListID
	}

	t.Run("StatusCountsEveryRow", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		id := newList(t, b)
		var s wire.ListStatus
		r := b.do(t, "GET", "/lists/"+id, "")
		require.NoError(t, json.Unmarshal(r.body, &s))
		require.Equal(t, wire.ListProgress{Done: 4, Total: 5, Completed: 2, Failed: 1, Rejected: 1, LLM: 2}, s.Progress)
		require.Equal(t, 5, s.Rows)
		require.Equal(t, 3, s.Domains)
		require.Equal(t, "/lists/"+id+"/results", s.ResultsURL)

		requireProblem(t, b.do(t, "GET", "/lists/"+id, "", "Authorization", "Bearer "+b.keyB), 404, "not-found")
		requireProblem(t, b.do(t, "GET", "/lists/"+uuid.NewString(), ""), 404, "not-found")
		requireProblem(t, b.do(t, "GET", "/lists/nope", ""), 400, "invalid-list-id")
	})

	t.Run("ResultsStreamAsCSVAndNDJSONWithFiltersAndACursor", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		id := newList(t, b)
		r := b.do(t, "GET", "/lists/"+id+"/results", "")
		require.Equal(t, http.StatusOK, r.status)
		require.Equal(t, "text/csv; charset=utf-8", r.header.Get("Content-Type"))
		records, err := csv.NewReader(bytes.NewReader(r.body)).ReadAll()
		require.NoError(t, err)
		require.Equal(t, [][]string{
			wire.ListRowColumns("is_cpg"),
			{"1", "acme.com", "r1", "acme.com", "COMPLETED", "true", "5", `Snacks, "crisps".`, "llm", "2026-11-30T12:00:00Z", "",
				"gpt-5.4-mini", "v1", "https://acme.com/ https://en.wikipedia.org/wiki/Acme", "true"},
			{"2", "bad.com", "r2", "bad.com", "FAILED", "", "", "", "", "2026-11-30T12:00:00Z", "no LLM configured", "", "", "", ""},
			{"3", "localhost", "r3", "", "REJECTED", "", "", "", "", "", classifier.ReasonLocalhost, "", "", "", ""},
			{"4", "slow.com", "r4", "slow.com", "PENDING", "", "", "", "", "", "", "", "", "", ""},
			{"5", "www.acme.com", "r5", "acme.com", "COMPLETED", "true", "5", `Snacks, "crisps".`, "llm", "2026-11-30T12:00:00Z", "",
				"gpt-5.4-mini", "v1", "https://acme.com/ https://en.wikipedia.org/wiki/Acme", "true"},
		}, records)

		r = b.do(t, "GET", "/lists/"+id+"/results?status=completed,REJECTED&after=1", "", "Accept", "application/x-ndjson")
		require.Equal(t, http.StatusOK, r.status)
		require.Equal(t, "application/x-ndjson; charset=utf-8", r.header.Get("Content-Type"))
		lines := strings.Split(strings.TrimSpace(string(r.body)), "\n")
		require.Len(t, lines, 2)
		require.JSONEq(t, `{"row": 3, "input": "localhost", "ref": "r3", "status": "REJECTED", "reason": "`+classifier.ReasonLocalhost+`",
			"error": "`+classifier.ReasonLocalhost+`"}`, lines[0])
		require.JSONEq(t, `{"row": 5, "input": "www.acme.com", "ref": "r5", "domain": "acme.com", "status": "COMPLETED",
			"answer": true, "is_cpg": true, "confidence": 5, "reasoning": "Snacks, \"crisps\".", "source": "llm", "classified_at": "2026-11-30T12:00:00Z",
			"model": "gpt-5.4-mini", "prompt_version": "v1", "search": "brave", "evidence": [
				{"url": "https://acme.com/", "title": "Acme Snacks", "snippet": "Acme makes chips."},
				{"url": "https://en.wikipedia.org/wiki/Acme", "title": "Acme - Wikipedia", "snippet": "Acme is a snack company."}]}`,
			lines[1], "a duplicate row has its first row's provenance")

		requireProblem(t, b.do(t, "GET", "/lists/"+id+"/results", "", "Accept", "application/pdf"), 406, "not-acceptable")
		requireProblem(t, b.do(t, "GET", "/lists/"+id+"/results?status=DONE", ""), 400, "invalid-query")
		requireProblem(t, b.do(t, "GET", "/lists/"+id+"/results?after=-1", ""), 400, "invalid-query")
		p := requireProblem(t, b.do(t, "GET", "/lists/"+id+"/results?after=2147483648", ""), 400, "invalid-query")
		require.Contains(t, p.Detail, "from 0 to 2147483647", "not an int4: refused before SQL, not a stream cut off")
		r = b.do(t, "GET", "/lists/"+id+"/results?after=2147483647", "")
		require.Equal(t, http.StatusOK, r.status)
		require.Equal(t, strings.Join(wire.ListRowColumns("is_cpg"), ",")+"\n", string(r.body), "past the last row: the header alone")
		requireProblem(t, b.do(t, "GET", "/lists/"+id+"/results", "", "Authorization", "Bearer "+b.keyB), 404, "not-found")
	})

	t.Run("CancelEndsTheListAndItsWaitingChunks", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		id := newList(t, b)
		require.Len(t, b.chunkJobs(t, id), 1)
		requireProblem(t, b.do(t, "DELETE", "/lists/"+id, "", "Authorization", "Bearer "+b.keyB), 404, "not-found")

		r := b.do(t, "DELETE", "/lists/"+id, "")
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		var s wire.ListStatus
		require.NoError(t, json.Unmarshal(r.body, &s))
		require.Equal(t, classifier.StatusCancelled, s.Status)
		require.NotNil(t, s.CompletedAt)
		require.Equal(t, wire.ListProgress{Done: 5, Total: 5, Completed: 2, Failed: 1, Rejected: 1, Cancelled: 1, LLM: 2}, s.Progress)

		res, err := b.client.JobList(ctx, river.NewJobListParams().Kinds("classify_list"))
		require.NoError(t, err)
		require.Len(t, res.Jobs, 1)
		require.Equal(t, "cancelled", string(res.Jobs[0].State), "the waiting chunk is cancelled in River")

		r = b.do(t, "GET", "/lists/"+id+"/results?status=CANCELLED", "", "Accept", "application/x-ndjson")
		require.JSONEq(t, `{"row": 4, "input": "slow.com", "ref": "r4", "domain": "slow.com", "status": "CANCELLED"}`, strings.TrimSpace(string(r.body)))

		again := b.do(t, "DELETE", "/lists/"+id, "")
		require.Equal(t, http.StatusOK, again.status, "cancelling twice changes nothing")
		var s2 wire.ListStatus
		require.NoError(t, json.Unmarshal(again.body, &s2))
		require.Equal(t, s.CompletedAt, s2.CompletedAt)
	})
}

// chunking is queue settings with small chunks.
func chunking(rows, inFlight int) jobs.Settings {
	s := jobs.DefaultSettings()
	s.ListChunkRows, s.ListChunksInFlight = rows, inFlight
	return s
}
