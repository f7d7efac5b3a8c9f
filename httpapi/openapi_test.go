package httpapi_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/goccy/go-yaml"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/httpapi"
	"github.com/domainclass/domainclass/jobs"
	"github.com/domainclass/domainclass/wire"
)

// contract checks exchanges against the OpenAPI document, and remembers
// which documented responses it saw.
type contract struct {
	doc    *openapi3.T
	router routers.Router

	mu   sync.Mutex
	seen map[string]bool // "METHOD path status", with " media/type" and "METHOD path request media/type"
}

func init() {
	// A list upload and its results can be NDJSON; the document describes
	// the body as a string (each line is checked against its schema below).
	openapi3filter.RegisterBodyDecoder("application/x-ndjson", openapi3filter.PlainBodyDecoder)
	// GET /docs is a page, and GET /openapi.yaml a YAML document's text.
	openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.PlainBodyDecoder)
	openapi3filter.RegisterBodyDecoder("application/yaml", openapi3filter.PlainBodyDecoder)
}

func newContract(t *testing.T) *contract {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(httpapi.OpenAPI)
	require.NoError(t, err)
	require.NoError(t, doc.Validate(context.Background()), "the document itself is valid OpenAPI")
	require.True(t, doc.IsOpenAPI31OrLater())
	tightenAnswerFields(t, doc)
	// Route on paths alone: the document's server is the relative "/", which
	// the router would compare with the test server's host.
	routed := *doc
	routed.Servers = nil
	router, err := legacy.NewRouter(&routed)
	require.NoError(t, err)
	return &contract{doc: doc, router: router, seen: map[string]bool{}}
}

// tightenAnswerFields makes each schema that names a classifier's answer
// field (x-answer-field) as strict as it says: besides its properties,
// only properties matching the pattern, each a boolean. The published
// document says additionalProperties: true instead, which client
// generators can type.
func tightenAnswerFields(t *testing.T, doc *openapi3.T) {
	t.Helper()
	tightened := 0
	for name, ref := range doc.Components.Schemas {
		pattern, ok := ref.Value.Extensions["x-answer-field"].(string)
		if !ok {
			continue
		}
		_, err := regexp.Compile(pattern)
		require.NoError(t, err, "%s's x-answer-field", name)
		no := false
		ref.Value.AdditionalProperties = openapi3.AdditionalProperties{Has: &no}
		ref.Value.PatternProperties = openapi3.Schemas{pattern: openapi3.NewBoolSchema().NewRef()}
		tightened++
	}
	require.Equal(t, 3, tightened, "Result, ListRow and ListRowCSV name their answer field")
}

// check validates one exchange: the route must be documented, the response
// must match its documented status, headers and body (and each line of a
// stream of rows the schema its media type names as contentSchema), and a
// request that got a 2xx must itself match the document.
func (c *contract) check(req *http.Request, reqBody []byte, status int, header http.Header, body []byte) error {
	req = req.Clone(context.Background())
	if strings.EqualFold(req.Header.Get("Content-Encoding"), "gzip") {
		// The document describes the body as the server reads it.
		if zr, err := gzip.NewReader(bytes.NewReader(reqBody)); err == nil {
			if plain, err := io.ReadAll(zr); err == nil {
				reqBody = plain
			}
		}
	}
	req.Body = io.NopCloser(bytes.NewReader(reqBody))
	// kin-openapi's router reads a path item only by its literal path, and
	// matches "/domains/classify" to "/domains/classify/{job_id}": whether
	// the document has the path and the method is decided here.
	if item := c.pathItem(req.URL.Path); item == nil {
		return c.checkUnrouted(req, http.StatusNotFound, status, header, body)
	} else if item.GetOperation(req.Method) == nil {
		return c.checkUnrouted(req, http.StatusMethodNotAllowed, status, header, body)
	}
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
	mediaType := mediaTypeOf(header.Get("Content-Type"))
	if rows := rowSchema(route.Operation, status, mediaType); rows != nil {
		if err := checkRows(rows, mediaType, body); err != nil {
			return fmt.Errorf("%s %s → %d (%s) does not match the document: %w", req.Method, req.URL.Path, status, mediaType, err)
		}
	}
	c.mu.Lock()
	key := fmt.Sprintf("%s %s %d", req.Method, route.Path, status)
	c.seen[key] = true
	c.seen[key+" "+mediaType] = true
	if status >= 200 && status < 300 && len(reqBody) > 0 {
		c.seen[fmt.Sprintf("%s %s request %s", req.Method, route.Path, mediaTypeOf(req.Header.Get("Content-Type")))] = true
	}
	c.mu.Unlock()
	return nil
}

// pathItem is the document's path item whose template matches path (a
// {param} matches one segment, not empty), or nil.
func (c *contract) pathItem(path string) *openapi3.PathItem {
	got := strings.Split(path, "/")
	for template, item := range c.doc.Paths.Map() {
		want := strings.Split(template, "/")
		if len(want) != len(got) {
			continue
		}
		match := true
		for i, seg := range want {
			if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
				match = match && got[i] != ""
			} else {
				match = match && seg == got[i]
			}
		}
		if match {
			return item
		}
	}
	return nil
}

// checkUnrouted validates the answer to a request that no operation
// describes against the document's x-unrouted-responses: want is 404 for a
// path it does not have, 405 for a method a path does not have.
func (c *contract) checkUnrouted(req *http.Request, want, status int, header http.Header, body []byte) error {
	if status != want {
		return fmt.Errorf("%s %s is not documented, and answered %d, not %d", req.Method, req.URL.Path, status, want)
	}
	refs, _ := c.doc.Extensions["x-unrouted-responses"].(map[string]any)
	ref, _ := refs[strconv.Itoa(want)].(map[string]any)
	name := strings.TrimPrefix(fmt.Sprint(ref["$ref"]), "#/components/responses/")
	resp := c.doc.Components.Responses[name]
	if resp == nil {
		return fmt.Errorf("x-unrouted-responses names no response for %d", want)
	}
	op := openapi3.NewOperation()
	op.Responses = openapi3.NewResponses(openapi3.WithStatus(want, resp))
	route := &routers.Route{Spec: c.doc, Path: req.URL.Path, Method: req.Method, Operation: op}
	in := &openapi3filter.RequestValidationInput{Request: req, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: status, Header: header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true}}
	out.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		return fmt.Errorf("%s %s → %d does not match x-unrouted-responses: %w", req.Method, req.URL.Path, status, err)
	}
	c.mu.Lock()
	c.seen[fmt.Sprintf("unrouted %d", want)] = true
	c.mu.Unlock()
	return nil
}

func mediaTypeOf(contentType string) string {
	mt, _, _ := mime.ParseMediaType(contentType)
	return mt
}

// rowSchema is the schema of each line of a body that streams rows: the
// document can only say such a body is a string, and names what each line
// holds as the string's contentSchema (a component, such as ListRow).
func rowSchema(op *openapi3.Operation, status int, mediaType string) *openapi3.SchemaRef {
	resp := op.Responses.Status(status)
	if resp == nil || resp.Value == nil {
		return nil
	}
	mt := resp.Value.Content.Get(mediaType)
	if mt == nil || mt.Schema == nil || mt.Schema.Value == nil {
		return nil
	}
	return mt.Schema.Value.ContentSchema
}

