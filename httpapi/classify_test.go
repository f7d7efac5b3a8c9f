package httpapi_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/db/dbtest"
	"github.com/domainclass/domainclass/httpapi"
	"github.com/domainclass/domainclass/internal/apikey"
	"github.com/domainclass/domainclass/jobs"
	"github.com/domainclass/domainclass/wire"
)

type testBundle struct {
	db     *db.DB
	apiDB  *db.DB // the API's: db, unless setupOpts said otherwise
	client *jobs.Client
	url    string
	// keyA and keyB are real API keys of callers team-a and team-b.
	keyA, keyB string
}

type setupOpts struct {
	inserter func(*jobs.Client) httpapi.RiverClient
	db       *db.DB // the API's database, when not the test's own (Postgres down)
	limits   httpapi.CallerLimits
	authTTL  time.Duration
	// dbTimeout is Config.DBTimeout (zero: the tests' patience, so that a
	// busy machine slow to open a connection does not turn a test's request
	// into a 503; tests of the quick 503 set a short one).
	dbTimeout time.Duration
	metrics   bool
	// webhooks and allowPrivate are Config.Webhooks and
	// Config.CallbackAllowPrivate.
	webhooks, allowPrivate bool
	// lists overrides the list limits, queue the queue settings and
	// estimate the estimator's inputs (zero fields: the defaults).
	lists    httpapi.ListLimits
	queue    jobs.Settings
	estimate httpapi.Estimator
	// tracer, when set, is Config.TracerProvider, with W3C trace context
	// as the propagator.
	tracer trace.TracerProvider
	// apiMaxConns, when set, gives the API a pool of its own of that many
	// connections, on the test's schema.
	apiMaxConns int32
	// registry, when set, is the API's classifier registry.
	registry *classifier.Registry
	// clock, when set, is Config.Clock: the caller rate counts in its time.
	clock *testClock
	// trustTrace is Config.TrustIncomingTrace.
	trustTrace bool
	// serverTimeouts, when set, are the server's ReadTimeout and
	// WriteTimeout, as cmd/domainclass sets them for short requests.
	serverTimeouts time.Duration
	// operators, when set, are the operators' user and password: /review
	// is mounted behind them.
	operators []string
}

// testClock is a clock that moves only when the test moves it, and by
// step each time it is read (as a real clock moves while a request runs).
type testClock struct {
	mu   sync.Mutex
	now  time.Time
	step time.Duration
}

