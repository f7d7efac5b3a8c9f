package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/cli"
	"github.com/domainclass/domainclass/client"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/db/dbtest"
	"github.com/domainclass/domainclass/wire/csvcell"
)

// TestListsResults_HostileText: what a list's results hold comes from
// callers, web pages and models. `lists results` writes it so that no
// spreadsheet runs a formula from it (the API's escaped CSV) and no
// terminal obeys an escape sequence in it (control characters shown as
// U+FFFD on a terminal); a file gets the bytes the API sent.
func TestListsResults_HostileText(t *testing.T) {
	t.Parallel()
	e := newE2E(t, nil, nil)
	e.start(cli.RoleAPI) // no worker: the rows wait, and one is answered below
	env := []string{"DOMAINCLASS_URL=" + e.api.APIURL()}
	const ref = `@SUM(1+1)*cmd|' /C calc'!A0`
	file := filepath.Join(t.TempDir(), "hostile.csv")
	require.NoError(t, os.WriteFile(file, []byte("domain,ref\nacme.com,\""+strings.ReplaceAll(ref, `"`, `""`)+"\"\n+example.org,-1\n"), 0o600))
	code, _, errOut := e.cli(context.Background(), "", env, "submit", "--list", "--file", file)
	require.Equal(t, 0, code, errOut)
	id := listIDOf(t, errOut)
	// An answer stored before evidence addresses were checked, from a
	// provider that named its model with a C1 control (CSI).
	_, err := db.ListRowFinish(context.Background(), e.api.DB.Pool, uuid.MustParse(id), 1, classifier.Result{
		Domain: "acme.com", Classifier: "cpg", Status: classifier.StatusCompleted, Answer: true, Confidence: 5,
		Reasoning: `=HYPERLINK("https://evil.example","x")`, Source: classifier.SourceLLM, ClassifiedAt: time.Now(),
		Model: "m\u009b31m", PromptVersion: "v1", Search: "brave",
		Evidence: []classifier.EvidenceItem{{URL: "https://evil.example/\x1b[31mred\x1b]0;title\x07"}}}, "o")
	require.NoError(t, err)

	code, out, errOut := e.cli(context.Background(), "", env, "lists", "results", id)
	require.Equal(t, 0, code, errOut)
	records, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	require.NoError(t, err)
	require.Len(t, records, 3)
	for _, rec := range records {
		for _, cell := range rec {
			require.False(t, csvcell.Risky(cell), "a spreadsheet would run %q", cell)
		}
	}
	require.Equal(t, "'"+ref, records[1][2])
	require.Equal(t, []string{"'+example.org", "'-1"}, records[2][1:3])

	var raw strings.Builder
	_, err = client.New(e.api.APIURL(), "").ListResults(context.Background(), id, &raw, client.ResultsOptions{KeepFormulas: true})
	require.NoError(t, err)
	records, err = csv.NewReader(strings.NewReader(raw.String())).ReadAll()
	require.NoError(t, err)
	require.Equal(t, ref, records[1][2], "a program can ask for the values as stored")
	require.Equal(t, []string{"+example.org", "-1"}, records[2][1:3])

	tty, read := openTerminal(t)
	code = Run(context.Background(), []string{"lists", "results", id}, append(e.environ(), env...),
		strings.NewReader(""), tty, &strings.Builder{})
	require.Equal(t, 0, code)
	shown := string(read())
	require.Contains(t, shown, "'"+ref)
	require.NotContains(t, shown, "\x1b", "no escape sequence reaches the terminal")
	require.NotContains(t, shown, "\x07")
	require.NotContains(t, shown, "\u009b", "nor a C1 control")
	require.Contains(t, shown, "https://evil.example/\uFFFD[31mred\uFFFD]0;title\uFFFD")

	out = filepath.Join(t.TempDir(), "results.csv")
	code, _, errOut = e.cli(context.Background(), "", env, "lists", "results", id, "--out", out)
	require.Equal(t, 0, code, errOut)
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	require.Contains(t, string(b), "https://evil.example/\x1b[31mred", "a file gets the bytes as sent")
}

