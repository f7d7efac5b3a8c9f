package main

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier/llm/llmtest"
	"github.com/domainclass/domainclass/cli"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/db/dbtest"
	"github.com/domainclass/domainclass/httpapi"
)

// hookReceiver is a webhook endpoint on loopback that records what it gets.
type hookReceiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []hookDelivery
}

type hookDelivery struct {
	header http.Header
	body   []byte
	at     time.Time
}

func newHookReceiver(t *testing.T) *hookReceiver {
	t.Helper()
	h := &hookReceiver{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		at := time.Now()
		h.mu.Lock()
		h.got = append(h.got, hookDelivery{header: r.Header.Clone(), body: body, at: at})
		h.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// forJob returns the deliveries whose body names job id.
func (h *hookReceiver) forJob(id string) []hookDelivery { return h.naming("job_id", id) }

// forList returns the deliveries whose body names list id.
func (h *hookReceiver) forList(id string) []hookDelivery { return h.naming("list_id", id) }

// naming returns the deliveries whose body has field set to id.
func (h *hookReceiver) naming(field, id string) []hookDelivery {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []hookDelivery
	for _, d := range h.got {
		if bytes.Contains(d.body, []byte(`"`+field+`":"`+id+`"`)) {
			out = append(out, d)
		}
	}
	return out
}

func newWebhookSecret(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

// post sends POST /domains/classify with headers (name, value pairs).
func (e *e2e) post(body string, headers ...string) (int, []byte) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.api.APIURL()+"/domains/classify", strings.NewReader(body))
	require.NoError(e.t, err)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(e.t, err)
	return resp.StatusCode, b
}

func TestEndToEnd_Webhooks(t *testing.T) {
	t.Parallel()

	// A job with X-Callback-URL ends, and the receiver gets one delivery
	// that verifies with the Standard Webhooks reference library. Prints the
	// delivery latency after job completion:
	//   go tool task test -- ./cmd/domainclass -run 'TestEndToEnd_Webhooks/Delivered' -v
	t.Run("DeliveredAndVerified", func(t *testing.T) {
		t.Parallel()
		secret := newWebhookSecret(t)
		rc := newHookReceiver(t)
		e := newE2E(t, func(llmtest.Request) llmtest.Reply { return llmtest.Answer(true, 5, "Makes snacks.") },
			map[string]string{"WEBHOOK_SECRET": secret, "CALLBACK_ALLOW_PRIVATE": "true"})
		e.start(cli.RoleAPI)
		e.start(cli.RoleWorker)
		wh, err := standardwebhooks.NewWebhook(secret)
		require.NoError(t, err)

		const jobs = 7
		var latencies []time.Duration
		for i := range jobs {
			status, body := e.post(fmt.Sprintf(`{"domains": ["brand%d.com"]}`, i), "X-Callback-URL", rc.srv.URL+"/hooks/domainclass")
			require.Equal(t, http.StatusAccepted, status, "body: %s", body)
			var a jobView
			require.NoError(t, json.Unmarshal(body, &a))

			v := e.wait(a.JobID, "COMPLETED", dbtest.Patience())
			var got []hookDelivery
			require.Eventually(t, func() bool {
				got = rc.forJob(a.JobID)
				return len(got) > 0
			}, dbtest.Patience(), 5*time.Millisecond, "no delivery for job %s", a.JobID)
			d := got[0]
			require.NoError(t, wh.Verify(d.body, d.header))
			require.Equal(t, "domainclass/dev", d.header.Get("User-Agent"))

			var payload map[string]any
			require.NoError(t, json.Unmarshal(d.body, &payload))
			requireDocumentedDelivery(t, d.header, payload)
			require.Equal(t, "classification.completed", payload["type"])
			require.NotEmpty(t, payload["timestamp"])
			delete(payload, "type")
			delete(payload, "timestamp")
			resp, err := http.Get(e.api.APIURL() + "/domains/classify/" + a.JobID)
			require.NoError(t, err)
			var polled map[string]any
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&polled))
			resp.Body.Close()
			require.Equal(t, polled, payload, "the delivery is what GET shows")
			answer := payload["results"].([]any)[0].(map[string]any)
			require.Equal(t, []any{"test-model", "none", []any{}}, []any{answer["model"], answer["search"], answer["evidence"]},
				"the delivery's answers carry their provenance")
			require.NotEmpty(t, answer["prompt_version"])

			latencies = append(latencies, d.at.Sub(*v.CompletedAt))
		}
		slices.Sort(latencies)
		t.Logf("webhook delivery latency after job completion (completed_at to receipt): median %s over %d jobs (min %s, max %s)",
			latencies[len(latencies)/2].Round(100*time.Microsecond), jobs,
			latencies[0].Round(100*time.Microsecond), latencies[len(latencies)-1].Round(100*time.Microsecond))

		var webhookJobs int
		require.NoError(t, e.api.DB.Pool.QueryRow(t.Context(), "SELECT count(*) FROM river_job WHERE kind = 'webhook'").Scan(&webhookJobs))
		require.Equal(t, jobs, webhookJobs, "one delivery per job end")
	})

	t.Run("RefusedAtAccept", func(t *testing.T) {
		t.Parallel()
		rc := newHookReceiver(t)
		e := newE2E(t, nil, map[string]string{"WEBHOOK_SECRET": newWebhookSecret(t)})
		e.start(cli.RoleAPI)
		status, body := e.post(`{"domains": ["acme.com"]}`, "X-Callback-URL", rc.srv.URL) // http://127.0.0.1:port
		require.Equal(t, http.StatusUnprocessableEntity, status)
		require.Contains(t, string(body), "/problems/invalid-callback-url")

		off := newE2E(t, nil, nil)
		off.start(cli.RoleAPI)
		status, body = off.post(`{"domains": ["acme.com"]}`, "X-Callback-URL", "https://hooks.example.com/h")
		require.Equal(t, http.StatusUnprocessableEntity, status)
		require.Contains(t, string(body), "/problems/webhooks-not-configured")
	})
}

