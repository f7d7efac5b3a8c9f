// Package csvcell is the one rule for the cells of every CSV file
// domainclass writes for people (a list's results, submit --csv,
// override export): a cell a spreadsheet would run as a formula gets a
// leading apostrophe, as OWASP advises against CSV injection. Web pages,
// models and callers choose much of what those cells hold: a domain
// "+example.org", a ref "@SUM(1+1)*cmd|' /C calc'!A0", a reason
// "=HYPERLINK(…)".
//
// The rule reverses (Unescape), so a program reading such a file gets the
// values back exactly: an apostrophe is added only in front of a formula's
// start, or in front of apostrophes that are followed by one, and
// Unescape removes exactly that one.
package csvcell

import (
	"strings"
	"unicode/utf8"
)

// starters are the first characters of a formula to a spreadsheet: = + - @
// (and their fullwidth forms, which some read as the same), and the tab,
// carriage return and newline that some strip before reading one.
const starters = "=+-@\t\r\n＝＋－＠"

// Risky reports whether a spreadsheet could read s as a formula: after any
// apostrophes and spaces, s starts with one of = + - @ (or their fullwidth
// forms), a tab, a carriage return or a newline. An escaped cell is not
// risky: it starts with the apostrophe a spreadsheet shows as text.
func Risky(s string) bool {
	return risky(s) && !strings.HasPrefix(s, "'")
}

// risky is Risky's test, apostrophes included: s after any apostrophes
// and spaces starts a formula.
func risky(s string) bool {
	if s == "" || (s[0] < utf8.RuneSelf && !strings.ContainsRune(starters+"' ", rune(s[0]))) {
		return false // the common case, at a byte's cost
	}
	t := strings.TrimLeft(strings.TrimLeft(s, "'"), " ")
	r, _ := utf8.DecodeRuneInString(t)
	return t != "" && strings.ContainsRune(starters, r)
}

// Escape returns s as a cell no spreadsheet runs: with an apostrophe in
// front when s, after any apostrophes and spaces, starts a formula;
// otherwise s as it is.
func Escape(s string) string {
	if risky(s) {
		return "'" + s
	}
	return s
}

// Unescape returns the value Escape made cell from: cell without the
// apostrophe Escape added, or cell as it is.
func Unescape(cell string) string {
	if strings.HasPrefix(cell, "'") && risky(cell) {
		return cell[1:]
	}
	return cell
}

// EscapeAll escapes every field of record in place and returns it.
func EscapeAll(record []string) []string {
	for i, f := range record {
		record[i] = Escape(f)
	}
	return record
}
