package main

import (
	"encoding/csv"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier/llm/llmtest"
	"github.com/domainclass/domainclass/cli"
	"github.com/domainclass/domainclass/db/dbtest"
	"github.com/domainclass/domainclass/httpapi"
)

// answerKey is the key a prompt asks the model to answer with.
var answerKey = regexp.MustCompile(`\{"(is_[a-z0-9_]+)": true or false`)

// TestSecondClassifier: a classifier added as a YAML file alone
// (b2b_software) answers through the real API, its CSV and its webhooks in
// its own words: "answer" and its own field, is_b2b_software, and nowhere
// the first classifier's is_cpg. Its answers are cached apart from cpg's.
func TestSecondClassifier(t *testing.T) {
	t.Parallel()
	var wrongQuestion atomic.Int32
	vendors := map[string]bool{"acme-saas.com": true, "bigco-crm.com": true}
	e := newE2E(t, func(r llmtest.Request) llmtest.Reply {
		m := answerKey.FindStringSubmatch(r.System)
		if m == nil || m[1] != "is_b2b_software" || !strings.Contains(r.System, "business-to-business (B2B) software") {
			wrongQuestion.Add(1)
		}
		key := "?"
		if m != nil {
			key = m[1]
		}
		return llmtest.AnswerAs(key, vendors[r.Domain], 4, "Judged from the name.")
	}, map[string]string{"WEBHOOK_SECRET": newWebhookSecret(t), "CALLBACK_ALLOW_PRIVATE": "true"})
	e.start(cli.RoleAll)
	rc := newHookReceiver(t)
	callback := rc.srv.URL + "/hooks/domainclass"
	doc, err := openapi3.NewLoader().LoadFromData(httpapi.OpenAPI)
	require.NoError(t, err)
	documented := func(schema string, v any) {
		t.Helper()
		require.NoError(t, doc.Components.Schemas[schema].Value.VisitJSON(v, openapi3.EnableJSONSchema2020()),
			"%s matches the document", schema)
	}
	noFirstClassifier := func(what string, body []byte) {
		t.Helper()
		require.NotContains(t, string(body), "is_cpg", "%s of a b2b_software request", what)
	}

	// A job.
	status, body := e.post(`{"classifier": "b2b_software", "domains": ["acme-saas.com", "corner-bakery.com"]}`,
		"X-Callback-URL", callback)
	require.Equal(t, http.StatusAccepted, status, "%s", body)
	var accepted struct {
		JobID      string `json:"job_id"`
		Classifier string `json:"classifier"`
	}
	require.NoError(t, json.Unmarshal(body, &accepted))
	require.Equal(t, "b2b_software", accepted.Classifier)
	e.wait(accepted.JobID, "COMPLETED", dbtest.Patience())
	got := httpGet(t, e.api.APIURL()+"/domains/classify/"+accepted.JobID, "application/json")
	noFirstClassifier("the job's results", got)
	var report map[string]any
	require.NoError(t, json.Unmarshal(got, &report))
	documented("JobReport", report)
	require.Equal(t, "b2b_software", report["classifier"])
	answers := map[string][]any{}
	for _, r := range report["results"].([]any) {
		r := r.(map[string]any)
		answers[r["domain"].(string)] = []any{r["status"], r["answer"], r["is_b2b_software"], r["source"]}
	}
	require.Equal(t, map[string][]any{
		"acme-saas.com":     {"COMPLETED", true, true, "llm"},
		"corner-bakery.com": {"COMPLETED", false, false, "llm"},
	}, answers)

	var delivery []hookDelivery
	require.Eventually(t, func() bool {
		delivery = rc.forJob(accepted.JobID)
		return len(delivery) > 0
	}, dbtest.Patience(), 10*time.Millisecond, "no delivery for the job")
	noFirstClassifier("the job's webhook", delivery[0].body)
	var payload map[string]any
	require.NoError(t, json.Unmarshal(delivery[0].body, &payload))
	requireDocumentedDelivery(t, delivery[0].header, payload)
	delete(payload, "type")
	delete(payload, "timestamp")
	require.Equal(t, report, payload, "the delivery is what GET shows")

	// A list: one domain the job answered (from the cache), one fresh, one
	// that is not a domain.
	req, err := http.NewRequest(http.MethodPost, e.api.APIURL()+"/lists?classifier=b2b_software",
		strings.NewReader("domain\nacme-saas.com\nwww.bigco-crm.com\nlocalhost\n"))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "text/csv")
	req.Header.Set("X-Callback-URL", callback)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode, "%s", body)
	var list struct {
		ListID string `json:"list_id"`
	}
	require.NoError(t, json.Unmarshal(body, &list))
	e.waitList(list.ListID, "COMPLETED")

	csvBody := httpGet(t, e.api.APIURL()+"/lists/"+list.ListID+"/results", "text/csv")
	noFirstClassifier("the list's CSV", csvBody)
	records, err := csv.NewReader(strings.NewReader(string(csvBody))).ReadAll()
	require.NoError(t, err)
	header := records[0]
	require.Equal(t, "is_b2b_software", header[5], "the answer column has the classifier's own name")
	require.Equal(t, "answer", header[len(header)-1])
	rows := map[string][]string{}
	for _, rec := range records[1:] {
		rows[rec[1]] = []string{rec[4], rec[5], rec[len(rec)-1], rec[8]} // status, own field, answer, source
	}
	require.Equal(t, map[string][]string{
		"acme-saas.com":     {"COMPLETED", "true", "true", "cache"},
		"www.bigco-crm.com": {"COMPLETED", "true", "true", "llm"},
		"localhost":         {"REJECTED", "", "", ""},
	}, rows)

	ndjson := httpGet(t, e.api.APIURL()+"/lists/"+list.ListID+"/results", "application/x-ndjson")
	noFirstClassifier("the list's NDJSON", ndjson)
	for _, line := range strings.Split(strings.TrimSpace(string(ndjson)), "\n") {
		var row map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &row))
		documented("ListRow", row)
		if row["status"] == "COMPLETED" {
			require.Equal(t, []any{true, true}, []any{row["answer"], row["is_b2b_software"]}, line)
		}
	}

	require.Eventually(t, func() bool {
		delivery = rc.forList(list.ListID)
		return len(delivery) > 0
	}, dbtest.Patience(), 10*time.Millisecond, "no delivery for the list")
	noFirstClassifier("the list's webhook", delivery[0].body)
	require.Contains(t, string(delivery[0].body), `"classifier":"b2b_software"`)

	require.Zero(t, wrongQuestion.Load(), "every model call asked the b2b_software question")
	require.Equal(t, 1, e.llm.Calls("acme-saas.com"), "the list reused the job's answer")
	require.Equal(t, 1, e.llm.Calls("bigco-crm.com"))

	// cpg's answers are its own: the same domain is asked again for cpg,
	// and its result carries is_cpg as it always did.
	status, body = e.post(`{"domains": ["acme-saas.com"]}`)
	require.Equal(t, http.StatusAccepted, status, "%s", body)
	require.NoError(t, json.Unmarshal(body, &accepted))
	e.wait(accepted.JobID, "COMPLETED", dbtest.Patience())
	got = httpGet(t, e.api.APIURL()+"/domains/classify/"+accepted.JobID, "application/json")
	require.Contains(t, string(got), `"is_cpg":`)
	require.Equal(t, 2, e.llm.Calls("acme-saas.com"), "a classifier's cache is its own")
}

// httpGet reads url with an Accept header and wants a 200.
func httpGet(t *testing.T, url, accept string) []byte {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	req.Header.Set("Accept", accept)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	return b
}