func newTestClock() *testClock { return &testClock{now: time.Now()} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(c.step)
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// operator is the operators' user (0) or password (1), "" when unset.
func operator(creds []string, i int) string {
	if len(creds) > i {
		return creds[i]
	}
	return ""
}

// createKey stores a new API key for name and returns it.
func createKey(t testing.TB, d *db.DB, name string, override db.APIKey) string {
	t.Helper()
	key, hash := apikey.New()
	override.Name, override.Prefix = name, key[:8]
	require.NoError(t, db.APIKeyInsert(context.Background(), d.Pool, override, hash))
	return key
}

func setup(t testing.TB, opts setupOpts) *testBundle {
	t.Helper()
	b := &testBundle{db: dbtest.New(t)}
	var err error
	b.client, err = jobs.NewClient(b.db.Pool, jobs.ClientConfig{Settings: jobs.DefaultSettings(), Schema: b.db.Schema,
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	var inserter httpapi.RiverClient = b.client
	if opts.inserter != nil {
		inserter = opts.inserter(b.client)
	}
	apiDB := b.db
	if opts.db != nil {
		apiDB = opts.db
	}
	if opts.apiMaxConns > 0 {
		apiDB, err = db.Open(context.Background(), db.Config{URL: dbtest.URL(), Schema: b.db.Schema, MaxConns: opts.apiMaxConns})
		require.NoError(t, err)
		t.Cleanup(apiDB.Close)
	}
	b.apiDB = apiDB
	registry := opts.registry
	if registry == nil {
		registry = classifier.DefaultRegistry()
	}
	b.keyA = createKey(t, b.db, "team-a", db.APIKey{})
	b.keyB = createKey(t, b.db, "team-b", db.APIKey{})
	limits := opts.limits
	limits.RatePerMinute = cmp.Or(limits.RatePerMinute, 1000)
	limits.MaxQueuedDomains = cmp.Or(limits.MaxQueuedDomains, 1000)
	var metrics *httpapi.Metrics
	var metricsHandler http.Handler
	if opts.metrics {
		reg := prometheus.NewRegistry()
		metrics, metricsHandler = httpapi.NewMetrics(reg), promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	}
	var propagator propagation.TextMapPropagator
	if opts.tracer != nil {
		propagator = propagation.TraceContext{}
	}
	var clock func() time.Time
	if opts.clock != nil {
		clock = opts.clock.Now
	}
	srv := httptest.NewUnstartedServer(httpapi.New(httpapi.Config{
		TracerProvider: opts.tracer, Propagator: propagator, TrustIncomingTrace: opts.trustTrace, Clock: clock,
		Metrics: metrics, MetricsHandler: metricsHandler,
		DB: apiDB, DBTimeout: cmp.Or(opts.dbTimeout, dbtest.Patience()), River: inserter, Registry: registry,
		Auth:     httpapi.NewAPIKeyAuth(apiDB.Pool, cmp.Or(opts.authTTL, time.Minute), slog.New(slog.DiscardHandler)),
		Callers:  limits,
		Logger:   slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
		Webhooks: opts.webhooks, CallbackAllowPrivate: opts.allowPrivate,
		Lists: opts.lists, Queue: opts.queue, Estimate: opts.estimate,
		Operators: opts.operators != nil, RiverUIUser: operator(opts.operators, 0), RiverUIPassword: operator(opts.operators, 1),
	}).Handler())
	srv.Config.ReadTimeout, srv.Config.WriteTimeout = opts.serverTimeouts, opts.serverTimeouts
	srv.Start()
	t.Cleanup(srv.Close)
	b.url = srv.URL
	return b
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (b *testBundle) do(t *testing.T, method, path, body string, headers ...string) response {
	t.Helper()
	req, err := http.NewRequest(method, b.url+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+b.keyA)
	if body != "" {
		req.Header.Set("Content-Type", "application/json") // a job's; an upload names its own
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
		} else {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return response{status: resp.StatusCode, header: resp.Header, body: out}
}

// counts returns the rows of every table a request could write.
func (b *testBundle) counts(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{}
	// Domain rows are written only once a domain is final, never at accept.
	for _, table := range []string{"classify_job", "classify_job_domain", "idempotency_key", "river_job"} {
		var n int
		require.NoError(t, b.db.Pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n))
		out[table] = n
	}
	return out
}

var nothing = map[string]int{"classify_job": 0, "classify_job_domain": 0, "idempotency_key": 0, "river_job": 0}

func requireProblem(t *testing.T, r response, status int, slug string) wire.Problem {
	t.Helper()
	require.Equal(t, status, r.status, "body: %s", r.body)
	require.Equal(t, "application/problem+json", r.header.Get("Content-Type"))
	var p wire.Problem
	require.NoError(t, json.Unmarshal(r.body, &p))
	require.Equal(t, "/problems/"+slug, p.Type)
	require.Equal(t, status, p.Status)
	require.NotEmpty(t, p.Title)
	require.NotEmpty(t, p.Detail)
	return p
}

type accepted struct {
	JobID      string `json:"job_id"`
	Status     string `json:"status"`
	StatusURL  string `json:"status_url"`
	Classifier string `json:"classifier"`
	Domains    []struct {
		Input  string `json:"input"`
		Domain string `json:"domain"`
	} `json:"domains"`
}

func TestClassifyCreate(t *testing.T) {
	t.Parallel()

	t.Run("Accepts", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		r := b.do(t, "POST", "/domains/classify",
			`{"classifier": "cpg", "domains": ["https://www.Example.com/about", "acme.io", "example.com"]}`)
		require.Equal(t, http.StatusAccepted, r.status, "body: %s", r.body)
		require.Equal(t, "application/json", r.header.Get("Content-Type"))
		var a accepted
		require.NoError(t, json.Unmarshal(r.body, &a))
		require.Equal(t, "PENDING", a.Status)
		require.Equal(t, "cpg", a.Classifier)
		require.Equal(t, "/domains/classify/"+a.JobID, a.StatusURL)
		require.Equal(t, a.StatusURL, r.header.Get("Location"))
		require.Len(t, a.Domains, 2)
		require.Equal(t, "https://www.Example.com/about", a.Domains[0].Input)
		require.Equal(t, "example.com", a.Domains[0].Domain)
		require.Equal(t, "acme.io", a.Domains[1].Domain)

		require.Equal(t, map[string]int{"classify_job": 1, "classify_job_domain": 0, "idempotency_key": 0, "river_job": 1}, b.counts(t))
		job, err := db.JobGet(context.Background(), b.db.Pool, uuid.MustParse(a.JobID))
		require.NoError(t, err)
		require.Len(t, job.Domains, 2, "the job carries its domains")
		require.Equal(t, "https://www.Example.com/about", job.Domains[0].Input)
		require.Equal(t, "example.com", job.Domains[0].Result.Domain)
		require.Equal(t, classifier.StatusPending, job.Domains[1].Result.Status)
		list, err := b.client.JobList(context.Background(), river.NewJobListParams().Kinds("classify"))
		require.NoError(t, err)
		require.Len(t, list.Jobs, 1)
		require.Equal(t, jobs.QueueClassify, list.Jobs[0].Queue)
		require.JSONEq(t, fmt.Sprintf(`{"job_id": %q}`, a.JobID), string(list.Jobs[0].EncodedArgs))
	})

	t.Run("JSONWithACharsetIsJSON", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		r := b.do(t, "POST", "/domains/classify", `{"domains": ["acme.com"]}`, "Content-Type", "Application/JSON; charset=utf-8")
		require.Equal(t, http.StatusAccepted, r.status, "body: %s", r.body)
	})

	t.Run("ClassifierDefaultsToCPG", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		r := b.do(t, "POST", "/domains/classify", `{"domains": ["acme.io"]}`)
		require.Equal(t, http.StatusAccepted, r.status)
		require.Contains(t, string(r.body), `"classifier":"cpg"`)
	})

	t.Run("TenDistinctAfterDedupeAreAccepted", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		var ds []string
		for i := range 10 {
			ds = append(ds, fmt.Sprintf(`"d%d.com"`, i), fmt.Sprintf(`"www.d%d.com"`, i))
		}
		r := b.do(t, "POST", "/domains/classify", `{"domains": [`+strings.Join(ds, ",")+`]}`)
		require.Equal(t, http.StatusAccepted, r.status, "body: %s", r.body)
	})

	rejected := []struct {
		name, body, slug string
		status           int
		headers          []string
		detail           string
		items            []wire.ItemError
	}{
		{name: "EmptyBody", body: ``, status: 400, slug: "invalid-json", headers: []string{"Content-Type", "application/json"}},
		// Issue 36: JSON sent as text/plain was accepted, though the
		// document allows application/json only. A page in a browser can
		// send text/plain, a form or a body without a type to any site
		// without asking first.
		{name: "JSONAsTextPlain", body: `{"domains": ["acme.com"]}`, status: 415, slug: "unsupported-media-type",
			headers: []string{"Content-Type", "text/plain;charset=UTF-8"},
			detail: "Send the job as JSON with Content-Type: application/json (curl: --json, or -d with " +
				"-H 'Content-Type: application/json'); this request's Content-Type is \"text/plain;charset=UTF-8\"."},
		{name: "NoContentType", body: `{"domains": ["acme.com"]}`, status: 415, slug: "unsupported-media-type",
			headers: []string{"Content-Type", ""},
			detail: "Send the job as JSON with Content-Type: application/json (curl: --json, or -d with " +
				"-H 'Content-Type: application/json'); this request's Content-Type is missing."},
		{name: "FormEncoded", body: `{"domains": ["acme.com"]}`, status: 415, slug: "unsupported-media-type",
			headers: []string{"Content-Type", "application/x-www-form-urlencoded"}},
		{name: "OtherJSONType", body: `{"domains": ["acme.com"]}`, status: 415, slug: "unsupported-media-type",
			headers: []string{"Content-Type", "application/vnd.api+json"}},
		{name: "NotJSON", body: `domains=acme.com`, status: 400, slug: "invalid-json"},
		{name: "ArrayBody", body: `["acme.com"]`, status: 400, slug: "invalid-json"},
		{name: "NullBody", body: `null`, status: 400, slug: "invalid-json"},
		{name: "TruncatedJSON", body: `{"domains": ["acme.com"`, status: 400, slug: "invalid-json"},
		{name: "TrailingData", body: `{"domains": ["acme.com"]} {}`, status: 400, slug: "invalid-json"},
		{name: "DomainsNotArray", body: `{"domains": "acme.com"}`, status: 400, slug: "invalid-json",
			detail: `The field "domains" has the wrong type: want an array of strings.`},
		{name: "DomainNotString", body: `{"domains": [42]}`, status: 400, slug: "invalid-json"},
		{name: "ClassifierNotString", body: `{"classifier": 5, "domains": ["acme.com"]}`, status: 400, slug: "invalid-json",
			detail: `The field "classifier" has the wrong type: want a string.`},
		{name: "BodyOver64KiB", body: `{"domains": ["` + strings.Repeat("a", 65*1024) + `.com"]}`, status: 413, slug: "body-too-large"},
		{name: "UnknownClassifier", body: `{"classifier": "b2b", "domains": ["acme.com"]}`, status: 422, slug: "unknown-classifier",
			detail: `unknown classifier "b2b"; valid classifiers: b2b_software, cpg`},
		{name: "NoDomainsField", body: `{"classifier": "cpg"}`, status: 422, slug: "no-domains"},
		{name: "EmptyDomains", body: `{"domains": []}`, status: 422, slug: "no-domains"},
		{name: "InvalidDomainsAllListed", body: `{"domains": ["acme.com", "10.0.0.1", "", "localhost", "*.x.com", "a.zz"]}`,
			status: 422, slug: "invalid-domains", items: []wire.ItemError{
				{Input: "10.0.0.1", Reason: classifier.ReasonIPAddress},
				{Input: "", Reason: classifier.ReasonEmpty},
				{Input: "localhost", Reason: classifier.ReasonLocalhost},
				{Input: "*.x.com", Reason: classifier.ReasonWildcard},
				{Input: "a.zz", Reason: classifier.ReasonUnknownTLD},
			}},
		{name: "ElevenDistinct", body: `{"domains": ["a1.com","a2.com","a3.com","a4.com","a5.com","a6.com","a7.com","a8.com","a9.com","a10.com","a11.com"]}`,
			status: 422, slug: "too-many-domains",
			detail: "The request has 11 distinct domains; the limit is 10 per job. Split it into several requests."},
		{name: "IdempotencyKeyTooLong", body: `{"domains": ["acme.com"]}`, status: 400, slug: "invalid-idempotency-key",
			headers: []string{"Idempotency-Key", strings.Repeat("k", 256)}},
		{name: "IdempotencyKeyControlChars", body: `{"domains": ["acme.com"]}`, status: 400, slug: "invalid-idempotency-key",
			headers: []string{"Idempotency-Key", "a\tb"}},
		{name: "NoCaller", body: `{"domains": ["acme.com"]}`, status: 401, slug: "unauthorized",
			headers: []string{"Authorization", ""}},
	}
	for _, tt := range rejected {
		t.Run("Rejects"+tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, setupOpts{})
			r := b.do(t, "POST", "/domains/classify", tt.body, tt.headers...)
			p := requireProblem(t, r, tt.status, tt.slug)
			if tt.detail != "" {
				require.Equal(t, tt.detail, p.Detail)
			}
			if tt.items != nil {
				require.Equal(t, tt.items, p.Errors)
			}
			if tt.status == http.StatusUnauthorized {
				require.Equal(t, `Bearer realm="domainclass"`, r.header.Get("WWW-Authenticate"))
			}
			require.Equal(t, nothing, b.counts(t), "nothing may be written on a %d", tt.status)
		})
	}
}

