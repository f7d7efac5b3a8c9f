package evals_test

import (
	"fmt"
	"math"
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/evals"
)

// TestB2BSoftwareDataSet holds the second classifier's data set to what
// evals/b2b_software.md promises: 40 rows or more, read with the answer
// field its YAML names, both answers well represented, a rationale each,
// only the documented kinds, each row split by the fixed rule.
func TestB2BSoftwareDataSet(t *testing.T) {
	t.Parallel()
	c, err := classifier.DefaultRegistry().Get("b2b_software")
	require.NoError(t, err)
	cases, err := evals.LoadCases("b2b_software.csv", c.AnswerField)
	require.NoError(t, err)
	yes, no, doubtful := evals.Balance(cases)
	require.GreaterOrEqual(t, len(cases), 40)
	require.GreaterOrEqual(t, yes, len(cases)/3, "yes is well represented")
	require.GreaterOrEqual(t, no, len(cases)/3, "no is well represented")

	doc, err := os.ReadFile("b2b_software.md")
	require.NoError(t, err)
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z-]+)` \\|").FindAllStringSubmatch(string(doc), -1) {
		documented[m[1]] = true
	}
	total, test := map[string]int{}, map[string]int{}
	for _, c := range cases {
		require.True(t, documented[c.Kind], "kind %q of %s is documented in evals/b2b_software.md", c.Kind, c.Domain)
		require.NotContains(t, c.Rationale, "\n")
		require.Contains(t, []string{evals.SplitDev, evals.SplitTest}, c.Split,
			"%s has no split: run domainclass eval split --classifier b2b_software --data evals/b2b_software.csv", c.Domain)
		total[c.Kind]++
		if c.Split == evals.SplitTest {
			test[c.Kind]++
		}
	}
	for kind, n := range total {
		require.Equal(t, int(math.Round(evals.TestShare*float64(n))), test[kind], "kind %s: %d rows", kind, n)
	}
	require.Contains(t, string(doc), fmt.Sprintf("%d domains: %d yes, %d no, %d marked doubtful", len(cases), yes, no, doubtful))
}
