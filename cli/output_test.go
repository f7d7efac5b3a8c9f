package cli

import (
	"encoding/csv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/wire"
	"github.com/domainclass/domainclass/wire/csvcell"
)

// TestPrintResults_HostileText: a model's reason or an error may hold what
// a website put there; neither a spreadsheet nor a terminal may run it.
func TestPrintResults_HostileText(t *testing.T) {
	t.Parallel()
	yes, conf := true, 4
	reports := []*wire.JobReport{{JobID: "j1", Results: []wire.ResultReport{
		{Domain: "a.com", Status: classifier.StatusCompleted, Answer: &yes, Confidence: &conf, Source: classifier.SourceLLM,
			Reasoning: `=HYPERLINK("https://evil.example","click")`},
		{Domain: "b.com", Status: classifier.StatusCompleted, Answer: &yes, Confidence: &conf, Source: classifier.SourceLLM,
			Reasoning: "+1 snacks"},
		{Domain: "c.com", Status: classifier.StatusFailed, Error: "@SUM(A1)\x1b]0;title\x07"},
		{Domain: "d.com", Status: classifier.StatusCompleted, Answer: &yes, Confidence: &conf, Source: classifier.SourceLLM,
			Reasoning: "Makes -5% sugar snacks."},
	}}}

	var out strings.Builder
	require.NoError(t, printResults(&out, reports, resultFormat{asCSV: true}))
	records, err := csv.NewReader(strings.NewReader(out.String())).ReadAll()
	require.NoError(t, err)
	require.Equal(t, `'=HYPERLINK("https://evil.example","click")`, records[1][5])
	require.Equal(t, "'+1 snacks", records[2][5])
	require.Equal(t, "'@SUM(A1)\x1b]0;title\x07", records[3][6], "quoted, not run; the bytes are the caller's to see")
	require.Equal(t, "Makes -5% sugar snacks.", records[4][5], "only a leading sign is neutralised")
	for _, rec := range records {
		for _, cell := range rec {
			require.False(t, csvcell.Risky(cell), "a spreadsheet would run %q", cell)
		}
	}
	require.Equal(t, `=HYPERLINK("https://evil.example","click")`, csvcell.Unescape(records[1][5]), "the one rule, reversible")

	out.Reset()
	require.NoError(t, printResults(&out, reports, resultFormat{}))
	require.NotContains(t, out.String(), "\x1b", "no escape sequence reaches the terminal")
	require.NotContains(t, out.String(), "\x07")
	require.Contains(t, out.String(), "error: @SUM(A1)\uFFFD]0;title\uFFFD")
}