// TestHostileSearchResults runs the second hostile review's search
// provider: results with a 1.5 MB address, an escape sequence, a space
// that would add a fake address, a formula and javascript:. A job with a
// webhook, then a list of 200 rows of the same domain (a 2.6 KB upload)
// made a 1.5 MB webhook and 300 MB of results. Only the sound address is
// kept; each other one is counted.
func TestHostileSearchResults(t *testing.T) {
	t.Parallel()
	long := "https://evil.example/" + strings.Repeat("a", 1_500_000)
	brave := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		results := []map[string]string{
			{"title": "Long", "url": long, "description": "d"},
			{"title": "Red", "url": "https://evil.example/\x1b[31mred", "description": "d"},
			{"title": "Two", "url": "https://evil.example/a https://fake.example/", "description": "d"},
			{"title": "Formula", "url": `=HYPERLINK("https://evil.example","x")`, "description": "d"},
			{"title": "Script", "url": "javascript:alert(1)", "description": "d"},
			{"title": "Evil \x1b[31mCorp", "url": "https://evil.com/", "description": "Evil makes snacks."},
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"web": map[string]any{"results": results}})
	}))
	t.Cleanup(brave.Close)
	rc := newHookReceiver(t)
	e := newE2E(t, nil, map[string]string{"SEARCH_PROVIDER": "brave", "BRAVE_API_KEY": "k", "BRAVE_BASE_URL": brave.URL,
		"WEBHOOK_SECRET": newWebhookSecret(t), "CALLBACK_ALLOW_PRIVATE": "true"})
	e.start(cli.RoleAll)

	status, body := e.post(`{"domains": ["evil.com"]}`, "X-Callback-URL", rc.srv.URL+"/hooks")
	require.Equal(t, http.StatusAccepted, status, "%s", body)
	var job jobView
	require.NoError(t, json.Unmarshal(body, &job))
	var got []hookDelivery
	require.Eventually(t, func() bool { got = rc.forJob(job.JobID); return len(got) == 1 }, dbtest.Patience(), 10*time.Millisecond)
	require.Less(t, len(got[0].body), 4<<10, "the webhook is small: %d bytes", len(got[0].body))
	var payload struct {
		Results []struct {
			Evidence []map[string]string `json:"evidence"`
		} `json:"results"`
	}
	require.NoError(t, json.Unmarshal(got[0].body, &payload))
	require.Equal(t, []map[string]string{{"url": "https://evil.com/", "title": "Evil [31mCorp", "snippet": "Evil makes snacks."}},
		payload.Results[0].Evidence)

	file := filepath.Join(t.TempDir(), "evil.txt")
	require.NoError(t, os.WriteFile(file, []byte(strings.Repeat("evil.com\n", 200)), 0o600))
	client := []string{"DOMAINCLASS_URL=" + e.api.APIURL()}
	code, out, errOut := e.cli(context.Background(), "", client, "submit", "--list", "--wait", "--poll", "100ms", "--file", file)
	require.Equal(t, 0, code, errOut)
	require.Less(t, len(out), 200*200, "200 rows of results are a few kB, not 300 MB")
	records, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	require.NoError(t, err)
	require.Len(t, records, 201)
	for _, r := range records[1:] {
		require.Equal(t, "https://evil.com/", r[13], "one sound address in evidence_urls")
	}
	code, out, errOut = e.cli(context.Background(), "", client, "lists", "results", listIDOf(t, errOut), "--ndjson")
	require.Equal(t, 0, code, errOut)
	require.Less(t, len(out), 200*1000)

	page := scrape(t, e.api.APIURL())
	require.Equal(t, 1.0, metric(t, page, `domainclass_evidence_dropped_total{reason="length"}`))
	require.Equal(t, 2.0, metric(t, page, `domainclass_evidence_dropped_total{reason="characters"}`))
	require.Equal(t, 2.0, metric(t, page, `domainclass_evidence_dropped_total{reason="scheme"}`))
}