// A corrected answer reaches who received the old one (issue 39): a job
// with a callback that got brand.com's yes is sent one answer.changed,
// verified with the Standard Webhooks library, when an operator overrides
// it to no; a job without a callback, and one that ended before
// the change notify window, are sent none.
func TestEndToEnd_AnswerChanged(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	secret := newWebhookSecret(t)
	rc := newHookReceiver(t)
	e := newE2E(t, func(llmtest.Request) llmtest.Reply { return llmtest.Answer(true, 2, "Makes snacks.") },
		map[string]string{"WEBHOOK_SECRET": secret, "CALLBACK_ALLOW_PRIVATE": "true"})
	e.tune = func(c *Config) { c.Queue.ChangeFanoutInterval, c.Queue.ChangeNotifyWindow = time.Second, 240*time.Hour }
	e.start(cli.RoleAPI)
	e.start(cli.RoleWorker)
	wh, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)

	submit := func(headers ...string) string {
		t.Helper()
		status, body := e.post(`{"domains": ["brand.com"]}`, headers...)
		require.Equal(t, http.StatusAccepted, status, "body: %s", body)
		var a jobView
		require.NoError(t, json.Unmarshal(body, &a))
		e.wait(a.JobID, "COMPLETED", dbtest.Patience())
		return a.JobID
	}
	told := submit("X-Callback-URL", rc.srv.URL+"/hooks/told")
	silent := submit()
	old := submit("X-Callback-URL", rc.srv.URL+"/hooks/old")
	// The last ended before the window (as the owner: nothing else moves
	// an end).
	owner, err := db.Open(ctx, db.Config{URL: dbtest.URL(), Schema: e.schema, MaxConns: 1})
	require.NoError(t, err)
	defer owner.Close()
	_, err = owner.Pool.Exec(ctx, `UPDATE classify_job SET completed_at = now() - interval '241 hours' WHERE id = $1`, old)
	require.NoError(t, err)
	var received int
	require.NoError(t, owner.Pool.QueryRow(ctx, `SELECT count(DISTINCT provenance_id) FROM classify_job_domain WHERE job_id = ANY($1::uuid[])`,
		[]string{told, silent, old}).Scan(&received))
	require.Equal(t, 1, received, "all three got the same answer (one model call, then the cache)")

	code, _, errOut := e.cli(ctx, "", nil, "override", "set", "brand.com", "--no", "--note", "A retailer, not a maker.", "--by", "alice")
	require.Equal(t, 0, code, errOut)

	changed := func(id string) []hookDelivery {
		var out []hookDelivery
		for _, d := range rc.forJob(id) {
			if bytes.Contains(d.body, []byte(`"type":"answer.changed"`)) {
				out = append(out, d)
			}
		}
		return out
	}
	require.Eventually(t, func() bool { return len(changed(told)) > 0 }, dbtest.Patience(), 10*time.Millisecond,
		"no answer.changed for job %s", told)
	// Every delivery of the change has been worked: nothing more can come.
	require.Eventually(t, func() bool {
		var waiting int
		require.NoError(t, owner.Pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'webhook'
			AND args ? 'change_id' AND finalized_at IS NULL`).Scan(&waiting))
		return waiting == 0
	}, dbtest.Patience(), 10*time.Millisecond)
	d := changed(told)
	require.Len(t, d, 1, "one delivery per change and job")
	require.Empty(t, changed(old), "the job that ended before the window")
	require.Empty(t, changed(silent))
	var deliveries int
	require.NoError(t, owner.Pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'webhook' AND args ? 'change_id'`).Scan(&deliveries))
	require.Equal(t, 1, deliveries)

	require.NoError(t, wh.Verify(d[0].body, d[0].header))
	var payload map[string]any
	require.NoError(t, json.Unmarshal(d[0].body, &payload))
	requireDocumentedCallback(t, "/domains/classify", "answer.changed", d[0].header, payload)
	change := payload["change"].(map[string]any)
	require.Equal(t, []any{"brand.com", "override", true, false}, []any{change["domain"], change["cause"],
		change["old"].(map[string]any)["answer"], change["new"].(map[string]any)["answer"]})
	require.Equal(t, fmt.Sprintf("msg_change_%v_%s", change["id"], told), d[0].header.Get("webhook-id"))

	// The change is listed too.
	resp, err := http.Get(e.api.APIURL() + "/domains/changes?classifier=cpg")
	require.NoError(t, err)
	defer resp.Body.Close()
	var listed struct {
		Changes []map[string]any `json:"changes"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&listed))
	require.Len(t, listed.Changes, 1)
	require.Equal(t, change, listed.Changes[0], "the webhook carries the change as GET /domains/changes lists it")

	// The fan-out is one River job that runs again and again (a snooze),
	// not a job every change fan-out interval.
	var fanouts, ended int
	require.NoError(t, owner.Pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE finalized_at IS NOT NULL)
		FROM river_job WHERE kind = 'answer_change_fanout'`).Scan(&fanouts, &ended))
	require.Equal(t, []int{1, 0}, []int{fanouts, ended})
}

