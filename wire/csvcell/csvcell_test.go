package csvcell_test

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/wire/csvcell"
)

func TestEscape(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		// A spreadsheet runs a cell that starts with these as a formula.
		`=HYPERLINK("https://evil.example","x")`: `'=HYPERLINK("https://evil.example","x")`,
		`@SUM(1+1)*cmd|' /C calc'!A0`:            `'@SUM(1+1)*cmd|' /C calc'!A0`,
		"+example.org":                           "'+example.org",
		"-2+3":                                   "'-2+3",
		"  =1+1":                                 "'  =1+1",
		"＝1+1":                                   "'＝1+1", // fullwidth, which some spreadsheets read as =
		"＠SUM(A1)":                               "'＠SUM(A1)",
		// Invisible characters in front do not hide one: spreadsheets drop
		// some (a BOM, a zero-width or no-break space) before they read it.
		"\u200b=1+1":     "'\u200b=1+1", // zero-width space
		"\ufeff=1+1":     "'\ufeff=1+1", // BOM
		"\u00a0=1+1":     "'\u00a0=1+1", // no-break space
		"\u202e=1+1":     "'\u202e=1+1", // right-to-left override
		"\u202d@SUM(A1)": "'\u202d@SUM(A1)",
		"\u2060\u3000-1": "'\u2060\u3000-1", // word joiner, ideographic space
		"\v=1":           "'\v=1",
		`"=1+1"`:         `'"=1+1"`,
		// Nor does a separator some spreadsheets split on: a semicolon,
		// a tab, a line break. Each part that starts one is escaped.
		`x;=HYPERLINK("https://evil.example","x")`: `x;'=HYPERLINK("https://evil.example","x")`,
		"x;\u200b+1": "x;'\u200b+1",
		"x; -1":      "x;' -1",
		"a\t-1":      "a\t'-1",
		"a\n=1":      "a\n'=1",
		"a\r\n@A1":   "a\r\n'@A1",
		"\t=1":       "\t'=1",
		"\r=1":       "\r'=1",
		"\n=1":       "\n'=1",
		"=1;=2;3":    "'=1;'=2;3",
		"x;'=1":      "x;''=1",
		// An apostrophe already in front of one is kept apart from ours.
		"'=1+1": "''=1+1",
		"'' -1": "''' -1",
		// The rest is left as it is.
		"":                     "",
		"example.org":          "example.org",
		"https://acme.com/":    "https://acme.com/",
		"Makes -5% snacks.":    "Makes -5% snacks.",
		"'s-Hertogenbosch":     "'s-Hertogenbosch",
		"'":                    "'",
		"''":                   "''",
		"   ":                  "   ",
		"2026-11-30T12:00:00Z": "2026-11-30T12:00:00Z",
		"5":                    "5",
		"ünïcode":              "ünïcode",
		// Ordinary text keeps its separators and signs: a comma never
		// splits a quoted field, and a sign inside a part is no formula.
		"Sells snacks, -5% sugar; makes +3 lines": "Sells snacks, -5% sugar; makes +3 lines",
		"a;b\tc\nd": "a;b\tc\nd",
		";;":        ";;",
		"x;'":       "x;'",
		"\u200b":    "\u200b",
	} {
		got := csvcell.Escape(in)
		require.Equal(t, want, got, "Escape(%q)", in)
		require.Equal(t, in, csvcell.Unescape(got), "Unescape(Escape(%q))", in)
	}
}

func TestUnescape_LeavesOtherApostrophesAlone(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"'quoted' text", "'", "'s-Hertogenbosch", "it's", "'5", "' x", "x;'5", "a\t'b"} {
		require.Equal(t, s, csvcell.Unescape(s))
	}
}

func TestRisky(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"=1", "\u200b=1", "x;=1", "x;'=1;+2", "a\n-1"} {
		require.True(t, csvcell.Risky(s), "%q", s)
	}
	for _, s := range []string{"", "x", "'=1", "x;'=1", "a, -1", "a\n'-1"} {
		require.False(t, csvcell.Risky(s), "%q", s)
	}
}

// FuzzEscape: the rule reverses, and no reader that splits a cell on the
// separators and drops what spreadsheets drop in front of a cell sees a
// formula start in an escaped one.
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"", "=1", "'=1", "''+", " -", "＝", "'", "a", "\t", "'\r",
		"x;=1", "\u200b=1", "\ufeff'@", ";'", "\t'=1", `a;"-`, "\u202e\u00a0+"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e := csvcell.Escape(s)
		require.Equal(t, s, csvcell.Unescape(e), "the rule reverses")
		require.False(t, csvcell.Risky(e), "%q escaped to %q still starts a formula", s, e)
		require.Equal(t, e, csvcell.Escape(csvcell.Unescape(e)))
		for _, part := range strings.FieldsFunc(e, func(r rune) bool { return strings.ContainsRune(";\t\r\n", r) }) {
			shown := strings.TrimLeftFunc(part, func(r rune) bool {
				return r == '"' || unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r)
			})
			first, _ := utf8.DecodeRuneInString(shown)
			require.False(t, shown != "" && strings.ContainsRune("=+-@＝＋－＠", first),
				"%q escaped to %q: a reader splitting on ;, tabs and line breaks reads the formula %q", s, e, shown)
		}
	})
}