func TestClassifyCreate_IdempotencyKey(t *testing.T) {
	t.Parallel()
	body := `{"domains": ["acme.com", "b.com"]}`

	t.Run("ReplaysTheSame202AndCreatesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		first := b.do(t, "POST", "/domains/classify", body, "Idempotency-Key", `"order-42"`)
		require.Equal(t, http.StatusAccepted, first.status)
		again := b.do(t, "POST", "/domains/classify", body, "Idempotency-Key", `"order-42"`)
		require.Equal(t, http.StatusAccepted, again.status)
		require.Equal(t, first.body, again.body)
		require.Equal(t, first.header.Get("Location"), again.header.Get("Location"))
		require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
		require.Equal(t, map[string]int{"classify_job": 1, "classify_job_domain": 0, "idempotency_key": 1, "river_job": 1}, b.counts(t))
	})

	t.Run("BareTokenKeyWorksToo", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		first := b.do(t, "POST", "/domains/classify", body, "Idempotency-Key", `order-42`)
		again := b.do(t, "POST", "/domains/classify", body, "Idempotency-Key", `"order-42"`)
		require.Equal(t, first.body, again.body)
	})

	t.Run("SameKeyOtherBodyIs422", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		require.Equal(t, http.StatusAccepted, b.do(t, "POST", "/domains/classify", body, "Idempotency-Key", "k1").status)
		before := b.counts(t)
		r := b.do(t, "POST", "/domains/classify", `{"domains": ["other.com"]}`, "Idempotency-Key", "k1")
		requireProblem(t, r, http.StatusUnprocessableEntity, "idempotency-key-reused")
		require.Equal(t, before, b.counts(t))
	})

	t.Run("KeysAreScopedPerCaller", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		a := b.do(t, "POST", "/domains/classify", body, "Idempotency-Key", "k1")
		other := b.do(t, "POST", "/domains/classify", body, "Idempotency-Key", "k1", "Authorization", "Bearer "+b.keyB)
		require.Equal(t, http.StatusAccepted, other.status)
		require.NotEqual(t, a.header.Get("Location"), other.header.Get("Location"), "caller B must not get caller A's job")
	})

	t.Run("SecondRequestWhileFirstInFlightIs409", func(t *testing.T) {
		t.Parallel()
		entered, release := make(chan struct{}), make(chan struct{})
		b := setup(t, setupOpts{inserter: func(c *jobs.Client) httpapi.RiverClient {
			return slowInserter{RiverClient: c, next: c, entered: entered, release: release}
		}})
		done := make(chan response)
		go func() { done <- b.do(t, "POST", "/domains/classify", body, "Idempotency-Key", "k1") }()
		<-entered // the first request is inside its transaction
		second := b.do(t, "POST", "/domains/classify", body, "Idempotency-Key", "k1")
		requireProblem(t, second, http.StatusConflict, "idempotency-key-in-flight")
		close(release)
		first := <-done
		require.Equal(t, http.StatusAccepted, first.status)
		third := b.do(t, "POST", "/domains/classify", body, "Idempotency-Key", "k1")
		require.Equal(t, first.body, third.body)
		require.Equal(t, 1, b.counts(t)["classify_job"])
	})
}

