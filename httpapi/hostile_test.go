package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/db/dbtest"
	"github.com/domainclass/domainclass/httpapi"
	"github.com/domainclass/domainclass/internal/apikey"
	"github.com/domainclass/domainclass/jobs"
)

// TestHostile holds the findings of a hostile review of the API (see
// docs/RELIABILITY.md, "Hostile input"): each failed before its fix.
func TestHostile(t *testing.T) {
	t.Parallel()

	t.Run("MetricsLabelsComeFromFixedSets", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{metrics: true})
		client := &http.Client{}
		for i := range 1000 {
			method, path := fmt.Sprintf("X%07d", i), "/healthz"
			if i%2 == 1 {
				method, path = http.MethodGet, fmt.Sprintf("/nope/%d", i)
			}
			req, err := http.NewRequest(method, b.url+path, nil)
			require.NoError(t, err)
			resp, err := client.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
		}
		page := b.do(t, http.MethodGet, "/metrics", "")
		series := 0
		for line := range strings.Lines(string(page.body)) {
			if strings.HasPrefix(line, "domainclass_http_requests_total{") {
				series++
			}
		}
		require.LessOrEqual(t, series, 3, "1,000 made-up methods and paths are one or two series, not 1,000:\n%s", page.body)
		require.Contains(t, string(page.body), `domainclass_http_requests_total{code="405",method="other",route="unmatched"} 500`)
		require.Contains(t, string(page.body), `domainclass_http_requests_total{code="404",method="GET",route="unmatched"} 500`)
	})

	t.Run("ControlCharactersInADomainAreRefusedPerItem", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		r := b.do(t, http.MethodPost, "/domains/classify", `{"domains":["example.com/\u0000", "acme.com", "a\u001b[31m.com"]}`)
		p := requireProblem(t, r, http.StatusUnprocessableEntity, "invalid-domains")
		require.Equal(t, []string{"example.com/\x00", "a\x1b[31m.com"}, []string{p.Errors[0].Input, p.Errors[1].Input})
		require.Equal(t, classifier.ReasonControlChars, p.Errors[0].Reason)
		require.Len(t, p.Errors, 2)
		require.Equal(t, nothing, b.counts(t))
	})

	t.Run("AListRowWithANulOrBrokenUTF8IsRejectedNotAServerError", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		r := b.do(t, http.MethodPost, "/lists", "acme.com\nexample.com/\x00\nbad\xff.com\n", "Content-Type", "text/plain")
		require.Equal(t, http.StatusAccepted, r.status, string(r.body))
		require.Contains(t, string(r.body), `"rejected":2`)
	})

	t.Run("AJobKeepsItsInputsCapped", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		long := "https://acme.com/" + strings.Repeat("a", 2000)
		r := b.do(t, http.MethodPost, "/domains/classify", `{"domains":["`+long+`"]}`)
		require.Equal(t, http.StatusAccepted, r.status, string(r.body))
		var stored string
		require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT inputs[1] FROM classify_job`).Scan(&stored))
		require.Equal(t, long[:512]+"…", stored, "ten 2 KB inputs no longer store 20 KB a job")
		require.Contains(t, string(r.body), long[:512]+"…", "the answer shows what is kept")
	})

	for _, tt := range []struct{ name, body, detail string }{
		{"CaseVariantKey", `{"domains":["evil.com"],"DOMAINS":["good.com"]}`, `The field "DOMAINS" is not known`},
		{"RepeatedKey", `{"domains":["evil.com"],"domains":["good.com"]}`, `The field "domains" appears twice`},
		{"UnknownKey", `{"domains":["a.com"],"callback_url":"https://x.example/h"}`, `The field "callback_url" is not known`},
	} {
		t.Run("JSON"+tt.name+"IsRefused", func(t *testing.T) {
			t.Parallel()
			b := setup(t, setupOpts{})
			p := requireProblem(t, b.do(t, http.MethodPost, "/domains/classify", tt.body), http.StatusBadRequest, "invalid-json")
			require.Contains(t, p.Detail, tt.detail)
			require.Equal(t, nothing, b.counts(t))
		})
	}

	t.Run("AClientThatHangsUpIsNotAnError", func(t *testing.T) {
		t.Parallel()
		d := dbtest.New(t)
		client, err := jobs.NewClient(d.Pool, jobs.ClientConfig{Settings: jobs.DefaultSettings(), Schema: d.Schema,
			Logger: slog.New(slog.DiscardHandler)})
		require.NoError(t, err)
		var logs bytes.Buffer
		h := httpapi.New(httpapi.Config{DB: d, River: client, Registry: classifier.DefaultRegistry(), Auth: httpapi.AuthOff{},
			Logger: slog.New(slog.NewTextHandler(&logs, nil))}).Handler()
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // gone before the handler reads the database
		req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/domains/classify/01936f4e-7a3b-7c4d-8e5f-0123456789ab", nil)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Equal(t, 499, rec.Code)
		require.Contains(t, logs.String(), `level=INFO msg="client closed the request"`)
		require.NotContains(t, logs.String(), "level=ERROR")
	})

	t.Run("AnUnknownKeySentAgainCostsNoQuery", func(t *testing.T) {
		t.Parallel()
		counter := &dbtest.QueryCounter{}
		d, err := db.Open(context.Background(), db.Config{URL: dbtest.URL(), Schema: dbtest.Schema(t), Tracer: counter})
		require.NoError(t, err)
		t.Cleanup(d.Close)
		auth := httpapi.NewAPIKeyAuth(d.Pool, time.Minute, slog.New(slog.DiscardHandler))
		unknown, _ := apikey.New()
		for range 5 {
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			req.Header.Set("Authorization", "Bearer "+unknown)
			_, err := auth.Authenticate(req)
			require.Error(t, err)
		}
		require.EqualValues(t, 1, counter.N(), "one lookup, then the miss is remembered")

		known := createKey(t, d, "team-a", db.APIKey{})
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set("Authorization", "Bearer "+known)
		caller, err := auth.Authenticate(req)
		require.NoError(t, err, "a new key is not among the misses")
		require.Equal(t, "team-a", caller.Name)
	})
}
