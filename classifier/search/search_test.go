package search_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/classifier/netguard"
	"github.com/domainclass/domainclass/classifier/search"
	"github.com/domainclass/domainclass/db/dbtest"
)

const page = `<!doctype html><html><head>
<title>  Acme Snacks | Crunchy   chips </title>
<meta name="description" content="Acme makes potato chips and pretzels.">
<script>var secret = "do not read {me}";</script>
<style>.x{color:red}</style>
</head><body><nav>Home</nav><h1>Snacks for everyone</h1><p>Our chips are sold in 40 countries.</p>
<noscript>Enable JS</noscript><svg><text>logo</text></svg></body></html>`

func TestExtractPage(t *testing.T) {
	t.Parallel()
	p := search.ExtractPage(strings.NewReader(page))
	require.Equal(t, "Acme Snacks | Crunchy chips", p.Title)
	require.Equal(t, "Acme makes potato chips and pretzels.", p.Description)
	require.Equal(t, "Home Snacks for everyone Our chips are sold in 40 countries.", p.Text)
	require.NotContains(t, p.Evidence(1000), "secret")
	require.NotContains(t, p.Evidence(1000), "Enable JS")
	require.Equal(t, "Title: Acme Snacks | Crunchy chips\nDescription: Acme makes potato chips and pretzels.\nText: Home…", p.Evidence(4))
}

func homepage(t *testing.T, allowPrivate bool, urls ...string) *search.Homepage {
	d := &netguard.Dialer{AllowPrivate: allowPrivate, Timeout: time.Second}
	return &search.Homepage{
		Client:  d.Client(dbtest.Patience(), 5),
		URLs:    func(string) []string { return urls },
		Timeout: dbtest.Patience(),
	}
}