// checkRows validates a stream of rows line by line against the row
// schema ref: each NDJSON line as a JSON document; a CSV's header against
// the schema's properties (every column documented, every property a
// column), then each record as the object its non-empty cells make.
func checkRows(ref *openapi3.SchemaRef, mediaType string, body []byte) error {
	name := strings.TrimPrefix(ref.Ref, "#/components/schemas/")
	if ref.Value == nil {
		return fmt.Errorf("no schema %s", name)
	}
	schema := ref.Value
	var rows []any
	switch mediaType {
	case "application/x-ndjson":
		for i, line := range bytes.Split(bytes.TrimSuffix(body, []byte("\n")), []byte("\n")) {
			if len(body) == 0 {
				break
			}
			var v any
			if err := json.Unmarshal(line, &v); err != nil {
				return fmt.Errorf("line %d is not JSON: %w", i+1, err)
			}
			rows = append(rows, v)
		}
	case "text/csv":
		records, err := csv.NewReader(bytes.NewReader(body)).ReadAll()
		if err != nil {
			return fmt.Errorf("not CSV: %w", err)
		}
		if len(records) == 0 {
			return errors.New("no header row")
		}
		header := records[0]
		// A column is a property, or matches a pattern property (a
		// classifier's own answer field); a property that matches a
		// pattern (is_cpg) is a column of its classifier's results only.
		columnSchema := func(col string) *openapi3.Schema {
			if p := schema.Properties[col]; p != nil {
				return p.Value
			}
			for pattern, p := range schema.PatternProperties {
				if regexp.MustCompile(pattern).MatchString(col) {
					return p.Value
				}
			}
			return nil
		}
		patterned := func(col string) bool {
			for pattern := range schema.PatternProperties {
				if regexp.MustCompile(pattern).MatchString(col) {
					return true
				}
			}
			return false
		}
		for _, col := range header {
			if columnSchema(col) == nil {
				return fmt.Errorf("column %q is not a property of %s", col, name)
			}
		}
		for prop := range schema.Properties {
			if !slices.Contains(header, prop) && !patterned(prop) {
				return fmt.Errorf("property %q of %s is not a column", prop, name)
			}
		}
		for _, rec := range records[1:] {
			row := map[string]any{}
			for i, cell := range rec {
				prop := columnSchema(header[i])
				switch {
				case cell == "" && (!slices.Contains(schema.Required, header[i]) || !prop.Type.Is("string")):
					// An empty cell is a field the row leaves out.
				case prop.Type.Is("integer") || prop.Type.Is("number"):
					row[header[i]] = cell // not a number: fails the schema's type
					if n, err := strconv.ParseFloat(cell, 64); err == nil {
						row[header[i]] = n
					}
				case prop.Type.Is("boolean"):
					row[header[i]] = cell
					if b, err := strconv.ParseBool(cell); err == nil {
						row[header[i]] = b
					}
				default:
					row[header[i]] = cell
				}
			}
			rows = append(rows, row)
		}
	default:
		return fmt.Errorf("rows as %q are not documented", mediaType)
	}
	for i, row := range rows {
		if err := schema.VisitJSON(row, openapi3.EnableJSONSchema2020(), openapi3.VisitAsResponse()); err != nil {
			return fmt.Errorf("row %d does not match %s: %w", i+1, name, err)
		}
	}
	return nil
}

// callbacks are the document's webhooks: each is a callback of the
// operation whose X-Callback-URL it is sent to, by its name.
func (c *contract) callbacks() map[string]*openapi3.PathItem {
	out := map[string]*openapi3.PathItem{}
	for _, item := range c.doc.Paths.Map() {
		for _, op := range item.Operations() {
			for name, cb := range op.Callbacks {
				if cb.Value == nil {
					continue
				}
				for _, target := range cb.Value.Map() {
					out[name] = target
				}
			}
		}
	}
	return out
}