// slowInserter holds the first request inside its transaction.
type slowInserter struct {
	httpapi.RiverClient
	next             httpapi.RiverClient
	entered, release chan struct{}
}

func (s slowInserter) InsertTx(ctx context.Context, tx pgx.Tx, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error) {
	select {
	case s.entered <- struct{}{}:
		<-s.release
	default:
	}
	return s.next.InsertTx(ctx, tx, args, opts)
}

func TestClassifyCreate_RiverInsertFailureWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{inserter: func(*jobs.Client) httpapi.RiverClient {
		// A real River client whose tables are not there: its insert fails
		// inside our transaction, after the job rows were written.
		d := dbtest.New(t)
		broken, err := jobs.NewClient(d.Pool, jobs.ClientConfig{Settings: jobs.DefaultSettings(), Schema: "no_such_schema"})
		require.NoError(t, err)
		return broken
	}})
	r := b.do(t, "POST", "/domains/classify", `{"domains": ["acme.com"]}`, "Idempotency-Key", "k1")
	p := requireProblem(t, r, http.StatusInternalServerError, "internal")
	require.Equal(t, "Internal error.", p.Detail, "internal details never reach the caller")
	require.Equal(t, nothing, b.counts(t))
}

func TestPostgresDown(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{db: downDB(t)})

	for _, tc := range []struct{ method, path, body string }{
		{"POST", "/domains/classify", `{"domains": ["acme.com"]}`},
		{"GET", "/domains/classify/0192f2c4-9a8e-7d3c-b2a1-1234567890ab", ""},
		{"GET", "/readyz", ""},
	} {
		// How fast is TestUnavailable's to prove, without racing the clock.
		r := b.do(t, tc.method, tc.path, tc.body)
		requireProblem(t, r, http.StatusServiceUnavailable, "unavailable")
		require.Equal(t, "2", r.header.Get("Retry-After"))
	}
	health := b.do(t, "GET", "/healthz", "")
	require.Equal(t, http.StatusOK, health.status, "the process itself is up")
}

