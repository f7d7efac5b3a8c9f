package csvcell_test

import (
	"testing"

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
		"\t=1":                                   "'\t=1",
		"\r=1":                                   "'\r=1",
		"\n=1":                                   "'\n=1",
		"  =1+1":                                 "'  =1+1",
		"＝1+1":                                   "'＝1+1", // fullwidth, which some spreadsheets read as =
		"＠SUM(A1)":                               "'＠SUM(A1)",
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
	} {
		got := csvcell.Escape(in)
		require.Equal(t, want, got, "Escape(%q)", in)
		require.Equal(t, in, csvcell.Unescape(got), "Unescape(Escape(%q))", in)
	}
}

func TestUnescape_LeavesOtherApostrophesAlone(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"'quoted' text", "'", "'s-Hertogenbosch", "it's", "'5", "' x"} {
		require.Equal(t, s, csvcell.Unescape(s))
	}
}

func FuzzEscape(f *testing.F) {
	for _, s := range []string{"", "=1", "'=1", "''+", " -", "＝", "'", "a", "\t", "'\r"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e := csvcell.Escape(s)
		require.Equal(t, s, csvcell.Unescape(e), "the rule reverses")
		require.False(t, csvcell.Risky(e), "%q escaped to %q still starts a formula", s, e)
		require.Equal(t, e, csvcell.Escape(csvcell.Unescape(e)))
	})
}
