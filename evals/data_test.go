package evals_test

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/evals"
)

func TestReadCases(t *testing.T) {
	t.Parallel()
	cases, err := evals.ReadCases(strings.NewReader(
		"rationale,IS_CPG,domain,doubtful\n"+
			"\"Makes soap, and shampoo\",yes,https://www.Acme.co.uk/about,\n"+
			"A bank,No,bank.com,doubtful\n"), "is_cpg")
	require.NoError(t, err)
	require.Equal(t, []evals.Case{
		{Domain: "acme.co.uk", Label: true, Rationale: "Makes soap, and shampoo"},
		{Domain: "bank.com", Label: false, Doubtful: true, Rationale: "A bank"},
	}, cases)

	for name, tc := range map[string]struct{ csv, err string }{
		"empty":          {"", "the data set is empty"},
		"no answer col":  {"domain,rationale\nx.com,r\n", "the header must name the columns domain, is_cpg and rationale"},
		"no rows":        {"domain,is_cpg,rationale\n", "no domains"},
		"bad label":      {"domain,is_cpg,rationale\nx.com,maybe,r\n", `line 2: is_cpg must be yes or no, got "maybe"`},
		"bad domain":     {"domain,is_cpg,rationale\nlocalhost,yes,r\n", "line 2:"},
		"duplicate":      {"domain,is_cpg,rationale\nx.com,yes,r\nwww.x.com,no,r\n", "line 3: x.com is already on line 2"},
		"no rationale":   {"domain,is_cpg,rationale\nx.com,yes,\n", "line 2: x.com has no rationale"},
		"bad doubtful":   {"domain,is_cpg,rationale,doubtful\nx.com,yes,r,perhaps\n", "doubtful must be yes, no or empty"},
		"header comment": {"# notes\ndomain,is_cpg,rationale\n", "no domains"},
	} {
		_, err := evals.ReadCases(strings.NewReader(tc.csv), "is_cpg")
		require.ErrorContains(t, err, tc.err, name)
	}
}

// TestCPGDataSet holds the shipped data set to what evals/README.md
// promises: at least 150 real domains, both answers well represented, a
// rationale each, doubtful ones marked, and only the documented kinds.
func TestCPGDataSet(t *testing.T) {
	t.Parallel()
	cases, err := evals.LoadCases("cpg.csv", "is_cpg")
	require.NoError(t, err)
	yes, no, doubtful := evals.Balance(cases)
	require.GreaterOrEqual(t, len(cases), 150)
	require.GreaterOrEqual(t, yes, len(cases)/3, "yes is well represented")
	require.GreaterOrEqual(t, no, len(cases)/3, "no is well represented")
	require.Greater(t, doubtful, 10, "arguable labels are marked")

	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z-]+)` \\|").FindAllStringSubmatch(string(readme), -1) {
		documented[m[1]] = true
	}
	kinds := map[string]map[bool]int{}
	for _, c := range cases {
		require.True(t, documented[c.Kind], "kind %q of %s is documented in evals/README.md", c.Kind, c.Domain)
		require.NotContains(t, c.Rationale, "\n")
		if kinds[c.Kind] == nil {
			kinds[c.Kind] = map[bool]int{}
		}
		kinds[c.Kind][c.Label]++
	}
	// The hard cases of the issue are each covered.
	for _, k := range []string{"retailer", "holding", "dtc", "ingredients", "packaging", "pharma-rx",
		"otc-health", "foodservice", "restaurant", "conglomerate", "subsidiary", "contract-maker"} {
		require.NotZero(t, kinds[k][true]+kinds[k][false], "kind %s is covered", k)
	}
	require.NotZero(t, kinds["subsidiary"][false], "a non-CPG subsidiary of a CPG parent is covered")
	require.NotZero(t, kinds["conglomerate"][false], "a non-CPG conglomerate is covered")

	// The README states the balance; keep it true.
	require.Contains(t, string(readme), fmt.Sprintf("%d domains: %d yes, %d no, %d marked doubtful", len(cases), yes, no, doubtful))
}
