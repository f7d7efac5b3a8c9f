package main

import (
	"context"
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/httpapi/wire/csvcell"
)

// TestListsResults_HostileText: what a list's results hold comes from
// callers, web pages and models. `lists results` writes it so that no
// spreadsheet runs a formula from it (the API's escaped CSV) and no
// terminal obeys an escape sequence in it (control characters shown as
// U+FFFD on a terminal); a file gets the bytes the API sent.
func TestListsResults_HostileText(t *testing.T) {
	t.Parallel()
	e := newE2E(t, nil, nil)
	e.start(RoleAPI) // no worker: the rows wait, and one is answered below
	client := []string{"DOMAINCLASS_URL=" + e.api.APIURL()}
	const ref = `@SUM(1+1)*cmd|' /C calc'!A0`
	file := filepath.Join(t.TempDir(), "hostile.csv")
	require.NoError(t, os.WriteFile(file, []byte("domain,ref\nacme.com,\""+strings.ReplaceAll(ref, `"`, `""`)+"\"\n+example.org,-1\n"), 0o600))
	code, _, errOut := e.cli(context.Background(), "", client, "submit", "--list", "--file", file)
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

	code, out, errOut := e.cli(context.Background(), "", client, "lists", "results", id)
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

	tty, read := openTerminal(t)
	code = Run(context.Background(), []string{"lists", "results", id}, append(e.environ(), client...),
		strings.NewReader(""), tty, &strings.Builder{})
	require.Equal(t, 0, code)
	shown := string(read())
	require.Contains(t, shown, "'"+ref)
	require.NotContains(t, shown, "\x1b", "no escape sequence reaches the terminal")
	require.NotContains(t, shown, "\x07")
	require.NotContains(t, shown, "\u009b", "nor a C1 control")
	require.Contains(t, shown, "https://evil.example/\uFFFD[31mred\uFFFD]0;title\uFFFD")

	out = filepath.Join(t.TempDir(), "results.csv")
	code, _, errOut = e.cli(context.Background(), "", client, "lists", "results", id, "--out", out)
	require.Equal(t, 0, code, errOut)
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	require.Contains(t, string(b), "https://evil.example/\x1b[31mred", "a file gets the bytes as sent")
}