// checkWebhook validates a delivery of the document's webhook name, as a
// request to the receiver: its headers and its body.
func (c *contract) checkWebhook(name string, header http.Header, body []byte) error {
	item := c.callbacks()[name]
	if item == nil || item.Post == nil {
		return fmt.Errorf("webhook %s is not documented", name)
	}
	req, err := http.NewRequest("POST", "http://receiver/hook", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header = header.Clone()
	route := &routers.Route{Spec: c.doc, Path: name, PathItem: item, Method: "POST", Operation: item.Post}
	in := &openapi3filter.RequestValidationInput{Request: req, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
		return fmt.Errorf("webhook %s does not match the document: %w", name, err)
	}
	c.mu.Lock()
	c.seen["webhook "+name] = true
	c.mu.Unlock()
	return nil
}

// documented lists every "METHOD path status" of the document; where a
// response or a request body has more than one media type, each of them
// ("METHOD path status media/type", "METHOD path request media/type"); and
// every "webhook name" (a callback of an operation).
func (c *contract) documented() []string {
	var out []string
	for path, item := range c.doc.Paths.Map() {
		for method, op := range item.Operations() {
			for status, resp := range op.Responses.Map() {
				key := fmt.Sprintf("%s %s %s", method, path, status)
				out = append(out, key)
				if resp.Value != nil && len(resp.Value.Content) > 1 {
					for mt := range resp.Value.Content {
						out = append(out, key+" "+mt)
					}
				}
			}
			if op.RequestBody != nil && op.RequestBody.Value != nil && len(op.RequestBody.Value.Content) > 1 {
				for mt := range op.RequestBody.Value.Content {
					out = append(out, fmt.Sprintf("%s %s request %s", method, path, mt))
				}
			}
		}
	}
	for name := range c.callbacks() {
		out = append(out, "webhook "+name)
	}
	if refs, ok := c.doc.Extensions["x-unrouted-responses"].(map[string]any); ok {
		for status := range refs {
			out = append(out, "unrouted "+status)
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

// override sets a yes override of domain for cpg and returns it.
func override(t *testing.T, d *db.DB, domain, note string) classifier.Override {
	t.Helper()
	ctx := context.Background()
	_, _, err := db.OverrideSet(ctx, d.Pool, []classifier.Override{{Classifier: "cpg", Domain: domain, Answer: true,
		Confidence: 5, Note: note, SetBy: "alice"}})
	require.NoError(t, err)
	o, err := db.OverrideGet(ctx, d.Pool, "cpg", domain)
	require.NoError(t, err)
	return o
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
	require.Equal(t, 415, call(b.url, "POST", "/domains/classify", `{"domains": ["acme.com"]}`, "Authorization", auth,
		"Content-Type", "text/plain").StatusCode)
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
	// A job an operator's override answered: who and why come with it.
	overridden := call(b.url, "POST", "/domains/classify", `{"domains": ["gamma.com"]}`, "Authorization", auth).Header.Get("Location")
	gamma := override(t, b.db, "gamma.com", "A grocer, not a maker.")
	require.NoError(t, db.JobDomainFinish(ctx, b.db.Pool, uuid.MustParse(strings.TrimPrefix(overridden, "/domains/classify/")), 0,
		gamma.Result(), "o"))
	call(b.url, "GET", overridden, "", "Authorization", auth)
	call(b.url, "GET", "/domains/classify/not-a-uuid", "", "Authorization", auth)
	// Answers that changed: acme.com's yes overridden to no, published.
	_, _, err = db.OverrideSet(ctx, b.db.Pool, []classifier.Override{{Classifier: "cpg", Domain: "acme.com", Answer: false,
		Confidence: 5, Note: "A grocer.", SetBy: "alice"}})
	require.NoError(t, err)
	require.Equal(t, 1, publishChanges(t, b.db))
	require.Equal(t, 200, call(b.url, "GET", "/domains/changes?classifier=cpg&limit=10", "", "Authorization", auth).StatusCode)
	require.Equal(t, 400, call(b.url, "GET", "/domains/changes?since=nope", "", "Authorization", auth).StatusCode)
	require.Equal(t, 422, call(b.url, "GET", "/domains/changes?classifier=nope", "", "Authorization", auth).StatusCode)
	require.Equal(t, 401, call(b.url, "GET", "/domains/changes", "").StatusCode)
	call(b.url, "GET", jobPath, "")
	call(b.url, "GET", jobPath, "", "Authorization", "Bearer "+b.keyB)
	for _, path := range []string{"/healthz", "/readyz", "/metrics", "/openapi.yaml", "/docs", "/problems/too-many-domains", "/problems/nope"} {
		call(b.url, "GET", path, "")
	}
	// Requests no operation describes (issue 36: their answers were in no
	// document): a path it does not have, a method a path does not have.
	require.Equal(t, 404, call(b.url, "GET", "/domains", "", "Authorization", auth).StatusCode)
	notAllowed := call(b.url, "PUT", "/lists/"+uuid.NewString(), "", "Authorization", auth)
	require.Equal(t, 405, notAllowed.StatusCode)
	require.Equal(t, "DELETE, GET", notAllowed.Header.Get("Allow"))
	require.Equal(t, "POST", call(b.url, "GET", "/domains/classify", "", "Authorization", auth).Header.Get("Allow"))
	call(b.url, "HEAD", "/healthz", "")
	call(b.url, "HEAD", "/readyz", "")
	// The caller: without a budget, with one (and a list over it), and
	// without a key.
	call(b.url, "GET", "/callers/me", "", "Authorization", auth)
	require.NoError(t, db.CallerBudgetSet(ctx, b.db.Pool, "team-b", db.CallerBudget{ModelCallsPerDay: 2, SpendPerDayUSD: 2.5}))
	_, _, err = db.CallerSpendReserve(ctx, b.db.Pool, "team-b", 0.25)
	require.NoError(t, err)
	call(b.url, "GET", "/callers/me", "", "Authorization", "Bearer "+b.keyB)
	require.Equal(t, 429, call(b.url, "POST", "/lists", "a.com\nb.com\n", "Authorization", "Bearer "+b.keyB, "Content-Type", "text/plain").StatusCode)
	require.Equal(t, 422, call(b.url, "POST", "/lists", "a.com\nb.com\nc.com\n", "Authorization", "Bearer "+b.keyB, "Content-Type", "text/plain").StatusCode)
	require.Equal(t, 400, call(b.url, "POST", "/lists?budget=some", "a.com\n", "Authorization", "Bearer "+b.keyB, "Content-Type", "text/plain").StatusCode)
	call(b.url, "GET", "/callers/me", "")

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
	_, err = broken.db.Pool.Exec(ctx, "DROP TABLE caller_spend")
	require.NoError(t, err)
	require.Equal(t, 500, call(broken.url, "GET", "/callers/me", "", "Authorization", "Bearer "+broken.keyA).StatusCode)
	// ... and the lists' table too: every list route.
	_, err = broken.db.Pool.Exec(ctx, "DROP TABLE list CASCADE")
	require.NoError(t, err)
	for _, r := range everyListRoute(uuid.NewString()) {
		require.Equal(t, 500, call(broken.url, r.method, r.path, r.body, append(r.header, "Authorization", "Bearer "+broken.keyA)...).StatusCode,
			"%s %s", r.method, r.path)
	}
	require.Equal(t, 500, call(broken.url, "GET", "/lists", "", "Authorization", "Bearer "+broken.keyA).StatusCode)
	_, err = broken.db.Pool.Exec(ctx, "DROP TABLE answer_change CASCADE")
	require.NoError(t, err)
	require.Equal(t, 500, call(broken.url, "GET", "/domains/changes", "", "Authorization", "Bearer "+broken.keyA).StatusCode)

	// Postgres down: 503.
	unavailable := setup(t, setupOpts{db: downDB(t)})
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/domains/classify", `{"domains": ["a.com"]}`},
		{"GET", "/domains/classify/" + uuid.NewString(), ""},
		{"GET", "/readyz", ""},
		{"HEAD", "/readyz", ""},
		{"GET", "/callers/me", ""},
		{"GET", "/domains/changes", ""},
	} {
		require.Equal(t, 503, call(unavailable.url, r.method, r.path, r.body, "Authorization", "Bearer "+unavailable.keyA).StatusCode)
	}
	for _, r := range everyListRoute(uuid.NewString()) {
		require.Equal(t, 503, call(unavailable.url, r.method, r.path, r.body, append(r.header, "Authorization", "Bearer "+unavailable.keyA)...).StatusCode,
			"%s %s", r.method, r.path)
	}
	require.Equal(t, 503, call(unavailable.url, "GET", "/lists", "", "Authorization", "Bearer "+unavailable.keyA).StatusCode)

	exerciseLists(t, c, call)
	exerciseReview(t, call)

	var missing []string
	for _, d := range c.documented() {
		if !c.seen[d] {
			missing = append(missing, d)
		}
	}
	require.Empty(t, missing, "documented responses never exercised")
}

// listRoute is one request to a list route.
type listRoute struct {
	method, path, body string
	header             []string
}

// everyListRoute is one well-formed request to each list route, for list
// id.
func everyListRoute(id string) []listRoute {
	return []listRoute{
		{"POST", "/lists", "a.com\n", []string{"Content-Type", "text/plain"}},
		{"GET", "/lists/" + id, "", nil},
		{"GET", "/lists/" + id + "/results", "", nil},
		{"DELETE", "/lists/" + id, "", nil},
		{"POST", "/lists/" + id + "/retry", "", nil},
	}
}

// exerciseLists makes real exchanges with every list route, in each
// documented status, request format and results format, through call
// (whose transport checks each against the document), and delivers both
// webhooks with the real worker, each checked by c.
func exerciseLists(t *testing.T, c *contract, call func(base, method, path, body string, header ...string) *http.Response) {
	t.Helper()
	ctx := context.Background()
	send := func(base, method, path, body string, header ...string) response {
		t.Helper()
		r := call(base, method, path, body, header...)
		out, err := io.ReadAll(r.Body) // the checking transport kept the body
		require.NoError(t, err)
		return response{status: r.StatusCode, header: r.Header, body: out}
	}
	upload := func(b *testBundle, query, contentType, body string, header ...string) response {
		t.Helper()
		return send(b.url, "POST", "/lists"+query, body, append([]string{"Authorization", "Bearer " + b.keyA, "Content-Type", contentType}, header...)...)
	}
	accepted := func(r response) wire.ListAccepted {
		t.Helper()
		require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
		var a wire.ListAccepted
		require.NoError(t, json.Unmarshal(r.body, &a))
		require.Equal(t, "/lists/"+a.ListID, r.header.Get("Location"))
		return a
	}
	status := func(r response, want classifier.Status) wire.ListStatus {
		t.Helper()
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		var s wire.ListStatus
		require.NoError(t, json.Unmarshal(r.body, &s))
		require.Equal(t, want, s.Status)
		return s
	}
	lines := func(r response) []string {
		t.Helper()
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		require.Equal(t, "application/x-ndjson; charset=utf-8", r.header.Get("Content-Type"))
		return strings.Split(strings.TrimSuffix(string(r.body), "\n"), "\n")
	}
	hooks := newHookRecorder(t)

	// Uploads: CSV (refs, a duplicate, rejected rows, an empty input) with
	// an Idempotency-Key, replayed; NDJSON; plain text; gzip CSV; three of
	// them with a callback. The service can sign, and reaches loopback.
	l := setup(t, setupOpts{webhooks: true, allowPrivate: true, limits: httpapi.CallerLimits{MaxActiveLists: 100}})
	auth := "Bearer " + l.keyA
	csvBody := "company,domain,ref\n" +
		"Unilever,https://www.Unilever.com/brands,crm-1\n" +
		"Nope,10.0.0.1,crm-2\n" +
		"Unilever again,unilever.com,crm-3\n" +
		"Acme,acme.io,crm-4\n" +
		"Bad,bad.com,crm-5\n" +
		"Empty,,crm-6\n"
	pending := accepted(upload(l, "", "text/csv", csvBody, "Idempotency-Key", `"crm-export-1"`))
	require.Equal(t, []wire.RejectedRow{{Row: 2, Input: "10.0.0.1", Reason: classifier.ReasonIPAddress},
		{Row: 6, Input: "", Reason: classifier.ReasonEmpty}}, pending.RejectedSample)
	replay := upload(l, "", "text/csv", csvBody, "Idempotency-Key", `"crm-export-1"`)
	require.Equal(t, pending, accepted(replay))
	require.Equal(t, "true", replay.header.Get("Idempotent-Replayed"))
	requireProblem(t, upload(l, "", "text/csv", csvBody+"Extra,extra.com,crm-7\n", "Idempotency-Key", `"crm-export-1"`), 422, "idempotency-key-reused")
	completed := accepted(upload(l, "", "application/x-ndjson", `{"domain": "a.com", "ref": 7}`+"\n"+`{"domain": "b.com"}`+"\nnot json\n",
		"X-Callback-URL", hooks.url()))
	failed := accepted(upload(l, "?classifier=cpg", "text/plain; charset=utf-8", "# my list\nc.com\n\nwww.d.com\nlocalhost\n",
		"X-Callback-URL", hooks.url()))
	cancelled := accepted(upload(l, "", "text/csv", gz(t, "domain,ref\ne.com,r1\nf.com,r2\n"), "Content-Encoding", "gzip",
		"X-Callback-URL", hooks.url()))

	// Dry runs: the estimate without a price, and with one.
	estimate := upload(l, "?dry_run=true", "text/plain", "unilever.com\nfresh.com\nlocalhost\n")
	require.Equal(t, http.StatusOK, estimate.status, "%s", estimate.body)
	require.Contains(t, string(estimate.body), `"estimated_cost_usd":null`)
	small := setup(t, setupOpts{lists: httpapi.ListLimits{MaxRows: 3, MaxBytes: 1000}, limits: httpapi.CallerLimits{MaxActiveLists: 1},
		estimate: httpapi.Estimator{Model: "gpt-test", Price: func(string, float64, float64, bool) (float64, bool) { return 0.001, true }}})
	priced := upload(small, "?dry_run=true", "text/plain", "a.com\nb.com\n")
	require.Equal(t, http.StatusOK, priced.status, "%s", priced.body)
	var est wire.ListEstimate
	require.NoError(t, json.Unmarshal(priced.body, &est))
	require.NotNil(t, est.EstimatedCostUSD)

	// An upload too slow: 408 (sent by hand, a byte at a time, and checked
	// against the document as the transport checks the others).
	trickled := setup(t, setupOpts{lists: httpapi.ListLimits{UploadMinRate: 1000, UploadRateWindow: time.Second}})
	tooSlow := startTrickle(t, trickled.url, trickled.keyA, "/lists", "text/plain", 100*time.Millisecond).answered(15 * time.Second)
	require.NotNil(t, tooSlow)
	requireProblem(t, *tooSlow, http.StatusRequestTimeout, "upload-too-slow")
	slowReq, err := http.NewRequest(http.MethodPost, trickled.url+"/lists", http.NoBody)
	require.NoError(t, err)
	slowReq.Header.Set("Content-Type", "text/plain")
	require.NoError(t, c.check(slowReq, nil, tooSlow.status, tooSlow.header, tooSlow.body))

	// Refused uploads.
	requireProblem(t, upload(l, "", "application/json", `{"domains": ["a.com"]}`), 415, "unsupported-media-type")
	requireProblem(t, upload(l, "", "text/plain", "a.com", "Content-Encoding", "br"), 415, "unsupported-media-type")
	requireProblem(t, upload(l, "", "text/csv", ""), 400, "unreadable-list")
	requireProblem(t, upload(l, "", "text/plain", "not gzip", "Content-Encoding", "gzip"), 400, "unreadable-list")
	requireProblem(t, upload(l, "", "text/csv", "company,website\nAcme,acme.io\n"), 400, "no-domain-column")
	requireProblem(t, upload(l, "?dry_run=maybe", "text/plain", "a.com"), 400, "invalid-query")
	requireProblem(t, upload(l, "", "text/plain", "a.com", "Idempotency-Key", strings.Repeat("k", 300)), 400, "invalid-idempotency-key")
	requireProblem(t, upload(small, "", "text/plain", "a.com\nb.com\nc.com\nd.com\n"), 413, "list-too-large")
	requireProblem(t, upload(small, "", "text/plain", gz(t, strings.Repeat("a.com\n", 400)), "Content-Encoding", "gzip"), 413, "list-too-large")
	requireProblem(t, upload(l, "?classifier=b2b", "text/plain", "a.com"), 422, "unknown-classifier")
	noValid := requireProblem(t, upload(l, "", "text/plain", "localhost\n10.0.0.1\n"), 422, "no-valid-rows")
	require.Equal(t, []wire.ItemError{{Row: 1, Input: "localhost", Reason: classifier.ReasonLocalhost},
		{Row: 2, Input: "10.0.0.1", Reason: classifier.ReasonIPAddress}}, noValid.Errors,
		"issue 36: each row's number as data, not only inside the text")
	requireProblem(t, upload(l, "", "text/plain", "a.com", "X-Callback-URL", "ftp://hooks.example.com/h"), 422, "invalid-callback-url")
	requireProblem(t, upload(small, "", "text/plain", "a.com", "X-Callback-URL", "https://hooks.example.com/h"), 422, "webhooks-not-configured")
	accepted(upload(small, "", "text/plain", "a.com"))
	limited := upload(small, "", "text/plain", "b.com")
	requireProblem(t, limited, 429, "too-many-lists")
	require.Equal(t, "60", limited.header.Get("Retry-After"))

	// An upload still in flight with the same key: 409.
	entered, release := make(chan struct{}), make(chan struct{})
	slow := setup(t, setupOpts{inserter: func(c *jobs.Client) httpapi.RiverClient {
		return &slowListInserter{RiverClient: c, entered: entered, release: release}
	}})
	var held response
	done := make(chan struct{})
	go func() {
		defer close(done)
		held = upload(slow, "", "text/plain", "a.com", "Idempotency-Key", "k")
	}()
	<-entered
	requireProblem(t, upload(slow, "", "text/plain", "a.com", "Idempotency-Key", "k"), 409, "idempotency-key-in-flight")
	close(release)
	<-done
	accepted(held)

	// A list as it fills in: one row answered (and its duplicate), one
	// failed, two rejected, one pending; read in both formats, filtered and
	// resumed.
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	finish := func(list string, row int, r classifier.Result) {
		t.Helper()
		r.Classifier, r.ClassifiedAt = "cpg", at
		_, err := db.ListRowFinish(ctx, l.db.Pool, uuid.MustParse(list), row, r, "o")
		require.NoError(t, err)
	}
	finish(pending.ListID, 1, override(t, l.db, "unilever.com", `Dove, Knorr and "Hellmann's".`).Result())
	finish(pending.ListID, 5, classifier.Result{Domain: "bad.com", Status: classifier.StatusFailed, Error: "no LLM configured"})
	path := "/lists/" + pending.ListID
	s := status(send(l.url, "GET", path, "", "Authorization", auth), classifier.StatusPending)
	require.Equal(t, wire.ListProgress{Done: 5, Total: 6, Completed: 2, Failed: 1, Rejected: 2, Override: 2}, s.Progress)
	for _, accept := range [][]string{nil, {"Accept", "text/csv"}, {"Accept", "*/*"}} {
		r := send(l.url, "GET", path+"/results", "", append([]string{"Authorization", auth}, accept...)...)
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		require.Equal(t, "text/csv; charset=utf-8", r.header.Get("Content-Type"))
		records, err := csv.NewReader(bytes.NewReader(r.body)).ReadAll()
		require.NoError(t, err)
		require.Len(t, records, 7, "a header and 6 rows")
	}
	require.Len(t, lines(send(l.url, "GET", path+"/results", "", "Authorization", auth, "Accept", "application/x-ndjson")), 6)
	require.Len(t, lines(send(l.url, "GET", path+"/results?status=COMPLETED,REJECTED&after=2", "", "Authorization", auth,
		"Accept", "application/x-ndjson")), 2, "rows 3 and 6")
	// Issue 36: the status filter is case-insensitive, as documented; q=0
	// refuses a format, and application/jsonl is NDJSON.
	require.Len(t, lines(send(l.url, "GET", path+"/results?status=completed,%20Rejected&after=2", "", "Authorization", auth,
		"Accept", "application/x-ndjson")), 2, "rows 3 and 6")
	require.Len(t, lines(send(l.url, "GET", path+"/results", "", "Authorization", auth,
		"Accept", "text/csv;q=0, application/x-ndjson")), 6)
	require.Len(t, lines(send(l.url, "GET", path+"/results", "", "Authorization", auth, "Accept", "application/jsonl")), 6)
	requireProblem(t, send(l.url, "GET", path+"/results", "", "Authorization", auth,
		"Accept", "text/csv;q=0, application/x-ndjson;q=0"), 406, "not-acceptable")
	requireProblem(t, send(l.url, "GET", path+"/results", "", "Authorization", auth, "Accept", "application/pdf"), 406, "not-acceptable")
	requireProblem(t, send(l.url, "GET", path+"/results?status=DONE", "", "Authorization", auth), 400, "invalid-query")
	requireProblem(t, send(l.url, "GET", path+"/results?after=-1", "", "Authorization", auth), 400, "invalid-query")
	// A caller with a download in progress, at its limit of one.
	reading := setup(t, setupOpts{lists: httpapi.ListLimits{DownloadMinRate: 1024, DownloadRateWindow: 10 * time.Minute},
		limits: httpapi.CallerLimits{MaxDownloads: 1}})
	big, _ := bigList(t, reading, reading.keyA, 20_000)
	d, refused := startDownload(t, reading.url, reading.keyA, "/lists/"+big+"/results")
	require.Nil(t, refused)
	requireProblem(t, send(reading.url, "GET", "/lists/"+big+"/results", "", "Authorization", "Bearer "+reading.keyA), 429, "too-many-downloads")
	d.close()
	for _, r := range everyListRoute("nope")[1:] {
		requireProblem(t, send(l.url, r.method, r.path, r.body, append(r.header, "Authorization", auth)...), 400, "invalid-list-id")
	}
	for _, r := range everyListRoute(pending.ListID) {
		requireProblem(t, send(l.url, r.method, r.path, r.body, r.header...), 401, "unauthorized")
	}
	for _, r := range everyListRoute(pending.ListID)[1:] {
		requireProblem(t, send(l.url, r.method, r.path, r.body, append(r.header, "Authorization", "Bearer "+l.keyB)...), 404, "not-found")
	}
	requireProblem(t, send(l.url, "GET", "/lists/"+uuid.NewString(), "", "Authorization", auth), 404, "not-found")

	// The caller's lists, a page at a time.
	page := send(l.url, "GET", "/lists?limit=2", "", "Authorization", auth)
	require.Equal(t, http.StatusOK, page.status, "%s", page.body)
	var index wire.ListIndex
	require.NoError(t, json.Unmarshal(page.body, &index))
	require.Len(t, index.Lists, 2)
	require.NotEmpty(t, index.NextCursor)
	require.Equal(t, http.StatusOK, send(l.url, "GET", "/lists?cursor="+index.NextCursor, "", "Authorization", auth).status)
	requireProblem(t, send(l.url, "GET", "/lists?limit=1000", "", "Authorization", auth), 400, "invalid-query")
	requireProblem(t, send(l.url, "GET", "/lists", ""), 401, "unauthorized")

	// The lists end: every row final (COMPLETED), given up (FAILED),
	// cancelled (CANCELLED, twice); read after.
	finish(completed.ListID, 1, classifier.Result{Domain: "a.com", Status: classifier.StatusCompleted, Answer: false, Confidence: 4,
		Reasoning: "A software company.", Source: classifier.SourceLLM})
	finish(completed.ListID, 2, classifier.Result{Domain: "b.com", Status: classifier.StatusCompleted, Answer: true, Confidence: 2,
		Reasoning: "Sells soap.", Source: classifier.SourceLLM})
	completedEnd, ended, err := db.ListComplete(ctx, l.db.Pool, uuid.MustParse(completed.ListID))
	require.NoError(t, err)
	require.True(t, ended)
	status(send(l.url, "GET", "/lists/"+completed.ListID, "", "Authorization", auth), classifier.StatusCompleted)
	require.Len(t, lines(send(l.url, "GET", "/lists/"+completed.ListID+"/results", "", "Authorization", auth, "Accept", "application/x-ndjson")), 3)
	failedEnd, ended, err := db.ListFail(ctx, l.db.Pool, uuid.MustParse(failed.ListID), "given up after 25 attempts")
	require.NoError(t, err)
	require.True(t, ended)
	require.Equal(t, "given up after 25 attempts", status(send(l.url, "GET", "/lists/"+failed.ListID, "", "Authorization", auth), classifier.StatusFailed).Error)
	require.Equal(t, http.StatusOK, send(l.url, "GET", "/lists/"+failed.ListID+"/results", "", "Authorization", auth).status)
	status(send(l.url, "DELETE", "/lists/"+cancelled.ListID, "", "Authorization", auth), classifier.StatusCancelled)
	status(send(l.url, "DELETE", "/lists/"+cancelled.ListID, "", "Authorization", auth), classifier.StatusCancelled)
	require.Len(t, lines(send(l.url, "GET", "/lists/"+cancelled.ListID+"/results?status=CANCELLED", "", "Authorization", auth,
		"Accept", "application/x-ndjson")), 2)

	// The webhooks, delivered by the real worker: list.completed for each
	// way a list ends (the cancel's delivery as DELETE queued it), and
	// classification.completed.
	job := send(l.url, "POST", "/domains/classify", `{"domains": ["acme.com"]}`, "Authorization", auth, "X-Callback-URL", hooks.url())
	require.Equal(t, http.StatusAccepted, job.status, "%s", job.body)
	var jobAccepted wire.Accepted
	require.NoError(t, json.Unmarshal(job.body, &jobAccepted))
	jobID := uuid.MustParse(jobAccepted.JobID)
	require.NoError(t, db.JobDomainFinish(ctx, l.db.Pool, jobID, 0, classifier.Result{Domain: "acme.com", Classifier: "cpg",
		Status: classifier.StatusFailed, Error: "no LLM configured", ClassifiedAt: at}, "o"))
	jobEnd, ended, err := db.JobComplete(ctx, l.db.Pool, jobID)
	require.NoError(t, err)
	require.True(t, ended)
	queued, err := l.client.JobList(ctx, river.NewJobListParams().Kinds(jobs.WebhookArgs{}.Kind()))
	require.NoError(t, err)
	require.Len(t, queued.Jobs, 1, "the cancel queued its delivery")
	var cancelArgs jobs.WebhookArgs
	require.NoError(t, json.Unmarshal(queued.Jobs[0].EncodedArgs, &cancelArgs))
	require.Equal(t, cancelled.ListID, cancelArgs.ListID)

	secret := make([]byte, 32)
	_, err = rand.Read(secret)
	require.NoError(t, err)
	worker := &jobs.WebhookWorker{DB: l.db.Pool, Client: jobs.WebhookClient(true, 5*time.Second), Key: secret,
		UserAgent: "domainclass/test", Settings: jobs.DefaultSettings(), Logger: slog.New(slog.DiscardHandler)}
	for _, d := range []struct {
		event  string
		args   jobs.WebhookArgs
		status classifier.Status
	}{
		{"list.completed", jobs.WebhookArgs{ListID: completed.ListID, EndedAt: completedEnd.CompletedAt}, classifier.StatusCompleted},
		{"list.completed", jobs.WebhookArgs{ListID: failed.ListID, EndedAt: failedEnd.CompletedAt}, classifier.StatusFailed},
		{"list.completed", cancelArgs, classifier.StatusCancelled},
		{"classification.completed", jobs.WebhookArgs{JobID: jobID.String(), EndedAt: jobEnd.CompletedAt}, classifier.StatusCompleted},
	} {
		require.NoError(t, worker.Work(ctx, &river.Job[jobs.WebhookArgs]{JobRow: &rivertype.JobRow{ID: 1, Attempt: 1, MaxAttempts: 1}, Args: d.args}))
		got := hooks.take(t)
		require.NoError(t, c.checkWebhook(d.event, got.header, got.body))
		require.Equal(t, d.args.WebhookID(), got.header.Get("webhook-id"))
		var payload struct {
			Type   string            `json:"type"`
			Status classifier.Status `json:"status"`
		}
		require.NoError(t, json.Unmarshal(got.body, &payload))
		require.Equal(t, d.event, payload.Type)
		require.Equal(t, d.status, payload.Status)
	}

	// answer.changed: the job got acme.com's answer, which a review changed.
	require.NoError(t, db.AnswerChangeRecord(ctx, l.db.Pool, db.AnswerChange{Classifier: "cpg", Domain: "acme.com",
		Cause: classifier.CauseReview, Old: classifier.AnswerState{Answer: new(true), Confidence: new(2), ProvenanceID: new(uuid.New())},
		New: classifier.AnswerState{Answer: new(false), Confidence: new(5), ProvenanceID: new(uuid.New())}}))
	var changeID int64
	require.NoError(t, l.db.Pool.QueryRow(ctx, `SELECT max(id) FROM answer_change`).Scan(&changeID))
	for _, args := range []jobs.WebhookArgs{{ChangeID: changeID, JobID: jobID.String()}, {ChangeID: changeID, ListID: completed.ListID}} {
		require.NoError(t, worker.Work(ctx, &river.Job[jobs.WebhookArgs]{JobRow: &rivertype.JobRow{ID: 1, Attempt: 1, MaxAttempts: 1}, Args: args}))
		got := hooks.take(t)
		require.NoError(t, c.checkWebhook("answer.changed", got.header, got.body))
		require.Equal(t, args.WebhookID(), got.header.Get("webhook-id"))
	}

	// Retries: the FAILED list's rows queued again; the cancelled one
	// refused; a caller at its limit of active lists refused.
	var again wire.ListRetried
	r := send(l.url, "POST", "/lists/"+failed.ListID+"/retry", "", "Authorization", auth)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.NoError(t, json.Unmarshal(r.body, &again))
	require.Equal(t, 2, again.Requeued)
	requireProblem(t, send(l.url, "POST", "/lists/"+cancelled.ListID+"/retry", "", "Authorization", auth), 409, "list-cancelled")
	smallLists := send(small.url, "GET", "/lists", "", "Authorization", "Bearer "+small.keyA)
	require.NoError(t, json.Unmarshal(smallLists.body, &index))
	require.Len(t, index.Lists, 1)
	_, _, err = db.ListFail(ctx, small.db.Pool, uuid.MustParse(index.Lists[0].ListID), "given up")
	require.NoError(t, err)
	accepted(upload(small, "", "text/plain", "b.com"))
	busy := send(small.url, "POST", "/lists/"+index.Lists[0].ListID+"/retry", "", "Authorization", "Bearer "+small.keyA)
	requireProblem(t, busy, 429, "too-many-lists")
	require.Equal(t, "60", busy.header.Get("Retry-After"))
}

// slowListInserter holds the first list upload inside its transaction,
// after its Idempotency-Key is taken.
type slowListInserter struct {
	httpapi.RiverClient
	entered, release chan struct{}
	first            atomic.Bool
}

func (s *slowListInserter) InsertManyTx(ctx context.Context, tx pgx.Tx, params []river.InsertManyParams) ([]*rivertype.JobInsertResult, error) {
	if s.first.CompareAndSwap(false, true) {
		close(s.entered)
		<-s.release
	}
	return s.RiverClient.InsertManyTx(ctx, tx, params)
}

// hookRecorder is a webhook receiver on loopback that keeps what it gets.
type hookRecorder struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []hookDelivery
}

type hookDelivery struct {
	header http.Header
	body   []byte
}

func newHookRecorder(t *testing.T) *hookRecorder {
	t.Helper()
	h := &hookRecorder{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.got = append(h.got, hookDelivery{header: r.Header.Clone(), body: body})
		h.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hookRecorder) url() string { return h.srv.URL + "/hook" }

// take returns the one delivery received since the last take.
func (h *hookRecorder) take(t *testing.T) hookDelivery {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	require.Len(t, h.got, 1, "one delivery")
	d := h.got[0]
	h.got = nil
	return d
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
	require.Error(t, c.check(nope, nil, 200, jsonHeader, []byte(`{}`)), "an undocumented route that answers")
	require.NoError(t, c.check(nope, nil, 404, problemHeader, problem), "an undocumented route: 404, as x-unrouted-responses says")
	put, _ := http.NewRequest("PUT", "http://x/domains/classify", nil)
	require.Error(t, c.check(put, nil, 405, problemHeader, problem), "a 405 without Allow")
	require.Error(t, c.check(put, nil, 404, problemHeader, problem), "a method a documented path does not have is 405, not 404")
}

// The same for lists: each case changes one thing in an exchange that
// passes, so it fails for that thing alone.
func TestOpenAPI_CatchesUndocumentedListResponses(t *testing.T) {
	t.Parallel()
	c := newContract(t)
	id := uuid.NewString()
	jsonHeader := http.Header{"Content-Type": {"application/json"}}
	problemHeader := http.Header{"Content-Type": {"application/problem+json"}}
	// without returns the JSON object doc without key.
	without := func(doc, key string) []byte {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(doc), &m))
		_, ok := m[key]
		require.True(t, ok, key)
		delete(m, key)
		b, err := json.Marshal(m)
		require.NoError(t, err)
		return b
	}

	post, _ := http.NewRequest("POST", "http://x/lists", nil)
	post.Header.Set("Content-Type", "text/plain")
	upload := []byte("a.com\n")
	accepted := `{"list_id": "` + id + `", "status": "PENDING", "status_url": "/lists/` + id + `", "results_url": "/lists/` + id + `/results",
		"classifier": "cpg", "rows": 1, "domains": 1, "duplicates": 0, "rejected": 0, "rejected_sample": []}`
	located := http.Header{"Content-Type": {"application/json"}, "Location": {"/lists/" + id}}
	require.NoError(t, c.check(post, upload, 202, located, []byte(accepted)))
	require.Error(t, c.check(post, upload, 202, jsonHeader, []byte(accepted)), "a 202 without Location")
	require.Error(t, c.check(post, upload, 202, located, without(accepted, "results_url")), "a 202 without results_url")
	ndjson := post.Clone(context.Background())
	ndjson.Header.Set("Content-Type", "application/json")
	require.Error(t, c.check(ndjson, []byte(`{"domains": ["a.com"]}`), 202, located, []byte(accepted)), "an accepted upload of an undocumented type")
	tooMany := []byte(`{"type": "/problems/too-many-lists", "title": "T", "status": 429, "detail": "d"}`)
	require.NoError(t, c.check(post, upload, 429, http.Header{"Content-Type": {"application/problem+json"}, "Retry-After": {"60"}}, tooMany))
	require.Error(t, c.check(post, upload, 429, problemHeader, tooMany), "a 429 without Retry-After")

	get, _ := http.NewRequest("GET", "http://x/lists/"+id, nil)
	listStatus := `{"list_id": "` + id + `", "classifier": "cpg", "status": "RUNNING", "created_at": "2026-11-29T00:00:00Z",
		"completed_at": null, "expires_at": null, "rows": 3, "domains": 2, "results_url": "/lists/` + id + `/results", "tier": "standard", "cost_usd": 0, "run_errors": 0,
		"progress": {"done": 1, "total": 3, "completed": 0, "failed": 0, "rejected": 1, "cancelled": 0, "override": 0, "known": 0, "cache": 0, "llm": 0}}`
	require.NoError(t, c.check(get, nil, 200, jsonHeader, []byte(listStatus)))
	for _, field := range []string{"results_url", "completed_at", "expires_at", "progress", "rows"} {
		require.Error(t, c.check(get, nil, 200, jsonHeader, without(listStatus, field)), "a ListStatus without %s", field)
	}
	require.Error(t, c.check(get, nil, 200, jsonHeader, []byte(strings.Replace(listStatus, `"RUNNING"`, `"DONE"`, 1))), "an unknown status")
	require.Error(t, c.check(get, nil, 200, jsonHeader, []byte(strings.Replace(listStatus, `"llm": 0`, `"llm": 0, "model": 0`, 1))),
		"an undocumented progress count")

	results, _ := http.NewRequest("GET", "http://x/lists/"+id+"/results", nil)
	ndjsonHeader := http.Header{"Content-Type": {"application/x-ndjson; charset=utf-8"}}
	csvHeader := http.Header{"Content-Type": {"text/csv; charset=utf-8"}}
	line := `{"row": 1, "input": "www.acme.com", "ref": "r1", "domain": "acme.com", "status": "COMPLETED", "is_cpg": true, "answer": true, "confidence": 5,
		"reasoning": "Snacks.", "source": "llm", "classified_at": "2026-11-30T12:00:00Z"}`
	rejected := `{"row": 2, "input": "", "status": "REJECTED", "error": "empty input"}`
	lines := func(ls ...string) []byte {
		var b bytes.Buffer
		for _, l := range ls {
			require.NoError(t, json.Compact(&b, []byte(l)))
			b.WriteString("\n")
		}
		return b.Bytes()
	}
	require.NoError(t, c.check(results, nil, 200, ndjsonHeader, lines(line, rejected)))
	own := strings.Replace(line, `"is_cpg": true`, `"is_b2b_software": true`, 1)
	require.NoError(t, c.check(results, nil, 200, ndjsonHeader, lines(own, rejected)), "another classifier's row")
	require.Error(t, c.check(results, nil, 200, ndjsonHeader, lines(strings.Replace(own, `"is_b2b_software": true`,
		`"is_b2b_software": "yes"`, 1))), "another classifier's answer that is not a boolean")
	require.Error(t, c.check(results, nil, 200, ndjsonHeader, lines(line, string(without(rejected, "status")))), "a row without status")
	require.Error(t, c.check(results, nil, 200, ndjsonHeader, lines(line, strings.Replace(rejected, `"REJECTED"`, `"SKIPPED"`, 1))),
		"a row of an unknown status")
	require.Error(t, c.check(results, nil, 200, ndjsonHeader, lines(strings.Replace(line, `"row": 1`, `"row": 1, "list_id": "x"`, 1))),
		"a row with an undocumented field")
	require.Error(t, c.check(results, nil, 200, ndjsonHeader, append(lines(line), "not json\n"...)), "a line that is not JSON")
	require.Error(t, c.check(results, nil, 200, jsonHeader, []byte(`[`+line+`]`)), "rows as an undocumented media type")

	// csvOf writes csvRecords (the header first) as change leaves each.
	csvRecords := [][]string{
		{"row", "input", "ref", "domain", "status", "is_cpg", "confidence", "reasoning", "source", "classified_at", "error",
			"model", "prompt_version", "evidence_urls", "answer"},
		{"1", "www.acme.com", "r1", "acme.com", "COMPLETED", "true", "5", "Snacks, \"crisps\".", "llm", "2026-11-30T12:00:00Z", "",
			"gpt-5.4-mini", "v1", "https://acme.com/ https://en.wikipedia.org/wiki/Acme", "true"},
		{"2", "", "", "", "REJECTED", "", "", "", "", "", "empty input", "", "", "", ""},
	}
	csvOf := func(change func(i int, rec []string) []string) []byte {
		var b bytes.Buffer
		w := csv.NewWriter(&b)
		for i, rec := range csvRecords {
			require.NoError(t, w.Write(change(i, slices.Clone(rec))))
		}
		w.Flush()
		return b.Bytes()
	}
	same := func(_ int, rec []string) []string { return rec }
	require.NoError(t, c.check(results, nil, 200, csvHeader, csvOf(same)))
	ownField := func(field, value string) func(int, []string) []string {
		return func(i int, rec []string) []string {
			switch i {
			case 0:
				rec[5] = field
			case 1:
				rec[5] = value
			}
			return rec
		}
	}
	require.NoError(t, c.check(results, nil, 200, csvHeader, csvOf(ownField("is_b2b_software", "false"))),
		"another classifier's results, its answer under its own field")
	require.Error(t, c.check(results, nil, 200, csvHeader, csvOf(ownField("is_b2b_software", "maybe"))),
		"another classifier's answer that is not a boolean")
	require.Error(t, c.check(results, nil, 200, csvHeader, csvOf(ownField("b2b", "true"))), "an answer field not named is_...")
	require.Error(t, c.check(results, nil, 200, csvHeader, csvOf(func(_ int, rec []string) []string {
		return rec[:len(rec)-1]
	})), "no generic answer column")
	require.Error(t, c.check(results, nil, 200, csvHeader, csvOf(func(i int, rec []string) []string {
		if i == 0 {
			return append(rec, "list_id")
		}
		return append(rec, id)
	})), "an undocumented column")
	require.Error(t, c.check(results, nil, 200, csvHeader, csvOf(func(_ int, rec []string) []string {
		return slices.Delete(rec, 8, 9) // source
	})), "a documented field without its column")
	require.Error(t, c.check(results, nil, 200, csvHeader, csvOf(func(i int, rec []string) []string {
		if i == 1 {
			rec[6] = "five"
		}
		return rec
	})), "a confidence that is not a number")
	require.Error(t, c.check(results, nil, 200, csvHeader, csvOf(func(i int, rec []string) []string {
		if i == 1 {
			rec[5] = "yes"
		}
		return rec
	})), "an answer that is not a boolean")
	require.Error(t, c.check(results, nil, 200, csvHeader, csvOf(func(i int, rec []string) []string {
		if i == 2 {
			rec[4] = ""
		}
		return rec
	})), "a row without status")
	require.Error(t, c.check(results, nil, 200, csvHeader, csvOf(func(i int, rec []string) []string {
		if i == 2 {
			rec[0] = "0"
		}
		return rec
	})), "a row number below 1")

	hook := http.Header{"Content-Type": {"application/json"}, "Webhook-Id": {"msg_" + id + "_1764409029427207"},
		"Webhook-Timestamp": {"1764409029"}, "Webhook-Signature": {"v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4="}}
	payload := `{"type": "list.completed", "timestamp": "2026-11-30T12:00:00Z", "list_id": "` + id + `", "classifier": "cpg",
		"status": "CANCELLED", "created_at": "2026-11-29T00:00:00Z", "completed_at": "2026-11-30T12:00:00Z", "rows": 3, "domains": 2,
		"expires_at": "2026-12-30T12:00:00Z", "results_url": "/lists/` + id + `/results", "tier": "economy", "cost_usd": 0.0123, "run_errors": 0,
		"progress": {"done": 3, "total": 3, "completed": 0, "failed": 0, "rejected": 1, "cancelled": 2, "override": 0, "known": 0, "cache": 0, "llm": 0}}`
	require.NoError(t, c.checkWebhook("list.completed", hook, []byte(payload)))
	require.Error(t, c.checkWebhook("list.completed", hook, without(payload, "results_url")), "a list.completed without results_url")
	require.Error(t, c.checkWebhook("list.completed", hook, without(payload, "expires_at")), "a list.completed without expires_at")
	require.Error(t, c.checkWebhook("list.completed", hook, []byte(strings.Replace(payload, `"CANCELLED"`, `"RUNNING"`, 1))),
		"a list.completed of a list not ended")
	require.Error(t, c.checkWebhook("list.completed", hook, []byte(strings.Replace(payload, `"results_url"`, `"results": [], "results_url"`, 1))),
		"a list.completed with rows")
	unsigned := hook.Clone()
	unsigned.Del("Webhook-Signature")
	require.Error(t, c.checkWebhook("list.completed", unsigned, []byte(payload)), "a delivery without a signature")
	require.Error(t, c.checkWebhook("list.started", hook, []byte(payload)), "an undocumented webhook")
}

// Code generators name a type after each component and cannot follow a
// $ref into another schema's properties (oapi-codegen stops at
// "#/components/schemas/JobReport/properties/job_id"), so every shape
// they must name is a component: no $ref points inside a component, and
// no property of a component is an object with properties of its own or
// an enum of more than one value written out in place.
func TestOpenAPI_NamesEveryShape(t *testing.T) {
	t.Parallel()
	var raw any
	require.NoError(t, yaml.Unmarshal(httpapi.OpenAPI, &raw))
	whole := regexp.MustCompile(`^#/components/[a-zA-Z]+/[A-Za-z0-9_.-]+$`)
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok && !whole.MatchString(ref) {
				t.Errorf("%s: $ref %q points inside a component; make what it points at a component of its own", path, ref)
			}
			for k, x := range v {
				walk(path+"/"+k, x)
			}
		case []any:
			for i, x := range v {
				walk(fmt.Sprintf("%s/%d", path, i), x)
			}
		}
	}
	walk("#", raw)

	doc := newContract(t).doc
	var inPlace func(path string, s *openapi3.SchemaRef)
	inPlace = func(path string, s *openapi3.SchemaRef) {
		if s == nil || s.Ref != "" || s.Value == nil {
			return
		}
		if len(s.Value.Properties) > 0 {
			t.Errorf("%s: an object written out in place; make it a component", path)
		}
		if len(s.Value.Enum) > 1 {
			t.Errorf("%s: an enum written out in place; make it a component", path)
		}
		inPlace(path+"/items", s.Value.Items)
	}
	for name, s := range doc.Components.Schemas {
		for prop, p := range s.Value.Properties {
			inPlace("#/components/schemas/"+name+"/properties/"+prop, p)
		}
	}
}
