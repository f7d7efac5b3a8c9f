package evals

import (
	"fmt"
	"strings"
)

// Gate is the bar every candidate must clear, for CI. A negative MaxFN or
// MaxFailed, or a zero MinAccuracy, turns that check off. False negatives
// and accuracy are counted on the rows whose label is clear (not marked
// doubtful): a doubtful row is there to be looked at, not to fail a build.
type Gate struct {
	// MaxFN is the most false negatives allowed (answers, across samples).
	MaxFN int
	// MinAccuracy is the lowest accuracy allowed, 0 to 1.
	MinAccuracy float64
	// MaxFailed is the most FAILED answers allowed.
	MaxFailed int
}

// NoGate checks nothing.
var NoGate = Gate{MaxFN: -1, MaxFailed: -1}

// Active reports whether the gate checks anything.
func (g Gate) Active() bool { return g.MaxFN >= 0 || g.MinAccuracy > 0 || g.MaxFailed >= 0 }

// String says what the gate checks, for the report.
func (g Gate) String() string {
	var parts []string
	if g.MaxFN >= 0 {
		parts = append(parts, fmt.Sprintf("false negatives ≤ %d", g.MaxFN))
	}
	if g.MinAccuracy > 0 {
		parts = append(parts, fmt.Sprintf("accuracy ≥ %.3f", g.MinAccuracy))
	}
	if g.MaxFailed >= 0 {
		parts = append(parts, fmt.Sprintf("FAILED ≤ %d", g.MaxFailed))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// Check returns why s falls short of the gate, one phrase per reason, or
// nothing when it passes.
func (g Gate) Check(s Score) []string {
	var why []string
	if fn := s.Clear.FN; g.MaxFN >= 0 && fn > g.MaxFN {
		why = append(why, fmt.Sprintf("%d false negatives on clear rows > --max-fn %d (%s)", fn, g.MaxFN, missList(clearMisses(s.FalseNegatives), 5)))
	}
	if g.MinAccuracy > 0 && s.Clear.Accuracy < g.MinAccuracy {
		why = append(why, fmt.Sprintf("accuracy on clear rows %.3f < --min-accuracy %.3f (%d/%d)", s.Clear.Accuracy, g.MinAccuracy, s.Clear.Correct, s.Clear.Total))
	}
	if g.MaxFailed >= 0 && s.Failed > g.MaxFailed {
		why = append(why, fmt.Sprintf("%d FAILED > --max-failed %d", s.Failed, g.MaxFailed))
	}
	return why
}

// clearMisses drops the misses whose label is doubtful.
func clearMisses(ms []Miss) []Miss {
	var out []Miss
	for _, m := range ms {
		if !m.Doubtful {
			out = append(out, m)
		}
	}
	return out
}

// missList names up to n domains, then says how many more.
func missList(ms []Miss, n int) string {
	var names []string
	for i, m := range ms {
		if i == n {
			names = append(names, fmt.Sprintf("and %d more", len(ms)-n))
			break
		}
		names = append(names, m.Domain)
	}
	return strings.Join(names, ", ")
}
