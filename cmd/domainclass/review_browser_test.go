package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image/png"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier/llm/llmtest"
	"github.com/domainclass/domainclass/cli"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/db/dbtest"
	"github.com/domainclass/domainclass/evals"
)

// TestReviewInABrowser reviews 20 queued answers on /review in Chromium by
// keyboard alone (one with a note typed on the page, whose letters are not
// verdicts), undoes one and judges it again; then the overrides, the
// labelled rows of `review export` and the statistics are the verdicts. A
// screenshot of the page is kept as a test artifact.
func TestReviewInABrowser(t *testing.T) {
	t.Parallel()
	_ = chromium(t)
	// rNN.com: the model says yes, unsure (confidence 2: queued); the
	// truth is yes for an even NN.
	truth := func(domain string) bool {
		var n int
		_, _ = fmt.Sscanf(domain, "r%02d.com", &n)
		return n%2 == 0
	}
	e := newE2E(t, func(llmtest.Request) llmtest.Reply { return llmtest.Answer(true, 2, "Might make its own goods.") },
		map[string]string{"RIVERUI_USER": "ops", "RIVERUI_PASSWORD": "correct horse"})
	e.start(cli.RoleAll)
	ctx := context.Background()
	domains := make([]string, 20)
	for i := range domains {
		domains[i] = fmt.Sprintf("r%02d.com", i)
	}
	code, _, errOut := e.cli(ctx, "", []string{"DOMAINCLASS_URL=" + e.api.APIURL()},
		append([]string{"submit", "--list", "--wait", "--poll", "100ms"}, domains...)...)
	require.Equal(t, 0, code, errOut)
	const ops = "ops:correct horse"
	require.Equal(t, 20, e.reviewNext(ops).Queued)

	// Wrong credentials, none, and an API key: 401.
	for _, auth := range []string{"ops:wrong", "", "Bearer dc_not_an_operator"} {
		status, _ := e.operatorCall(auth, "GET", "/review", "")
		require.Equal(t, http.StatusUnauthorized, status, auth)
		status, _ = e.operatorCall(auth, "GET", "/review/next", "")
		require.Equal(t, http.StatusUnauthorized, status, auth)
	}

	browserCtx := browser(t)
	require.ErrorContains(t, chromedp.Do(browserCtx, chromedp.Navigate(e.api.APIURL()+"/review")), "ERR_INVALID_AUTH_CREDENTIALS",
		"without credentials the page is refused")
	ctx2 := browser(t)
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte(ops))
	require.NoError(t, chromedp.Do(ctx2, sendWithEveryRequest("Authorization", auth),
		chromedp.Navigate(e.api.APIURL()+"/review?classifier=cpg"), chromedp.WaitVisible("#domain")))

	// shown is the domain on the page, "" once the queue is empty.
	shown := func() string {
		v, err := chromedp.Run(ctx2, chromedp.Evaluate[string](
			`document.getElementById("item").hidden ? "" : document.getElementById("domain").textContent`))
		require.NoError(t, err)
		return v
	}
	// pageState says what the page shows, for a failure's message.
	pageState := func() string {
		s, _ := chromedp.Run(ctx2, chromedp.Evaluate[string](`"status: " + document.getElementById("status").textContent +
			"; domain: " + document.getElementById("domain").textContent + "; note: " + document.getElementById("note").value +
			"; focus: " + document.activeElement.id`))
		return s
	}
	press := func(key string) {
		require.NoError(t, chromedp.Do(ctx2, chromedp.KeyEvent(key)))
	}
	// judge gives the verdict on the domain shown and waits for the next.
	judge := func() string {
		d := shown()
		require.NotEmpty(t, d)
		press(yesNo(truth(d))[:1])
		if !assert.Eventually(t, func() bool { return shown() != d }, dbtest.Patience(), 20*time.Millisecond, "the next after %s", d) {
			t.Fatal(pageState())
		}
		return d
	}
	// The page with its first item, kept as the test's artifact
	// (go test -artifacts keeps it under _artifacts).
	shot, err := chromedp.Run(ctx2, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	_, err = png.Decode(bytes.NewReader(shot))
	require.NoError(t, err, "the screenshot is a PNG")
	path := filepath.Join(t.ArtifactDir(), "review.png")
	require.NoError(t, os.WriteFile(path, shot, 0o644))
	t.Logf("review page screenshot: %s (%d bytes)", path, len(shot))

	var judged []string
	for range 5 {
		judged = append(judged, judge())
	}
	// u: the last verdict is taken back, and its domain shown again.
	press("u")
	if !assert.Eventually(t, func() bool { return shown() == judged[4] }, dbtest.Patience(), 20*time.Millisecond, "the undone %s again", judged[4]) {
		t.Fatal(pageState())
	}
	// A note: typed after "/", its letters (y, n, s, u) are not verdicts;
	// Escape leaves it.
	const note = "Sunny yoghurt brand, checked its site."
	press("/")
	press(note)
	press(kb.Escape)
	require.Equal(t, judged[4], shown(), "typing the note judged nothing")
	judge()
	for len(judged) < 20 {
		if d := judge(); d != judged[4] {
			judged = append(judged, d)
		}
		if len(judged) == 19 && shown() == "" {
			break
		}
	}
	require.Eventually(t, func() bool { return shown() == "" }, dbtest.Patience(), 20*time.Millisecond, "the queue is empty")
	counts, err := chromedp.Run(ctx2, chromedp.Evaluate[string](
		`document.getElementById("queued").textContent + "/" + document.getElementById("reviewed").textContent`))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		counts, err = chromedp.Run(ctx2, chromedp.Evaluate[string](
			`document.getElementById("queued").textContent + "/" + document.getElementById("reviewed").textContent`))
		return err == nil && counts == "0/20"
	}, dbtest.Patience(), 20*time.Millisecond, "queue depth and the reviewer's count on the page: %s", counts)

	// The overrides: one per domain, the reviewer's verdict, by ops.
	overrides, err := db.OverrideList(ctx, e.api.DB.Pool, "cpg")
	require.NoError(t, err)
	require.Len(t, overrides, 20)
	for _, o := range overrides {
		require.Equal(t, truth(o.Domain), o.Answer, o.Domain)
		require.Equal(t, "ops", o.SetBy)
		if o.Domain == judged[4] {
			require.Equal(t, note, o.Note)
		}
	}
	// The labelled rows.
	code, out, errOut := e.cli(ctx, "", nil, "review", "export", "--classifier", "cpg")
	require.Equal(t, 0, code, errOut)
	cases, err := evals.ReadCases(strings.NewReader(out), "is_cpg")
	require.NoError(t, err)
	require.Len(t, cases, 20)
	for _, c := range cases {
		require.Equal(t, truth(c.Domain), c.Label, c.Domain)
		if c.Domain == judged[4] {
			require.Equal(t, note, c.Rationale)
		}
	}
	// The statistics: the model said yes to all, the reviewers to half.
	status, body := e.operatorCall(ops, "GET", "/review/stats", "")
	require.Equal(t, http.StatusOK, status)
	var stats reviewStatsView
	require.NoError(t, json.Unmarshal(body, &stats))
	require.Len(t, stats.Stats, 1)
	require.Len(t, stats.Stats[0].Queues, 1)
	require.Equal(t, "low_confidence", stats.Stats[0].Queues[0].Queue)
	require.Equal(t, 20, stats.Stats[0].Queues[0].Reviewed)
	require.Equal(t, 10, stats.Stats[0].Queues[0].Agreed)
}
