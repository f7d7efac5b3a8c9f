package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/httpapi"
	"github.com/domainclass/domainclass/jobs"
)

// contract checks exchanges against the OpenAPI document, and remembers
// which documented responses it saw.
type contract struct {
	doc    *openapi3.T
	router routers.Router

	mu   sync.Mutex
	seen map[string]bool // "METHOD path status"
}

func newContract(t *testing.T) *contract {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(httpapi.OpenAPI)
	require.NoError(t, err)
	require.NoError(t, doc.Validate(context.Background()), "the document itself is valid OpenAPI")
	require.True(t, doc.IsOpenAPI31OrLater())
	// Route on paths alone: the document's server is the relative "/", which
	// the router would compare with the test server's host.
	routed := *doc
	routed.Servers = nil
	router, err := legacy.NewRouter(&routed)
	require.NoError(t, err)
	return &contract{doc: doc, router: router, seen: map[string]bool{}}
}

// check validates one exchange: the route must be documented, the response
// must match its documented status, headers and body, and a request that
// got a 2xx must itself match the document.
func (c *contract) check(req *http.Request, reqBody []byte, status int, header http.Header, body []byte) error {
	req = req.Clone(context.Background())
	req.Body = io.NopCloser(bytes.NewReader(reqBody))
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		return fmt.Errorf("%s %s is not documented: %w", req.Method, req.URL.Path, err)
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	reqErr := openapi3filter.ValidateRequest(context.Background(), in)
	if status >= 200 && status < 300 && reqErr != nil {
		return fmt.Errorf("%s %s was accepted but does not match the document: %w", req.Method, req.URL.Path, reqErr)
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: status, Header: header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true}}
	out.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		return fmt.Errorf("%s %s → %d does not match the document: %w", req.Method, req.URL.Path, status, err)
	}
	c.mu.Lock()
	c.seen[fmt.Sprintf("%s %s %d", req.Method, route.Path, status)] = true
	c.mu.Unlock()
	return nil
}

// documented lists every "METHOD path status" of the document.
func (c *contract) documented() []string {
	var out []string
	for path, item := range c.doc.Paths.Map() {
		for method, op := range item.Operations() {
			for status := range op.Responses.Map() {
				out = append(out, fmt.Sprintf("%s %s %s", method, path, status))
			}
		}
	}
	sort.Strings(out)
	return out
}

// transport checks every exchange of a test's HTTP client.
type transport struct {
	t        *testing.T
	contract *contract
}

func (tr transport) RoundTrip(req *http.Request) (*http.Response, error) {
	var reqBody []byte
	if req.Body != nil {
		reqBody, _ = io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(reqBody))
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if err := tr.contract.check(req, reqBody, resp.StatusCode, resp.Header, body); err != nil {
		tr.t.Error(err)
	}
	return resp, nil
}