func TestRun_WebhookSecretIsValidated(t *testing.T) {
	t.Parallel()
	var out, errOut strings.Builder
	code := Run(t.Context(), []string{"migrate"}, []string{"WEBHOOK_SECRET=hunter2hunter2"}, strings.NewReader(""), &out, &errOut)
	require.Equal(t, 1, code)
	require.Equal(t, 1, strings.Count(errOut.String(), "\n"), "one clear line: %q", errOut.String())
	require.Contains(t, errOut.String(), "WEBHOOK_SECRET must start with whsec_")
	require.NotContains(t, errOut.String(), "hunter2")

	_, err := LoadConfig([]string{"WEBHOOK_SECRET=" + newWebhookSecret(t), "WEBHOOK_RETRY_SCHEDULE=0s,1s,1m"})
	require.NoError(t, err)
	_, err = LoadConfig([]string{"WEBHOOK_SECRET=whsec_" + base64.StdEncoding.EncodeToString([]byte("short"))})
	require.ErrorContains(t, err, "WEBHOOK_SECRET must hold 24 to 64 random bytes, got 5")
}

// requireDocumentedDelivery checks a delivery against the webhook of the
// OpenAPI document (the callback of POST /domains/classify): its body
// schema and its required headers.
func requireDocumentedDelivery(t *testing.T, header http.Header, payload map[string]any) {
	t.Helper()
	requireDocumentedCallback(t, "/domains/classify", "classification.completed", header, payload)
}

