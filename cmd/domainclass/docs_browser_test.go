package main

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/cli"
	"github.com/domainclass/domainclass/db/dbtest"
	"github.com/domainclass/domainclass/httpapi"
)

// TestDocsInABrowser opens GET /docs in headless Chromium as a caller
// would: the reference renders every operation of /openapi.yaml (and
// every webhook), and the page asks nothing of any other origin, breaks no
// rule of its Content-Security-Policy and throws nothing.
func TestDocsInABrowser(t *testing.T) {
	t.Parallel()
	_ = chromium(t)
	e := newE2E(t, nil, map[string]string{"AUTH": "on"}) // the page needs no key
	e.start(cli.RoleAPI)
	origin := e.api.APIURL()

	ctx := browser(t)
	// Start the browser on ctx, or it would end with the listening below.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("about:blank")))
	// Everything the page asks for and everything it logs, collected
	// while it loads and renders.
	listening, stopListening := context.WithCancel(ctx)
	messages := chromedp.Console(listening)
	sent := chromedp.Events(listening, network.RequestWillBeSent)
	var requests []string
	var problems []chromedp.ConsoleMessage
	var collectors sync.WaitGroup
	collectors.Go(func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.IsException() || m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleWarning {
				problems = append(problems, m)
			}
		}
	})
	collectors.Go(func() {
		for ev, err := range sent {
			if err != nil {
				return
			}
			requests = append(requests, ev.Request.URL)
		}
	})

	// What the page must show: every operation's summary and path, and
	// every webhook's name and summary.
	doc, err := openapi3.NewLoader().LoadFromData(httpapi.OpenAPI)
	require.NoError(t, err)
	var want []string
	for path, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			want = append(want, op.Summary, path)
			for name, cb := range op.Callbacks {
				want = append(want, name)
				for _, target := range cb.Value.Map() {
					want = append(want, target.Post.Summary)
				}
			}
		}
	}

	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(origin+"/docs")))
	// shown reads the rendered page and says what of want it lacks.
	shown := func() (text string, missing []string) {
		text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
		if err != nil {
			return "", []string{err.Error()}
		}
		for _, w := range want {
			if !strings.Contains(text, w) {
				missing = append(missing, w)
			}
		}
		return text, missing
	}
	assert.Eventually(t, func() bool { _, missing := shown(); return len(missing) == 0 }, dbtest.Patience(), 250*time.Millisecond)
	text, missing := shown()
	require.Empty(t, missing, "the page shows every operation and webhook of /openapi.yaml; it reads:\n%.3000s", text)
	stopListening()
	collectors.Wait()

	require.NotEmpty(t, requests)
	for _, r := range requests {
		u, err := url.Parse(r)
		require.NoError(t, err)
		if u.Scheme == "blob" || u.Scheme == "data" { // made by the page itself
			continue
		}
		require.Equal(t, origin, u.Scheme+"://"+u.Host, "the page asked another origin for %s", r)
	}
	require.Empty(t, problems, "the page logs no error or warning (a CSP violation is one); it asked for %q", requests)

	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "docs.png")
	require.NoError(t, os.WriteFile(path, shot, 0o600))
	t.Logf("/docs screenshot: %s (%d bytes)", path, len(shot))
	if keep := os.Getenv("DOCS_SCREENSHOT"); keep != "" { // to look at it after the test
		require.NoError(t, os.WriteFile(keep, shot, 0o644))
	}
}

// TestDocsHeaders checks what the browser test cannot see: the page's
// Content-Security-Policy allows this origin only, and the bundle is
// revalidated rather than downloaded again.
func TestDocsHeaders(t *testing.T) {
	t.Parallel()
	e := newE2E(t, nil, nil)
	e.start(cli.RoleAPI)

	page, err := http.Get(e.api.APIURL() + "/docs")
	require.NoError(t, err)
	page.Body.Close()
	require.Equal(t, http.StatusOK, page.StatusCode)
	require.Equal(t, "text/html; charset=utf-8", page.Header.Get("Content-Type"))
	csp := page.Header.Get("Content-Security-Policy")
	for _, directive := range strings.Split(csp, ";") {
		fields := strings.Fields(directive)
		require.NotEmpty(t, fields, csp)
		for _, source := range fields[1:] {
			require.Contains(t, []string{"'none'", "'self'", "'unsafe-inline'", "data:", "blob:"}, source,
				"%s allows no other origin", fields[0])
		}
		if fields[0] == "script-src" {
			require.Equal(t, []string{"script-src", "'self'"}, fields, "no inline script, no eval")
		}
	}
	require.Contains(t, csp, "default-src 'none'")
	require.Contains(t, csp, "frame-ancestors 'none'")
	require.Equal(t, "nosniff", page.Header.Get("X-Content-Type-Options"))

	bundle := e.api.APIURL() + "/docs/redoc.standalone.js"
	first, err := http.Get(bundle)
	require.NoError(t, err)
	first.Body.Close()
	require.Equal(t, http.StatusOK, first.StatusCode)
	require.Equal(t, "text/javascript; charset=utf-8", first.Header.Get("Content-Type"))
	require.Equal(t, "same-origin", first.Header.Get("Cross-Origin-Resource-Policy"))
	etag := first.Header.Get("ETag")
	require.NotEmpty(t, etag)
	req, err := http.NewRequest(http.MethodGet, bundle, nil)
	require.NoError(t, err)
	req.Header.Set("If-None-Match", etag)
	again, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	again.Body.Close()
	require.Equal(t, http.StatusNotModified, again.StatusCode)

	for _, name := range []string{"LICENSE", "redoc.standalone.js.LICENSE.txt"} {
		resp, err := http.Get(e.api.APIURL() + "/docs/" + name)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, "the bundle's licence is served with it: %s", name)
	}
	missing, err := http.Get(e.api.APIURL() + "/docs/other.js")
	require.NoError(t, err)
	missing.Body.Close()
	require.Equal(t, http.StatusNotFound, missing.StatusCode)
	require.Equal(t, "application/problem+json", missing.Header.Get("Content-Type"))
}
