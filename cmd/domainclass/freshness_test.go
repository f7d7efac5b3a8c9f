package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier/llm/llmtest"
	"github.com/domainclass/domainclass/cli"
	"github.com/domainclass/domainclass/db/dbtest"
	"github.com/domainclass/domainclass/wire"
)

// postJob sends a raw POST /domains/classify body and returns the status
// and the body.
func (e *e2e) postJob(body string) (int, []byte) {
	e.t.Helper()
	resp, err := http.Post(e.api.APIURL()+"/domains/classify", "application/json", strings.NewReader(body))
	require.NoError(e.t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (e *e2e) submitBody(body string) string {
	e.t.Helper()
	status, b := e.postJob(body)
	require.Equal(e.t, http.StatusAccepted, status, "%s", b)
	var v jobView
	require.NoError(e.t, json.Unmarshal(b, &v))
	return v.JobID
}

// TestFreshnessPerRequest: max_age and refresh on jobs and lists (DESIGN
// §14): an answer older than max_age is asked again; refresh asks the
// model again, once however many requests ask for it at the same time, and
// the new answer replaces the old.
func TestFreshnessPerRequest(t *testing.T) {
	t.Parallel()
	var verdict atomic.Value
	verdict.Store("Sells soap.")
	var hold atomic.Pointer[chan struct{}]
	e := newE2E(t, func(r llmtest.Request) llmtest.Reply {
		a := llmtest.Answer(true, 5, verdict.Load().(string))
		if h := hold.Load(); h != nil {
			a.Wait = *h
		}
		return a
	}, nil)
	e.start(cli.RoleAll)

	first := e.wait(e.submit("acme.com"), "COMPLETED", dbtest.Patience())
	require.Equal(t, 1, e.llm.Calls("acme.com"))
	cached := e.wait(e.submit("acme.com"), "COMPLETED", dbtest.Patience())
	require.Equal(t, "cache", cached.Results[0].Source, "an answer within the TTLs is used")

	// max_age: an answer older than it is stale for this request. (The
	// cached answer is made two hours old, within the TTLs.)
	_, err := e.api.DB.Pool.Exec(t.Context(), `UPDATE result SET classified_at = now() - interval '2 hours' WHERE domain = 'acme.com'`)
	require.NoError(t, err)
	verdict.Store("Sells soap and snacks.")
	aged := e.wait(e.submitBody(`{"domains": ["acme.com"], "max_age": "1h"}`), "COMPLETED", dbtest.Patience())
	require.Equal(t, "llm", aged.Results[0].Source)
	require.Equal(t, 2, e.llm.Calls("acme.com"))
	young := e.wait(e.submitBody(`{"domains": ["acme.com"], "max_age": "720h"}`), "COMPLETED", dbtest.Patience())
	require.Equal(t, "cache", young.Results[0].Source)
	require.Equal(t, "Sells soap and snacks.", young.Results[0].Reasoning, "the new answer replaced the old")

	// refresh, by two jobs at once: one model call, both get the new answer.
	verdict.Store("Makes soap, snacks and sauces.")
	h := make(chan struct{})
	hold.Store(&h)
	a := e.submitBody(`{"domains": ["acme.com"], "refresh": true}`)
	b := e.submitBody(`{"domains": ["acme.com"], "refresh": true}`)
	require.Eventually(t, func() bool { return e.llm.InFlight() == 1 }, dbtest.Patience(), 10*time.Millisecond)
	hold.Store(nil)
	close(h)
	va, vb := e.wait(a, "COMPLETED", dbtest.Patience()), e.wait(b, "COMPLETED", dbtest.Patience())
	require.Equal(t, 3, e.llm.Calls("acme.com"), "one call for two refreshes")
	require.Equal(t, "Makes soap, snacks and sauces.", va.Results[0].Reasoning)
	require.Equal(t, va.Results[0].Reasoning, vb.Results[0].Reasoning)
	require.True(t, va.Results[0].ClassifiedAt.After(first.Results[0].ClassifiedAt))

	// Bad values are refused, and nothing is written.
	for body, detail := range map[string]string{
		`{"domains": ["acme.com"], "max_age": "a month"}`: "max_age must be a duration of a second or more",
		`{"domains": ["acme.com"], "max_age": "-5m"}`:     "max_age must be a duration of a second or more",
		`{"domains": ["acme.com"], "max_age": "1ns"}`:     "max_age must be a duration of a second or more",
		`{"domains": ["acme.com"], "refresh": "yes"}`:     `has the wrong type: want true or false.`,
	} {
		status, b := e.postJob(body)
		require.Equal(t, http.StatusBadRequest, status, "%s", b)
		require.Contains(t, string(b), detail)
	}

	// Lists take both as query parameters.
	list := func(query string) string {
		req, _ := http.NewRequest(http.MethodPost, e.api.APIURL()+"/lists"+query, strings.NewReader("acme.com\nother.com\n"))
		req.Header.Set("Content-Type", "text/plain")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		require.Equal(t, http.StatusAccepted, resp.StatusCode, "%s", b)
		var v struct {
			ListID string `json:"list_id"`
		}
		require.NoError(t, json.Unmarshal(b, &v))
		return v.ListID
	}
	e.waitList(list(""), "COMPLETED")
	require.Equal(t, 3, e.llm.Calls("acme.com"), "a list uses the cached answer")
	require.Equal(t, 1, e.llm.Calls("other.com"))
	e.waitList(list("?refresh=true"), "COMPLETED")
	require.Equal(t, 4, e.llm.Calls("acme.com"), "a refreshed list asks again")
	require.Equal(t, 2, e.llm.Calls("other.com"))
	e.waitList(list("?max_age=720h"), "COMPLETED")
	require.Equal(t, 4, e.llm.Calls("acme.com"))
	req, _ := http.NewRequest(http.MethodPost, e.api.APIURL()+"/lists?max_age=soon", strings.NewReader("acme.com\n"))
	req.Header.Set("Content-Type", "text/plain")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)

	// The estimate counts what the request would take from the cache.
	for query, cached := range map[string]int{"?dry_run=true": 1, "?dry_run=true&refresh=true": 0, "?dry_run=true&max_age=720h": 1} {
		req, _ := http.NewRequest(http.MethodPost, e.api.APIURL()+"/lists"+query, strings.NewReader("acme.com\n"))
		req.Header.Set("Content-Type", "text/plain")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		var est wire.ListEstimate
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&est))
		resp.Body.Close()
		require.Equal(t, cached, est.Cache, query)
		require.Equal(t, 1-cached, est.LLM, query)
	}
}
