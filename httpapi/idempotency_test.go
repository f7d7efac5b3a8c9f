package httpapi_test

import (
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/httpapi"
)

// twoClassifiers is a registry of cpg and a second classifier, "other".
func twoClassifiers(t *testing.T) *classifier.Registry {
	t.Helper()
	cpg, err := os.ReadFile("../classifier/classifiers/cpg.yaml")
	require.NoError(t, err)
	other := strings.Replace(string(cpg), "\nname: cpg\n", "\nname: other\n", 1)
	require.NotEqual(t, string(cpg), other)
	r, err := classifier.NewRegistry(fstest.MapFS{"cpg.yaml": {Data: cpg}, "other.yaml": {Data: []byte(other)}})
	require.NoError(t, err)
	return r
}

// documentedInputs returns the names of what a request to method path
// says: its parameters (query and header) and the properties of its JSON
// body, from the OpenAPI document.
func documentedInputs(t *testing.T, method, path string) []string {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(httpapi.OpenAPI)
	require.NoError(t, err)
	op := doc.Paths.Find(path).GetOperation(method)
	require.NotNil(t, op, "%s %s", method, path)
	var names []string
	for _, p := range op.Parameters {
		names = append(names, p.Value.Name)
	}
	if op.RequestBody != nil {
		if mt := op.RequestBody.Value.Content.Get("application/json"); mt != nil {
			for name := range mt.Schema.Value.Properties {
				names = append(names, name)
			}
		}
	}
	slices.Sort(names)
	return names
}

// request is one POST: its query, headers and body.
type request struct {
	query  string
	header []string
	body   string
}

// An Idempotency-Key replays only the request it was first used with:
// every input that changes what a request makes is part of its
// fingerprint. ?tier=economy after ?tier=standard with one key replayed
// the standard list. The walk is over the OpenAPI document's inputs, so a
// new one is walked (or exempted here, with the reason) when it is added.
func TestIdempotencyKey_EveryInputIsInTheFingerprint(t *testing.T) {
	t.Parallel()
	walk := func(t *testing.T, b *testBundle, path string, base request, changed map[string]request) {
		t.Helper()
		for name, change := range changed {
			key := `"walk-` + strings.ToLower(name) + `"`
			send := func(r request) response {
				return b.do(t, http.MethodPost, path+r.query, r.body, append(append([]string{}, r.header...), "Idempotency-Key", key)...)
			}
			first := send(base)
			require.Equal(t, http.StatusAccepted, first.status, "%s: %s", name, first.body)
			require.Equal(t, "true", send(base).header.Get("Idempotent-Replayed"), "%s: the same request replays", name)
			r := send(change)
			if !assert.Equal(t, http.StatusUnprocessableEntity, r.status, "%s changed, the same key: %s", name, r.body) {
				continue
			}
			requireProblem(t, r, http.StatusUnprocessableEntity, "idempotency-key-reused")
		}
	}

	t.Run("Lists", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{registry: twoClassifiers(t), webhooks: true, allowPrivate: true,
			limits: httpapi.CallerLimits{MaxActiveLists: 1000}})
		csv := []string{"Content-Type", "text/csv"}
		body := "domain,website,ref,account\nacme.com,beta.com,r1,a1\n"
		base := request{header: csv, body: body}
		with := func(query string, header ...string) request {
			return request{query: query, header: append(append([]string{}, csv...), header...), body: body}
		}
		changed := map[string]request{
			"classifier":     with("?classifier=other"),
			"tier":           with("?tier=economy"),
			"max_age":        with("?max_age=720h"),
			"refresh":        with("?refresh=true"),
			"domain_column":  with("?domain_column=website"),
			"ref_column":     with("?ref_column=account"),
			"budget":         with("?budget=partial"),
			"over_budget":    with("?over_budget=run_partly"),
			"X-Callback-URL": with("", "X-Callback-URL", "http://127.0.0.1:9/hooks"),
			"the body":       {header: csv, body: body + "gamma.com,delta.com,r2,a2\n"},
		}
		// Not part of the fingerprint: the key itself; dry_run (an estimate
		// writes nothing and takes no key); Content-Encoding (the body is
		// the same request compressed or not, and replays).
		exempt := []string{"Idempotency-Key", "dry_run", "Content-Encoding"}
		var walked []string
		for name := range changed {
			if name != "the body" {
				walked = append(walked, name)
			}
		}
		assert.ElementsMatch(t, documentedInputs(t, http.MethodPost, "/lists"), append(walked, exempt...),
			"every input of POST /lists is walked here or exempted with a reason")
		walk(t, b, "/lists", base, changed)

		// The format is part of the request too: the same bytes as plain text
		// are other rows.
		walk(t, b, "/lists", request{header: csv, body: "domain\nacme.com\n"},
			map[string]request{"Content-Type": {header: []string{"Content-Type", "text/plain"}, body: "domain\nacme.com\n"}})
		// ... and the encoding is not.
		key := []string{"Idempotency-Key", `"walk-gzip"`}
		first := b.do(t, http.MethodPost, "/lists", body, append(csv, key...)...)
		require.Equal(t, http.StatusAccepted, first.status)
		again := b.do(t, http.MethodPost, "/lists", gz(t, body), append(append(csv, key...), "Content-Encoding", "gzip")...)
		require.Equal(t, http.StatusAccepted, again.status, "%s", again.body)
		require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
		require.Equal(t, first.body, again.body)
	})

	t.Run("Jobs", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{registry: twoClassifiers(t), webhooks: true, allowPrivate: true})
		base := request{body: `{"domains": ["acme.com"]}`}
		changed := map[string]request{
			"classifier":     {body: `{"domains": ["acme.com"], "classifier": "other"}`},
			"domains":        {body: `{"domains": ["acme.com", "beta.com"]}`},
			"max_age":        {body: `{"domains": ["acme.com"], "max_age": "720h"}`},
			"refresh":        {body: `{"domains": ["acme.com"], "refresh": true}`},
			"X-Callback-URL": {body: base.body, header: []string{"X-Callback-URL", "http://127.0.0.1:9/hooks"}},
		}
		var walked []string
		for name := range changed {
			walked = append(walked, name)
		}
		assert.ElementsMatch(t, documentedInputs(t, http.MethodPost, "/domains/classify"), append(walked, "Idempotency-Key"),
			"every input of POST /domains/classify is walked here or exempted")
		walk(t, b, "/domains/classify", base, changed)
	})
}