func TestHomepage_Search(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("UsesFirstAddressThatAnswersWithHTML", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/missing":
				http.NotFound(w, r)
			case "/json":
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"a":1}`))
			default:
				w.Header().Set("Content-Type", "text/html; charset=utf-8")
				_, _ = w.Write([]byte(page))
			}
		}))
		defer srv.Close()
		ev, err := homepage(t, true, srv.URL+"/missing", srv.URL+"/json", srv.URL+"/home").Search(ctx, "acme.com")
		require.NoError(t, err)
		require.Equal(t, "homepage", ev.Provider)
		require.Contains(t, ev.Text, "Acme makes potato chips")
		require.Equal(t, []classifier.EvidenceItem{{URL: srv.URL + "/home", Title: "Acme Snacks | Crunchy chips",
			Snippet: "Acme makes potato chips and pretzels."}}, ev.Sources, "the page's address, title and description")
	})

	t.Run("ReadsAtMostMaxBytes", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte("<p>" + strings.Repeat("a", 1000) + " TAIL</p>"))
		}))
		defer srv.Close()
		h := homepage(t, true, srv.URL)
		h.MaxBytes = 500
		ev, err := h.Search(ctx, "acme.com")
		require.NoError(t, err)
		require.NotContains(t, ev.Text, "TAIL")
	})

	t.Run("UnreachableSiteIsNoEvidenceNotAnError", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.NotFoundHandler())
		srv.Close()
		ev, err := homepage(t, true, srv.URL).Search(ctx, "gone.com")
		require.NoError(t, err)
		require.Empty(t, ev.Text)
	})

	t.Run("RefusesPrivateAddressesAtConnectTime", func(t *testing.T) {
		t.Parallel()
		var hits atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits.Add(1)
			_, _ = w.Write([]byte(page))
		}))
		defer srv.Close()
		port := srv.URL[strings.LastIndex(srv.URL, ":"):]
		// A literal loopback address, and a name that resolves to it.
		ev, err := homepage(t, false, srv.URL, "http://localhost"+port+"/").Search(ctx, "acme.com")
		require.NoError(t, err)
		require.Empty(t, ev.Text)
		require.Zero(t, hits.Load(), "no request may reach a private address")
	})

	t.Run("GuardedClientNeverConnectsToLoopback", func(t *testing.T) {
		t.Parallel()
		var hits atomic.Int32
		target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
		defer target.Close()
		d := &netguard.Dialer{Timeout: time.Second}
		// The first hop is allowed by a client that trusts it; the redirect
		// target is checked by the guarded dialer.
		resp, err := d.Client(time.Second, 5).Get(target.URL)
		if resp != nil {
			resp.Body.Close()
		}
		require.True(t, errors.Is(err, netguard.ErrForbiddenAddress), "got %v", err)
		require.Zero(t, hits.Load())
	})
}

func braveServer(t *testing.T, handle http.HandlerFunc) *httptest.Server {
	srv := httptest.NewServer(handle)
	t.Cleanup(srv.Close)
	return srv
}

func TestBrave_Search(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("ReturnsTopResults", func(t *testing.T) {
		t.Parallel()
		srv := braveServer(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/res/v1/web/search" || r.Header.Get("X-Subscription-Token") != "brave-key" {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			require.Equal(t, "acme.com", r.URL.Query().Get("q"))
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"type":"search","query":{"original":"acme.com"},"web":{"type":"search","results":[
				{"title":"Acme Snacks","url":"https://acme.com/","description":"<strong>Acme</strong> makes chips."},
				{"title":"Acme - Wikipedia","url":"https://en.wikipedia.org/wiki/Acme","description":"Acme is a snack company."}]}}`))
		})
		b := &search.Brave{BaseURL: srv.URL, APIKey: "brave-key", Timeout: time.Second, Client: srv.Client()}
		ev, err := b.Search(ctx, "acme.com")
		require.NoError(t, err)
		require.Equal(t, "brave", ev.Provider)
		require.Equal(t, "- Acme Snacks: Acme makes chips. (https://acme.com/)\n- Acme - Wikipedia: Acme is a snack company. (https://en.wikipedia.org/wiki/Acme)", ev.Text)
		require.Equal(t, []classifier.EvidenceItem{
			{URL: "https://acme.com/", Title: "Acme Snacks", Snippet: "Acme makes chips."},
			{URL: "https://en.wikipedia.org/wiki/Acme", Title: "Acme - Wikipedia", Snippet: "Acme is a snack company."},
		}, ev.Sources, "each result's address, title and description, without Brave's <strong> marks")
	})

	t.Run("KeepsOnlyHTTPAddressesWithoutSpacesOrControlsUpToTheCap", func(t *testing.T) {
		t.Parallel()
		long := "https://evil.example/" + strings.Repeat("a", 1_500_000)
		srv := braveServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			results := []map[string]string{
				{"title": "Long", "url": long, "description": "A page with a long address."},
				{"title": "Formula", "url": `=HYPERLINK("https://evil.example","x")`, "description": "d"},
				{"title": "Script", "url": "javascript:alert(1)", "description": "d"},
				{"title": "Spaced", "url": "https://evil.example/a https://fake.example/", "description": "d"},
				{"title": "Escape", "url": "https://evil.example/\x1b[31mred", "description": "d"},
				{"title": "Acme \x1b[31mSnacks", "url": "https://acme.com/", "description": "Acme makes\u009b chips."},
				{"title": "About", "url": "HTTP://ACME.COM/about", "description": "About Acme."},
			}
			require.NoError(t, json.NewEncoder(w).Encode(map[string]any{"web": map[string]any{"results": results}}))
		})
		b := &search.Brave{BaseURL: srv.URL, APIKey: "k", Count: 7, Timeout: 5 * time.Second, Client: srv.Client()}
		ev, err := b.Search(ctx, "acme.com")
		require.NoError(t, err)
		require.Equal(t, []classifier.EvidenceItem{
			{URL: "https://acme.com/", Title: "Acme [31mSnacks", Snippet: "Acme makes chips."},
			{URL: "HTTP://ACME.COM/about", Title: "About", Snippet: "About Acme."},
		}, ev.Sources, "http(s) addresses only, at most 2,048 bytes, without spaces or control characters")
		require.Equal(t, []string{classifier.DroppedLength, classifier.DroppedScheme, classifier.DroppedScheme,
			classifier.DroppedCharacters, classifier.DroppedCharacters}, ev.Dropped, "each dropped one is counted, with why")
		require.NotContains(t, ev.Text, "evil.example", "a dropped result is not in the prompt either")
		require.Less(t, len(ev.Text), 500)
	})

	t.Run("ThrottleCarriesRetryAfter", func(t *testing.T) {
		t.Parallel()
		srv := braveServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(http.StatusTooManyRequests)
		})
		_, err := (&search.Brave{BaseURL: srv.URL, APIKey: "k", Timeout: time.Second, Client: srv.Client()}).Search(ctx, "a.com")
		after, ok := classifier.RetryAfter(err)
		require.True(t, ok)
		require.Equal(t, 3*time.Second, after)
	})

	t.Run("ServerErrorIsTransientAndBadKeyPermanent", func(t *testing.T) {
		t.Parallel()
		status := http.StatusServiceUnavailable
		srv := braveServer(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(status) })
		b := &search.Brave{BaseURL: srv.URL, APIKey: "k", Timeout: time.Second, Client: srv.Client()}
		_, err := b.Search(ctx, "a.com")
		require.Error(t, err)
		require.False(t, classifier.IsPermanent(err))

		srv2 := braveServer(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusUnauthorized) })
		_, err = (&search.Brave{BaseURL: srv2.URL, APIKey: "bad", Timeout: time.Second, Client: srv2.Client()}).Search(ctx, "a.com")
		require.True(t, classifier.IsPermanent(err))
	})
}

func TestNew(t *testing.T) {
	t.Parallel()
	_, err := search.New(search.Config{Provider: "google"})
	require.EqualError(t, err, `unknown SEARCH_PROVIDER "google" (want none, homepage or brave)`)
	_, err = search.New(search.Config{Provider: "brave"})
	require.EqualError(t, err, "the brave search provider needs an API key")
	s, err := search.New(search.Config{Provider: "none"})
	require.NoError(t, err)
	ev, err := s.Search(context.Background(), "a.com")
	require.NoError(t, err)
	require.Empty(t, ev.Text)
}
