// Package csvcell is the one rule for the cells of every CSV file
// domainclass writes for people (a list's results, submit --csv,
// override export): a cell a spreadsheet would run as a formula gets an
// apostrophe where the formula would start, as OWASP advises against CSV
// injection. Web pages, models and callers choose much of what those
// cells hold: a domain "+example.org", a ref "@SUM(1+1)*cmd|' /C calc'!A0",
// a reason "=HYPERLINK(…)", or one that hides its formula behind a
// zero-width space or after a semicolon.
//
// A formula may start where a cell starts, and where a spreadsheet that
// reads the file with other separators than ours starts one: after a
// semicolon (Excel where it is the list separator, and LibreOffice's
// import, split on it, and a field with one is not quoted), a tab (the
// same), or a line break (a reader that took a quote for text ends its row
// there). A comma is not one: a field holding a comma is quoted, and every
// reader that splits on commas reads the quotes. Invisible characters in
// front of a formula do not hide it: spreadsheets drop some of them (a
// BOM, a zero-width or no-break space) before they read the cell.
//
// The rule reverses (Unescape), so a program reading such a file gets the
// values back exactly: an apostrophe is added only in front of a
// segment (the text between separators) that starts a formula past any
// apostrophes, and Unescape removes exactly that one.
package csvcell

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// starters are the first characters of a formula to a spreadsheet: = + - @,
// and their fullwidth forms, which some read as the same.
const starters = "=+-@＝＋－＠"

// separators end a segment: the characters after which some reader of a
// CSV file starts a new cell (see the package comment). Escaping adds no
// separator, so the segments of an escaped cell are those of its value.
const separators = ";\t\r\n"

// Risky reports whether a spreadsheet could read s, or a cell it splits
// s into, as a formula: s has a segment (its start, or what follows a
// semicolon, a tab, a carriage return or a newline) that starts with one of
// = + - @ (or their fullwidth forms), past any apostrophes, quotes, spaces
// and invisible characters. An escaped cell is not risky: each such segment
// starts with the apostrophe a spreadsheet shows as text.
func Risky(s string) bool {
	for rest := s; ; {
		seg, next, more := cut(rest)
		if risky(seg) && !strings.HasPrefix(seg, "'") {
			return true
		}
		if !more {
			return false
		}
		rest = next
	}
}

// risky is the test of one segment, apostrophes included: past any
// apostrophes, quotes, spaces and invisible characters, seg starts a
// formula. An apostrophe in front does not change its answer, which is
// what makes the rule reverse.
func risky(seg string) bool {
	for _, r := range seg {
		if r > ' ' && r < 0x7f && r != '\'' && r != '"' {
			return r == '=' || r == '+' || r == '-' || r == '@' // the common case, at a byte's cost
		}
		if !skipped(r) {
			return strings.ContainsRune(starters, r)
		}
	}
	return false
}

// skipped reports whether r may stand in front of a formula without
// hiding it: an apostrophe or a quote (which a reader that took the file
// for another format can strip), and spaces, control, format and other
// invisible characters (a no-break or zero-width space, a BOM, a
// right-to-left override), which spreadsheets may drop or not show.
func skipped(r rune) bool {
	return r == '\'' || r == '"' || unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zs, unicode.Zl, unicode.Zp)
}

// cut returns the first segment of s, and what follows its separator when
// there is one.
func cut(s string) (seg, rest string, more bool) {
	i := len(s)
	for k := range len(separators) { // one byte each: IndexByte is the fast scan
		if j := strings.IndexByte(s[:i], separators[k]); j >= 0 {
			i = j
		}
	}
	if i == len(s) {
		return s, "", false
	}
	return s[:i], s[i+1:], true
}

// Escape returns s as a cell no spreadsheet runs: with an apostrophe in
// front of each segment that starts a formula (Risky); s as it is when
// none does.
func Escape(s string) string {
	if !hasSeparator(s) { // most cells: one part, one scan
		if risky(s) {
			return "'" + s
		}
		return s
	}
	return eachSegment(s, func(seg string) string {
		if risky(seg) {
			return "'" + seg
		}
		return seg
	})
}

// Unescape returns the value Escape made cell from: cell without the
// apostrophes Escape added, or cell as it is.
func Unescape(cell string) string {
	return eachSegment(cell, func(seg string) string {
		if strings.HasPrefix(seg, "'") && risky(seg) {
			return seg[1:]
		}
		return seg
	})
}

// eachSegment returns s with each segment replaced by f's answer for it,
// and s itself, not a copy, when f changes none.
func eachSegment(s string, f func(string) string) string {
	var b strings.Builder
	changed := false
	for rest := s; ; {
		seg, next, more := cut(rest)
		out := f(seg)
		if !changed && out != seg {
			changed = true
			b.Grow(len(s) + utf8.UTFMax)
			b.WriteString(s[:len(s)-len(rest)])
		}
		if changed {
			b.WriteString(out)
			if more {
				b.WriteByte(rest[len(seg)])
			}
		}
		if !more {
			break
		}
		rest = next
	}
	if !changed {
		return s
	}
	return b.String()
}

// EscapeAll escapes every field of record in place and returns it.
func EscapeAll(record []string) []string {
	for i, f := range record {
		record[i] = Escape(f)
	}
	return record
}

// hasSeparator reports whether s holds one of separators: a byte loop,
// several times faster than strings.ContainsAny on the short cells of a
// results CSV (it runs on every cell of a million-row download).
func hasSeparator(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ';', '\t', '\r', '\n':
			return true
		}
	}
	return false
}
