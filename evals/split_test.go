package evals_test

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/evals"
)

func TestCPGSplit(t *testing.T) {
	t.Parallel()
	cases, err := evals.LoadCases(filepath.Join("cpg.csv"), "is_cpg")
	require.NoError(t, err)
	total, test := map[string]int{}, map[string]int{}
	for _, c := range cases {
		require.Contains(t, []string{evals.SplitDev, evals.SplitTest}, c.Split, "%s has no split: run domainclass eval split --data evals/cpg.csv", c.Domain)
		total[c.Kind]++
		if c.Split == evals.SplitTest {
			test[c.Kind]++
		}
	}
	for kind, n := range total {
		require.Equal(t, int(math.Round(evals.TestShare*float64(n))), test[kind], "kind %s: %d rows", kind, n)
	}
}

func TestAssignSplits(t *testing.T) {
	t.Parallel()
	mk := func(n int, kind string) []evals.Case {
		var cs []evals.Case
		for i := range n {
			cs = append(cs, evals.Case{Domain: fmt.Sprintf("%s%02d.com", kind, i), Kind: kind, Rationale: "r"})
		}
		return cs
	}
	a := append(mk(10, "cpg"), mk(3, "retailer")...)
	b := append(mk(10, "cpg"), mk(3, "retailer")...)
	require.Equal(t, 13, evals.AssignSplits(a))
	evals.AssignSplits(b)
	require.Equal(t, a, b, "the same rows get the same split")
	count := func(cs []evals.Case, kind string) (n int) {
		for _, c := range cs {
			if c.Kind == kind && c.Split == evals.SplitTest {
				n++
			}
		}
		return n
	}
	require.Equal(t, 3, count(a, "cpg"))
	require.Equal(t, 1, count(a, "retailer"))

	// Rows added later are split by the same rule; the old ones keep theirs.
	before := append([]evals.Case(nil), a...)
	grown := append(a, mk(20, "cpg")[10:]...)
	require.Equal(t, 10, evals.AssignSplits(grown))
	require.Equal(t, before, grown[:13])
	require.Equal(t, 6, count(grown, "cpg"), "round(0.3 × 20)")
}

func TestAssignSplitsFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "data.csv")
	var b strings.Builder
	b.WriteString("domain,is_cpg,doubtful,kind,rationale\n")
	for i := range 10 {
		fmt.Fprintf(&b, "brand%d.com,yes,,cpg,\"Snacks, sold in grocery.\"\n", i)
	}
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
	n, err := evals.AssignSplitsFile(path, "is_cpg")
	require.NoError(t, err)
	require.Equal(t, 10, n)
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(after)), "\n")
	require.Equal(t, "domain,is_cpg,doubtful,kind,rationale,split", lines[0])
	for i, line := range lines[1:] {
		require.Regexp(t, fmt.Sprintf(`^brand%d\.com,yes,,cpg,"Snacks, sold in grocery\.",(dev|test)$`, i), line, "every other cell as it was")
	}
	n, err = evals.AssignSplitsFile(path, "is_cpg")
	require.NoError(t, err)
	require.Zero(t, n, "nothing left to assign")
}
