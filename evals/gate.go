package evals

import (
	"fmt"
	"strings"
)

// Gate is the bar every candidate must clear, for CI. A negative MaxFN or
// MaxFailed, or a zero MinAccuracy, turns that check off.
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
	if fn := s.Confusion.FN; g.MaxFN >= 0 && fn > g.MaxFN {
		why = append(why, fmt.Sprintf("%d false negatives > --max-fn %d (%s)", fn, g.MaxFN, missList(s.FalseNegatives, 5)))
	}
	if g.MinAccuracy > 0 && s.Accuracy < g.MinAccuracy {
		why = append(why, fmt.Sprintf("accuracy %.3f < --min-accuracy %.3f (%d/%d)", s.Accuracy, g.MinAccuracy, s.Correct, s.Total))
	}
	if g.MaxFailed >= 0 && s.Failed > g.MaxFailed {
		why = append(why, fmt.Sprintf("%d FAILED > --max-failed %d", s.Failed, g.MaxFailed))
	}
	return why
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
