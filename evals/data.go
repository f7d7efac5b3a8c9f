// Package evals measures classifier candidates (model × prompt version ×
// search provider) against hand-labelled domains: it runs each candidate
// through the worker's own search and model step, scores the answers, writes
// a report with pictures, and gates on thresholds so a prompt change can be
// checked in CI.
package evals

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/wire/csvcell"
)

// Case is one labelled domain.
type Case struct {
	Domain string `json:"domain"`
	// Label is the right answer: true for yes.
	Label bool `json:"label"`
	// Doubtful marks a label that reasonable people could argue.
	Doubtful bool `json:"doubtful,omitempty"`
	// Kind groups cases by the question they test (retailer, dtc,
	// subsidiary…), so a report can show where a candidate goes wrong.
	Kind      string `json:"kind,omitempty"`
	Rationale string `json:"rationale"`
	// Split is SplitDev (prompts are tuned on these) or SplitTest (held
	// out: the score to believe); "" in a data set without a split column.
	Split string `json:"split,omitempty"`
}

// The splits of a data set (evals/README.md, "Dev and test").
const (
	SplitDev  = "dev"
	SplitTest = "test"
)

// LoadCases reads a labelled data set from a CSV file; see ReadCases. Its
// errors name the file.
func LoadCases(path, answerField string) ([]Case, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot open the data set: %w", err)
	}
	defer f.Close()
	cases, err := ReadCases(f, answerField)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cases, nil
}

// ReadCases reads a labelled data set: a CSV file with a header naming the
// columns domain, the classifier's answer field (is_cpg), rationale, and
// optionally doubtful and kind, in any order. Answers and doubtful are
// yes/no (true/false, 1/0; doubtful also "doubtful" or empty). Domains are
// normalized like the API does. A cell escaped against formulas (an
// apostrophe where one starts, csvcell) reads as the value it escapes. It returns
// an error naming the line for a bad value, an empty rationale or a
// duplicate domain.
func ReadCases(r io.Reader, answerField string) ([]Case, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	cr.Comment = '#'
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, errors.New("the data set is empty")
	} else if err != nil {
		return nil, fmt.Errorf("cannot read the header: %w", err)
	}
	col := map[string]int{}
	for i, h := range header {
		col[strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")))] = i
	}
	for _, need := range []string{"domain", answerField, "rationale"} {
		if _, ok := col[need]; !ok {
			return nil, fmt.Errorf("the header must name the columns domain, %s and rationale (and may name doubtful and kind), got %q",
				answerField, strings.Join(header, ","))
		}
	}
	// A cell's formula escape (csvcell, as override export writes it) is
	// taken off: the value is what was exported.
	field := func(rec []string, name string) string {
		if i, ok := col[name]; ok && i < len(rec) {
			return csvcell.Unescape(strings.TrimSpace(rec[i]))
		}
		return ""
	}

	var cases []Case
	seen := map[string]int{}
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("cannot read the CSV: %w", err)
		}
		line, _ := cr.FieldPos(0)
		domain, err := classifier.NormalizeDomain(field(rec, "domain"))
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		if first, dup := seen[domain]; dup {
			return nil, fmt.Errorf("line %d: %s is already on line %d", line, domain, first)
		}
		seen[domain] = line
		c := Case{Domain: domain, Kind: field(rec, "kind"), Rationale: field(rec, "rationale"), Split: strings.ToLower(field(rec, "split"))}
		if c.Split != "" && c.Split != SplitDev && c.Split != SplitTest {
			return nil, fmt.Errorf("line %d: split must be dev, test or empty, got %q", line, c.Split)
		}
		var ok bool
		if c.Label, ok = parseYesNo(field(rec, answerField)); !ok {
			return nil, fmt.Errorf("line %d: %s must be yes or no, got %q", line, answerField, field(rec, answerField))
		}
		d := field(rec, "doubtful")
		if c.Doubtful, ok = parseYesNo(d); !ok && d != "" && !strings.EqualFold(d, "doubtful") {
			return nil, fmt.Errorf("line %d: doubtful must be yes, no or empty, got %q", line, d)
		}
		c.Doubtful = c.Doubtful || strings.EqualFold(d, "doubtful")
		if c.Rationale == "" {
			return nil, fmt.Errorf("line %d: %s has no rationale", line, domain)
		}
		cases = append(cases, c)
	}
	if len(cases) == 0 {
		return nil, errors.New("the data set has a header but no domains")
	}
	return cases, nil
}

func parseYesNo(s string) (value, ok bool) {
	switch strings.ToLower(s) {
	case "yes", "y", "true", "1":
		return true, true
	case "no", "n", "false", "0":
		return false, true
	}
	return false, false
}

// Balance counts the yes, no and doubtful labels of a data set.
func Balance(cases []Case) (yes, no, doubtful int) {
	for _, c := range cases {
		if c.Label {
			yes++
		} else {
			no++
		}
		if c.Doubtful {
			doubtful++
		}
	}
	return yes, no, doubtful
}