func TestOpenAPI(t *testing.T) {
	t.Parallel()
	c := newContract(t)
	ctx := context.Background()
	client := &http.Client{Transport: transport{t: t, contract: c}}
	call := func(base, method, path, body string, header ...string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		require.NoError(t, err)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp
	}

	// The service as it normally runs.
	b := setup(t, setupOpts{metrics: true})
	auth := "Bearer " + b.keyA
	created := call(b.url, "POST", "/domains/classify", `{"domains": ["acme.com", "beta.com", "www.acme.com"]}`, "Authorization", auth, "Idempotency-Key", `"k1"`)
	require.Equal(t, 202, created.StatusCode)
	require.Equal(t, 202, call(b.url, "POST", "/domains/classify", `{"domains": ["acme.com", "beta.com", "www.acme.com"]}`, "Authorization", auth, "Idempotency-Key", `"k1"`).StatusCode)
	call(b.url, "POST", "/domains/classify", `{"domains": "acme.com"}`, "Authorization", auth)
	call(b.url, "POST", "/domains/classify", `{"domains": ["acme.com"]}`)
	call(b.url, "POST", "/domains/classify", `{"domains": ["`+strings.Repeat("a", 70_000)+`"]}`, "Authorization", auth)
	call(b.url, "POST", "/domains/classify", `{"domains": ["10.0.0.1", "x"]}`, "Authorization", auth)
	call(b.url, "POST", "/domains/classify", `{"classifier": "nope", "domains": ["a.com"]}`, "Authorization", auth)
	call(b.url, "POST", "/domains/classify", `{"domains": ["x.com"]}`, "Authorization", auth, "Idempotency-Key", `"k1"`)
	limited := createKey(t, b.db, "limited", db.APIKey{RatePerMinute: 1, MaxQueuedDomains: 2})
	call(b.url, "POST", "/domains/classify", `{"domains": ["a.com", "b.com", "c.com"]}`, "Authorization", "Bearer "+limited)
	call(b.url, "POST", "/domains/classify", `{"domains": ["a.com"]}`, "Authorization", "Bearer "+limited)
	call(b.url, "POST", "/domains/classify", `{"domains": ["b.com"]}`, "Authorization", "Bearer "+limited)

	// The job as it fills in: one domain answered, one failed.
	jobPath := created.Header.Get("Location")
	call(b.url, "GET", jobPath, "", "Authorization", auth)
	jobID := uuid.MustParse(strings.TrimPrefix(jobPath, "/domains/classify/"))
	now := time.Now()
	require.NoError(t, db.JobDomainFinish(ctx, b.db.Pool, jobID, 0, classifier.Result{Domain: "acme.com", Classifier: "cpg",
		Status: classifier.StatusCompleted, Answer: true, Confidence: 5, Reasoning: "Snacks.", Source: classifier.SourceLLM, ClassifiedAt: now}, "o"))
	call(b.url, "GET", jobPath, "", "Authorization", auth)
	require.NoError(t, db.JobDomainFinish(ctx, b.db.Pool, jobID, 1, classifier.Result{Domain: "beta.com", Classifier: "cpg",
		Status: classifier.StatusFailed, Error: "no LLM configured", ClassifiedAt: now}, "o"))
	_, _, err := db.JobComplete(ctx, b.db.Pool, jobID)
	require.NoError(t, err)
	call(b.url, "GET", jobPath, "", "Authorization", auth)
	call(b.url, "GET", "/domains/classify/not-a-uuid", "", "Authorization", auth)
	call(b.url, "GET", jobPath, "")
	call(b.url, "GET", jobPath, "", "Authorization", "Bearer "+b.keyB)
	for _, path := range []string{"/healthz", "/readyz", "/metrics", "/openapi.yaml", "/problems/too-many-domains", "/problems/nope"} {
		call(b.url, "GET", path, "")
	}

	// A request still in flight with the same key: 409.
	entered, release := make(chan struct{}), make(chan struct{})
	slow := setup(t, setupOpts{inserter: func(c *jobs.Client) httpapi.RiverClient {
		return slowInserter{RiverClient: c, next: c, entered: entered, release: release}
	}})
	done := make(chan struct{})
	go func() {
		defer close(done)
		call(slow.url, "POST", "/domains/classify", `{"domains": ["a.com"]}`, "Authorization", "Bearer "+slow.keyA, "Idempotency-Key", "k")
	}()
	<-entered
	require.Equal(t, 409, call(slow.url, "POST", "/domains/classify", `{"domains": ["a.com"]}`, "Authorization", "Bearer "+slow.keyA, "Idempotency-Key", "k").StatusCode)
	close(release)
	<-done

	// Internal errors: River's table is gone.
	broken := setup(t, setupOpts{})
	_, err = broken.db.Pool.Exec(ctx, "DROP TABLE river_job CASCADE")
	require.NoError(t, err)
	require.Equal(t, 500, call(broken.url, "POST", "/domains/classify", `{"domains": ["a.com"]}`, "Authorization", "Bearer "+broken.keyA).StatusCode)
	require.Equal(t, 500, call(broken.url, "GET", "/domains/classify/"+uuid.NewString(), "", "Authorization", "Bearer "+broken.keyA).StatusCode)

	// Postgres down: 503.
	port, err := (&net0{}).closedPort()
	require.NoError(t, err)
	down, err := db.Open(ctx, db.Config{URL: fmt.Sprintf("postgres://postgres@127.0.0.1:%d/x?sslmode=disable", port)})
	require.NoError(t, err)
	t.Cleanup(down.Close)
	unavailable := setup(t, setupOpts{db: down})
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/domains/classify", `{"domains": ["a.com"]}`},
		{"GET", "/domains/classify/" + uuid.NewString(), ""},
		{"GET", "/readyz", ""},
	} {
		require.Equal(t, 503, call(unavailable.url, r.method, r.path, r.body, "Authorization", "Bearer "+unavailable.keyA).StatusCode)
	}

	var missing []string
	for _, d := range c.documented() {
		if !c.seen[d] {
			missing = append(missing, d)
		}
	}
	require.Empty(t, missing, "documented responses never exercised")
}

func TestOpenAPI_CatchesUndocumentedResponses(t *testing.T) {
	t.Parallel()
	c := newContract(t)
	post, _ := http.NewRequest("POST", "http://x/domains/classify", nil)
	get, _ := http.NewRequest("GET", "http://x/domains/classify/"+uuid.NewString(), nil)
	problem := []byte(`{"type": "/problems/x", "title": "X", "status": 418}`)
	jsonHeader := http.Header{"Content-Type": {"application/json"}}
	problemHeader := http.Header{"Content-Type": {"application/problem+json"}}

	require.Error(t, c.check(post, nil, 418, problemHeader, problem), "an undocumented status")
	require.Error(t, c.check(post, []byte(`{"domains":["a.com"]}`), 202, http.Header{"Content-Type": {"application/json"}, "Location": {"/x"}},
		[]byte(`{"status": "PENDING"}`)), "a 202 without job_id")
	require.Error(t, c.check(post, []byte(`{"domains":["a.com"]}`), 202, jsonHeader,
		[]byte(`{"job_id": "`+uuid.NewString()+`", "status": "PENDING", "status_url": "/x", "classifier": "cpg", "domains": []}`)),
		"a 202 without Location")
	require.Error(t, c.check(get, nil, 200, jsonHeader, []byte(`{"job_id": "`+uuid.NewString()+`", "classifier": "cpg", "status": "DONE",
		"created_at": "2026-11-29T00:00:00Z", "completed_at": null, "progress": {"total": 1, "done": 0}, "results": []}`)), "an unknown status")
	require.Error(t, c.check(get, nil, 200, jsonHeader, []byte(`{"job_id": "`+uuid.NewString()+`", "classifier": "cpg", "status": "PENDING",
		"created_at": "2026-11-29T00:00:00Z", "completed_at": null, "progress": {"total": 1, "done": 0}, "results": [], "extra": 1}`)), "an undocumented field")
	require.Error(t, c.check(get, nil, 503, problemHeader, []byte(`{"type": "/problems/unavailable", "title": "U", "status": 503}`)),
		"a 503 without Retry-After")
	nope, _ := http.NewRequest("GET", "http://x/nope", nil)
	require.Error(t, c.check(nope, nil, 404, problemHeader, problem), "an undocumented route")
}