// requireDocumentedCallback checks a delivery against the callback name of
// the POST at path in the OpenAPI document.
func requireDocumentedCallback(t *testing.T, path, name string, header http.Header, payload map[string]any) {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(httpapi.OpenAPI)
	require.NoError(t, err)
	callback := doc.Paths.Find(path).Post.Callbacks[name].Value
	op := callback.Value("{$request.header.X-Callback-URL}").Post
	schema := op.RequestBody.Value.Content.Get("application/json").Schema.Value
	require.NoError(t, schema.VisitJSON(payload, openapi3.EnableJSONSchema2020()), "the delivery matches the document")
	for _, p := range op.Parameters {
		if p.Value.In == "header" && p.Value.Required {
			require.NotEmpty(t, header.Get(p.Value.Name), "documented header %s", p.Value.Name)
			require.NoError(t, p.Value.Schema.Value.VisitJSON(header.Get(p.Value.Name), openapi3.EnableJSONSchema2020()), p.Value.Name)
		}
	}
}

// A reviewer's verdict is a corrected answer too (issue 39): the job with
// a callback that got the model's doubtful yes is sent one answer.changed
// whose cause is review, verified with the Standard Webhooks library, and
// the next job is answered by the verdict.
func TestEndToEnd_ReviewVerdictReachesWhoGotTheOldAnswer(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	secret := newWebhookSecret(t)
	rc := newHookReceiver(t)
	e := newE2E(t, func(llmtest.Request) llmtest.Reply { return llmtest.Answer(true, 2, "Maybe makes snacks.") },
		map[string]string{"WEBHOOK_SECRET": secret, "CALLBACK_ALLOW_PRIVATE": "true"})
	e.tune = func(c *Config) { c.Queue.ChangeFanoutInterval = time.Second }
	e.start(cli.RoleAPI)
	e.start(cli.RoleWorker)
	wh, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)

	status, body := e.post(`{"domains": ["doubtful.com"]}`, "X-Callback-URL", rc.srv.URL+"/hooks/told")
	require.Equal(t, http.StatusAccepted, status, "body: %s", body)
	var a jobView
	require.NoError(t, json.Unmarshal(body, &a))
	e.wait(a.JobID, "COMPLETED", dbtest.Patience())

	// Confidence 2: the low-confidence queue has it.
	next := e.reviewNext("")
	require.NotNil(t, next.Item)
	require.Equal(t, "doubtful.com", next.Item.Domain)
	require.Contains(t, next.Item.Reasons, "low_confidence")
	e.verdict("", next.Item.ID, "no")

	changed := func() []hookDelivery {
		var out []hookDelivery
		for _, d := range rc.forJob(a.JobID) {
			if bytes.Contains(d.body, []byte(`"type":"answer.changed"`)) {
				out = append(out, d)
			}
		}
		return out
	}
	require.Eventually(t, func() bool { return len(changed()) > 0 }, dbtest.Patience(), 10*time.Millisecond,
		"no answer.changed for job %s", a.JobID)
	owner, err := db.Open(ctx, db.Config{URL: dbtest.URL(), Schema: e.schema, MaxConns: 1})
	require.NoError(t, err)
	defer owner.Close()
	require.Eventually(t, func() bool {
		var waiting int
		require.NoError(t, owner.Pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'webhook'
			AND args ? 'change_id' AND finalized_at IS NULL`).Scan(&waiting))
		return waiting == 0
	}, dbtest.Patience(), 10*time.Millisecond)
	d := changed()
	require.Len(t, d, 1, "one delivery of the change")
	require.NoError(t, wh.Verify(d[0].body, d[0].header))
	var payload map[string]any
	require.NoError(t, json.Unmarshal(d[0].body, &payload))
	change := payload["change"].(map[string]any)
	require.Equal(t, []any{"doubtful.com", "review", true, false}, []any{change["domain"], change["cause"],
		change["old"].(map[string]any)["answer"], change["new"].(map[string]any)["answer"]})

	job := e.wait(e.submit("doubtful.com"), "COMPLETED", dbtest.Patience())
	require.Equal(t, "override", job.Results[0].Source, "the verdict answers the next job")
	require.False(t, *job.Results[0].IsCPG)
}
