package evals

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/csv"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
)

// SplitSeed and TestShare are how the data sets' rows were split into dev
// and test: within each kind, the rows without a split are ordered by
// SHA-256 of SplitSeed and the domain, and the first of them go to test
// until the kind has round(TestShare × its rows) test rows. Written down
// so that anyone gets the same split, and fixed so that it never moves: a
// row keeps its split, and rows added later are split by the same rule.
const (
	SplitSeed = "domainclass-evals-2026-12-01"
	TestShare = 0.3
)

// AssignSplits gives every case without a split one, by the rule above,
// and returns how many it assigned.
func AssignSplits(cases []Case) int {
	byKind := map[string][]int{}
	for i, c := range cases {
		byKind[c.Kind] = append(byKind[c.Kind], i)
	}
	assigned := 0
	for _, idx := range byKind {
		want := int(math.Round(TestShare * float64(len(idx))))
		var open []int
		for _, i := range idx {
			switch cases[i].Split {
			case SplitTest:
				want--
			case "":
				open = append(open, i)
			}
		}
		slices.SortFunc(open, func(a, b int) int { return bytes.Compare(splitKey(cases[a].Domain), splitKey(cases[b].Domain)) })
		for n, i := range open {
			cases[i].Split = SplitDev
			if n < want {
				cases[i].Split = SplitTest
			}
			assigned++
		}
	}
	return assigned
}

func splitKey(domain string) []byte {
	h := sha256.Sum256([]byte(SplitSeed + "\x00" + domain))
	return h[:]
}

// AssignSplitsFile fills the split column of a data set's CSV (adding the
// column when it has none) by AssignSplits, keeping every other cell as it
// is, and returns how many rows it assigned.
func AssignSplitsFile(path, answerField string) (int, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	if bytes.HasPrefix(raw, []byte("#")) || bytes.Contains(raw, []byte("\n#")) {
		return 0, fmt.Errorf("%s has comment lines, which rewriting it would drop: fill its split column by hand", path)
	}
	cases, err := ReadCases(bytes.NewReader(raw), answerField)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	n := AssignSplits(cases)
	if n == 0 {
		return 0, nil
	}
	// Edit the lines in place, so that every other cell keeps its quoting:
	// split is the last column (added when there is none), and a row is a
	// line.
	cr := csv.NewReader(bytes.NewReader(raw))
	cr.FieldsPerRecord = -1
	records, err := cr.ReadAll()
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	lines := strings.Split(strings.TrimRight(string(raw), "\r\n"), "\n")
	if len(lines) != len(records) {
		return 0, fmt.Errorf("%s has rows over several lines or blank lines: fill its split column by hand", path)
	}
	col := slices.IndexFunc(records[0], func(h string) bool { return strings.EqualFold(strings.TrimSpace(h), "split") })
	switch {
	case col < 0:
		lines[0] += ",split"
	case col != len(records[0])-1:
		return 0, fmt.Errorf("%s: split must be the last column to be filled in place", path)
	}
	for i, rec := range records[1:] { // ReadCases kept the rows in order, one case each
		line := strings.TrimRight(lines[i+1], "\r")
		switch {
		case col < 0:
			line += "," + cases[i].Split
		case len(rec) <= col:
			line += strings.Repeat(",", col-len(rec)+1) + cases[i].Split
		case strings.TrimSpace(rec[col]) == "":
			line = strings.TrimRight(line, " ") + cases[i].Split
		}
		lines[i+1] = line
	}
	return n, os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}

// SplitCases keeps the cases of split ("dev" or "test"); "" or "all"
// keeps them all.
func SplitCases(cases []Case, split string) ([]Case, error) {
	switch split = cmp.Or(split, "all"); split {
	case "all":
		return cases, nil
	case SplitDev, SplitTest:
		var out []Case
		for _, c := range cases {
			if c.Split == split {
				out = append(out, c)
			}
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("the data set has no %s rows (see evals/README.md, \"Dev and test\")", split)
		}
		return out, nil
	}
	return nil, fmt.Errorf("--split must be dev, test or all, got %q", split)
}
