package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier/llm/llmtest"
	"github.com/domainclass/domainclass/cli"
	"github.com/domainclass/domainclass/db/dbtest"
)

// chromium finds Debian's Chromium (`go tool task test` installs it when it
// runs as root and it is missing).
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	t.Skip("no Chromium on this machine; `go tool task test` installs Debian's chromium when run as root")
	return ""
}

// browser starts a headless Chromium with a fresh profile. The flags keep
// it from calling home, which this machine's closed network refuses.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.WindowSize(1400, 900),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(allocCtx)
	// Chromium's time budget, for the whole session: a failure past it says
	// that the browser was slow, not only "context deadline exceeded".
	ctx, cancelTimeout := context.WithTimeoutCause(ctx, dbtest.BudgetTool, dbtest.SlowError("Chromium", dbtest.BudgetTool, dbtest.BudgetTool))
	t.Cleanup(func() {
		if cause := context.Cause(ctx); errors.Is(cause, dbtest.ErrSlow) {
			t.Error(cause)
		}
		cancelTimeout()
		cancelCtx()
		cancelAlloc()
	})
	return ctx
}

func TestRiverUIInABrowser(t *testing.T) {
	t.Parallel()
	_ = chromium(t)
	e := newE2E(t, func(llmtest.Request) llmtest.Reply { return llmtest.Answer(true, 5, "Snacks.") },
		map[string]string{"RIVERUI_USER": "ops", "RIVERUI_PASSWORD": "correct horse"})
	e.start(cli.RoleAll)
	e.wait(e.submit("acme.com", "beta.com"), "COMPLETED", dbtest.Patience())
	jobsPage := e.api.APIURL() + "/riverui/jobs?state=completed"

	t.Run("WithoutBasicAuthThePageIsRefused", func(t *testing.T) {
		ctx := browser(t)
		// The 401 carries a Basic challenge; with no one to answer it the
		// browser refuses to load the page at all.
		err := chromedp.Do(ctx, chromedp.Navigate(jobsPage))
		require.ErrorContains(t, err, "ERR_INVALID_AUTH_CREDENTIALS")
		title, err := chromedp.Run(ctx, chromedp.Title())
		require.NoError(t, err)
		require.NotContains(t, title, "River")
	})

	// A page of another site posts to River UI while the browser holds the
	// operator's credentials (here: sent with every request, as a browser
	// that kept a Basic login does): the API refuses it with 403.
	t.Run("AnotherSitesPageCannotChangeAnything", func(t *testing.T) {
		cancelURL := e.api.APIURL() + "/riverui/api/jobs/cancel"
		evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, `<html><body><script>
fetch(%q, {method: "POST", mode: "no-cors", credentials: "include",
  headers: {"Content-Type": "text/plain"}, body: '{"ids":["1"]}'});
</script></body></html>`, cancelURL)
		}))
		defer evil.Close()
		// localhost, not 127.0.0.1: another site, not only another origin.
		evilPage := strings.Replace(evil.URL, "127.0.0.1", "localhost", 1)
		refused := `domainclass_http_requests_total{code="403",method="POST",route="/riverui/*path"}`
		ctx := browser(t)
		auth := "Basic " + base64.StdEncoding.EncodeToString([]byte("ops:correct horse"))
		require.NoError(t, chromedp.Do(ctx,
			sendWithEveryRequest("Authorization", auth),
			chromedp.Navigate(evilPage),
		))
		require.Eventually(t, func() bool {
			return strings.Contains(scrape(t, e.api.APIURL()), refused+" 1")
		}, dbtest.Patience(), 50*time.Millisecond, "the page's POST reaches the API and is refused")
	})

	t.Run("WithBasicAuthTheClassifyJobIsListed", func(t *testing.T) {
		ctx := browser(t)
		auth := "Basic " + base64.StdEncoding.EncodeToString([]byte("ops:correct horse"))
		require.NoError(t, chromedp.Do(ctx,
			sendWithEveryRequest("Authorization", auth),
			chromedp.Navigate(jobsPage),
			chromedp.WaitVisible(`//*[normalize-space(text())="classify"]`),
		))
		shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // quality 100 is a PNG; below that, a JPEG
		require.NoError(t, err)
		path := filepath.Join(t.TempDir(), "riverui-jobs.png")
		require.NoError(t, os.WriteFile(path, shot, 0o600))
		img, err := png.Decode(bytes.NewReader(shot))
		require.NoError(t, err, "the screenshot is a PNG")
		require.Greater(t, img.Bounds().Dx(), 800)
		t.Logf("River UI screenshot: %s (%d bytes)", path, len(shot))
		if keep := os.Getenv("RIVERUI_SCREENSHOT"); keep != "" { // to look at it after the test
			require.NoError(t, os.WriteFile(keep, shot, 0o644))
		}
	})
}

// sendWithEveryRequest makes the browser add a header to every request it
// sends, to any origin: the operator's Basic credentials, as a browser that
// kept a login sends them.
func sendWithEveryRequest(name, value string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, target *chromedp.Target) error {
		if _, err := cdp.Call(ctx, target, network.Enable, network.EnableParams{}); err != nil {
			return err
		}
		_, err := cdp.Call(ctx, target, network.SetExtraHTTPHeaders,
			network.SetExtraHTTPHeadersParams{Headers: network.Headers{name: value}})
		return err
	})
}
