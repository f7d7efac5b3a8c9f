package jobs_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/classifier/netguard"
	"github.com/domainclass/domainclass/classifier/search"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/db/dbtest"
)

// TestProvenance runs one domain through each search provider, against
// loopback peers that answer as the real ones do, and follows the evidence
// from the provider to the model's prompt, the stored answer, the job's
// row, and a later job that gets it from the cache.
func TestProvenance(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cpg, err := classifier.DefaultRegistry().Get("cpg")
	require.NoError(t, err)

	home := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(`<!doctype html><html><head><title>Acme Snacks | Chips  and pretzels</title>
<meta name="description" content="Acme makes   potato chips and pretzels, sold in 40 countries."></head>
<body><h1>Snacks for everyone</h1></body></html>`))
	}))
	t.Cleanup(home.Close)
	brave := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/res/v1/web/search" || r.Header.Get("X-Subscription-Token") != "brave-key" {
			http.Error(w, `{"type":"ErrorResponse"}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"type":"search","web":{"type":"search","results":[
			{"title":"Acme Snacks","url":"https://acme.com/","description":"<strong>Acme</strong> makes chips."},
			{"title":"Acme Inc. - Wikipedia","url":"https://en.wikipedia.org/wiki/Acme_Inc.","description":"Acme Inc. is an American snack food company."}]}}`))
	}))
	t.Cleanup(brave.Close)
	braveSearch, err := search.New(search.Config{Provider: search.ProviderBrave, BraveAPIKey: "brave-key", BraveBaseURL: brave.URL})
	require.NoError(t, err)
	dialer := &netguard.Dialer{AllowPrivate: true, Timeout: time.Second}

	for _, tc := range []struct {
		provider string
		searcher classifier.Searcher
		evidence []classifier.EvidenceItem
	}{
		{provider: search.ProviderNone, searcher: search.None{}, evidence: []classifier.EvidenceItem{}},
		{
			provider: search.ProviderHomepage,
			searcher: &search.Homepage{Client: dialer.Client(dbtest.Patience(), 5), Timeout: dbtest.Patience(),
				URLs: func(string) []string { return []string{home.URL + "/"} }},
			evidence: []classifier.EvidenceItem{{URL: home.URL + "/", Title: "Acme Snacks | Chips and pretzels",
				Snippet: "Acme makes potato chips and pretzels, sold in 40 countries."}},
		},
		{
			provider: search.ProviderBrave,
			searcher: braveSearch,
			evidence: []classifier.EvidenceItem{
				{URL: "https://acme.com/", Title: "Acme Snacks", Snippet: "Acme makes chips."},
				{URL: "https://en.wikipedia.org/wiki/Acme_Inc.", Title: "Acme Inc. - Wikipedia",
					Snippet: "Acme Inc. is an American snack food company."},
			},
		},
	} {
		t.Run(tc.provider, func(t *testing.T) {
			t.Parallel()
			b := setupTx(t, byDomain(nil), setupOpts{search: tc.searcher})
			job, _ := b.work(t, "", "acme.com")
			got := resultOf(job, "acme.com")
			require.Equal(t, classifier.SourceLLM, got.Source)

			reqs := b.llm.Requests()
			require.Len(t, reqs, 1)
			for _, e := range tc.evidence {
				require.Contains(t, reqs[0].User, e.Snippet, "the model is shown what the answer says it was shown")
				require.Contains(t, reqs[0].User, e.Title)
			}

			want := func(r classifier.Result, what string) {
				t.Helper()
				require.Equal(t, tc.provider, r.Search, what)
				require.Equal(t, "test-model", r.Model, what)
				require.Equal(t, cpg.CurrentPrompt, r.PromptVersion, what)
				require.Equal(t, tc.evidence, r.Evidence, what)
				require.NotZero(t, r.ProvenanceID, what)
			}
			want(got, "the job's row")
			stored, err := db.ResultGet(ctx, b.tx, "cpg", "acme.com")
			require.NoError(t, err)
			want(*stored, "the stored answer")

			again, _ := b.work(t, "", "www.acme.com")
			cached := resultOf(again, "acme.com")
			require.Equal(t, classifier.SourceCache, cached.Source)
			want(cached, "a cached answer")
			require.Equal(t, got.ProvenanceID, cached.ProvenanceID, "a cached answer keeps the provenance of the call that made it")
			require.Len(t, b.llm.Requests(), 1)
		})
	}
}