func TestClassifyGet(t *testing.T) {
	t.Parallel()

	t.Run("PendingJob", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		created := b.do(t, "POST", "/domains/classify", `{"domains": ["b.com", "a.com"]}`)
		require.Equal(t, http.StatusAccepted, created.status)
		r := b.do(t, "GET", created.header.Get("Location"), "")
		require.Equal(t, http.StatusOK, r.status)
		var got map[string]any
		require.NoError(t, json.Unmarshal(r.body, &got))
		var a accepted
		require.NoError(t, json.Unmarshal(created.body, &a))
		require.Equal(t, a.JobID, got["job_id"])
		require.Equal(t, "cpg", got["classifier"])
		require.Equal(t, "PENDING", got["status"])
		require.Nil(t, got["completed_at"])
		require.Contains(t, got, "completed_at", "completed_at is null until the job ends")
		require.NotEmpty(t, got["created_at"])
		require.Equal(t, map[string]any{"total": float64(2), "done": float64(0)}, got["progress"])
		require.Equal(t, []any{
			map[string]any{"domain": "b.com", "status": "PENDING"},
			map[string]any{"domain": "a.com", "status": "PENDING"},
		}, got["results"])
	})

	t.Run("OtherCallersJobIs404", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		created := b.do(t, "POST", "/domains/classify", `{"domains": ["a.com"]}`)
		r := b.do(t, "GET", created.header.Get("Location"), "", "Authorization", "Bearer "+b.keyB)
		requireProblem(t, r, http.StatusNotFound, "not-found")
	})

	t.Run("UnknownJobIs404", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		requireProblem(t, b.do(t, "GET", "/domains/classify/0192f2c4-9a8e-7d3c-b2a1-1234567890ab", ""), http.StatusNotFound, "not-found")
	})

	t.Run("NonUUIDIs400", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		requireProblem(t, b.do(t, "GET", "/domains/classify/42", ""), http.StatusBadRequest, "invalid-job-id")
	})

	t.Run("NoCallerIs401", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		requireProblem(t, b.do(t, "GET", "/domains/classify/42", "", "Authorization", ""), http.StatusUnauthorized, "unauthorized")
	})
}

func TestRoutes(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	requireProblem(t, b.do(t, "GET", "/nope", ""), http.StatusNotFound, "not-found")
	r := b.do(t, "DELETE", "/domains/classify", "")
	requireProblem(t, r, http.StatusMethodNotAllowed, "method-not-allowed")
	require.Equal(t, http.StatusOK, b.do(t, "GET", "/readyz", "").status)
	doc := b.do(t, "GET", "/problems/too-many-domains", "")
	require.Equal(t, http.StatusOK, doc.status)
	require.Contains(t, string(doc.body), "Too many domains")
}
