package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/cli"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/db/dbtest"
	"github.com/domainclass/domainclass/evals"
	"github.com/domainclass/domainclass/wire"
	"github.com/domainclass/domainclass/wire/csvcell"
)

// TestOverride drives `override set|list|delete|export` as an operator
// would, and feeds the export to the evals loader and `eval split`.
func TestOverride(t *testing.T) {
	t.Parallel()
	env := []string{"DATABASE_URL=" + dbtest.URL(), "DATABASE_SCHEMA=" + dbtest.Schema(t)}
	run := func(args ...string) (int, string, string) {
		t.Helper()
		var out, errOut strings.Builder
		code := Run(context.Background(), args, env, strings.NewReader(""), &out, &errOut)
		return code, out.String(), errOut.String()
	}
	ok := func(args ...string) string {
		t.Helper()
		code, out, errOut := run(args...)
		require.Equal(t, 0, code, "%v: %s", args, errOut)
		return out
	}

	require.Equal(t, "override set: acme.com for cpg is yes (confidence 5), by bob\n",
		ok("override", "set", "https://www.Acme.com/about", "--yes", "--note", "Makes chips.", "--by", "bob"))
	require.Equal(t, "override set: acme.com for cpg is no (confidence 5), by alice (replaces the earlier one)\n",
		ok("override", "set", "acme.com", "--no", "--note", "Sold its  snack brands;\nnow software.", "--by", "alice"),
		"set again, it replaces the override")
	me, err := user.Current()
	require.NoError(t, err)
	require.Equal(t, "override set: beta.co.uk for cpg is yes (confidence 3), by "+me.Username+"\n",
		ok("override", "set", "shop.beta.co.uk", "--classifier", "cpg", "--yes", "--confidence", "3", "--note", "Makes soap, mostly."),
		"by the OS user when --by is left out")

	lines := strings.Split(strings.TrimSpace(ok("override", "list")), "\n")
	require.Len(t, lines, 3, "a header and two overrides")
	require.Regexp(t, `^CLASSIFIER\s+DOMAIN\s+ANSWER\s+CONFIDENCE\s+SET BY\s+SET AT\s+NOTE$`, lines[0])
	require.Regexp(t, `^cpg\s+acme\.com\s+no\s+5\s+alice\s+\d{4}-\d\d-\d\d \d\d:\d\d\s+Sold its snack brands; now software\.$`, lines[1],
		"the note is kept on one line")
	require.Regexp(t, `^cpg\s+beta\.co\.uk\s+yes\s+3\s+\S+\s+\d{4}-`, lines[2])
	require.Equal(t, lines, strings.Split(strings.TrimSpace(ok("override", "list", "--classifier", "cpg")), "\n"))

	// The export is a data set the evals loader reads, and `eval split`
	// gives its rows a split.
	code, csv, errOut := run("override", "export", "--csv")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "override export: 2 overrides for cpg\n", errOut)
	require.Equal(t, "domain,is_cpg,doubtful,kind,rationale,split\n"+
		"acme.com,no,,override,Sold its snack brands; now software.,\n"+
		"beta.co.uk,yes,doubtful,override,\"Makes soap, mostly.\",\n", csv)
	data := filepath.Join(t.TempDir(), "overrides.csv")
	require.NoError(t, os.WriteFile(data, []byte(csv), 0o600))
	cases, err := evals.LoadCases(data, "is_cpg")
	require.NoError(t, err)
	require.Equal(t, []evals.Case{
		{Domain: "acme.com", Label: false, Kind: "override", Rationale: "Sold its snack brands; now software."},
		{Domain: "beta.co.uk", Label: true, Doubtful: true, Kind: "override", Rationale: "Makes soap, mostly."},
	}, cases)
	require.Equal(t, data+": 2 rows given a split\n", ok("eval", "split", "--data", data))
	cases, err = evals.LoadCases(data, "is_cpg")
	require.NoError(t, err)
	for _, c := range cases {
		require.Contains(t, []string{evals.SplitDev, evals.SplitTest}, c.Split, c.Domain)
	}
	_, csv, _ = run("override", "export", "--kind", "retailer")
	require.Contains(t, csv, "acme.com,no,,retailer,", "--kind names the rows' kind")

	require.Equal(t, "override delete: acme.com for cpg is answered by the cache and the model again\n",
		ok("override", "delete", "www.acme.com"))
	code, _, errOut = run("override", "delete", "acme.com")
	require.Equal(t, 1, code)
	require.Equal(t, "domainclass: acme.com has no override for cpg\n", errOut)
	require.NotContains(t, ok("override", "list"), "acme.com")
	ok("override", "delete", "beta.co.uk")
	require.Equal(t, "no overrides; set one with: domainclass override set DOMAIN --yes|--no --note TEXT\n", ok("override", "list"))
	code, _, errOut = run("override", "export", "--csv")
	require.Equal(t, 1, code)
	require.Equal(t, "domainclass: no overrides for cpg to export\n", errOut)

	// Bad input: one clear line, exit 2, nothing written.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"override", "set", "acme.com", "--note", "x"}, "override set needs --yes or --no (one of them)"},
		{[]string{"override", "set", "acme.com", "--yes", "--no", "--note", "x"}, "override set needs --yes or --no (one of them)"},
		{[]string{"override", "set", "acme.com", "--yes"}, "override set needs --note TEXT"},
		{[]string{"override", "set", "acme.com", "--yes", "--note", " \n "}, "override set needs --note TEXT"},
		{[]string{"override", "set", "acme.com", "--yes", "--note", "x", "--confidence", "6"}, "--confidence must be 1 to 5, got 6"},
		{[]string{"override", "set", "10.0.0.1", "--yes", "--note", "x"}, "10.0.0.1: is an IP address, not a domain"},
		{[]string{"override", "set", "acme.com", "--yes", "--note", "x", "--classifier", "b2b"}, `unknown classifier "b2b"`},
		{[]string{"override", "set", "a.com", "b.com", "--yes", "--note", "x"}, "domainclass override set takes 1 domain, got 2"},
		{[]string{"override", "delete"}, "domainclass override delete takes 1 domain, got 0"},
		{[]string{"override", "list", "--classifier", "b2b"}, `unknown classifier "b2b"`},
		{[]string{"override", "export", "--csv=false"}, "override export writes CSV only"},
		{[]string{"override"}, `"override" needs a subcommand: delete, export, import, list, set`},
	} {
		code, _, errOut := run(tc.args...)
		require.Equal(t, 2, code, tc.args)
		require.Contains(t, errOut, tc.want, tc.args)
		require.Equal(t, 2, strings.Count(errOut, "\n"), "one line and the usage hint: %q", errOut)
	}
	require.Contains(t, ok("override", "list"), "no overrides")
}

// TestOverride_AnswersJobs: what `known import` and `override set` record
// is what the next job gets, with who and why, and no model call.
func TestOverride_AnswersJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newE2E(t, nil, nil)
	known := filepath.Join(t.TempDir(), "known.csv")
	require.NoError(t, os.WriteFile(known, []byte("domain,name\nunilever.com,Unilever\n"), 0o600))
	code, out, errOut := e.cli(ctx, "", nil, "known", "import", known)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "known import: 1 company for cpg (1 new, 0 updated)\n", out)
	code, _, errOut = e.cli(ctx, "", nil, "override", "set", "acme.com", "--no", "--note", "A software firm.", "--by", "alice")
	require.Equal(t, 0, code, errOut)

	e.start(cli.RoleAll)
	code, out, errOut = e.cli(ctx, "", []string{"DOMAINCLASS_URL=" + e.api.APIURL()},
		"submit", "--wait", "--json", "--poll", "100ms", "www.unilever.com", "acme.com")
	require.Equal(t, 0, code, errOut)
	var rows []wire.ResultReport
	require.NoError(t, json.Unmarshal([]byte(out), &rows))
	require.Len(t, rows, 2)
	got := map[string][]any{}
	for _, r := range rows {
		require.Equal(t, classifier.SourceOverride, r.Source, r.Domain)
		require.Empty(t, r.Model, r.Domain)
		require.Nil(t, r.Evidence, "%s: no model, no evidence", r.Domain)
		got[r.Domain] = []any{*r.Answer, *r.Confidence, r.Reasoning, r.SetBy, r.Note}
	}
	require.Equal(t, map[string][]any{
		"unilever.com": {true, 5, "Set by known import: Listed as a known CPG company (Unilever).", "known import",
			"Listed as a known CPG company (Unilever)."},
		"acme.com": {false, 5, "Set by alice: A software firm.", "alice", "A software firm."},
	}, got)
	require.Zero(t, e.llm.Total())
}

// TestOverride_HostileText: an override's note (and who set it, and a
// known company's name) is stored on one line without control
// characters, so that no escape sequence reaches the terminals and files
// it is shown in; and the export a spreadsheet opens runs no formula from
// it, while the evals loader reads back exactly what was stored.
func TestOverride_HostileText(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := []string{"DATABASE_URL=" + dbtest.URL(), "DATABASE_SCHEMA=" + dbtest.Schema(t)}
	run := func(args ...string) (int, string, string) {
		t.Helper()
		var out, errOut strings.Builder
		code := Run(ctx, args, env, strings.NewReader(""), &out, &errOut)
		return code, out.String(), errOut.String()
	}
	const formula = `=HYPERLINK("https://evil.example","x")`
	code, _, errOut := run("override", "set", "acme.com", "--yes", "--note", formula+"\x1b[31m red\x07\u009b", "--by", "eve\x1b[2J")
	require.Equal(t, 0, code, errOut)
	known := filepath.Join(t.TempDir(), "known.csv")
	require.NoError(t, os.WriteFile(known, []byte("domain,name\nbeta.com,\"Beta\x1b]0;pwned\x07 Foods\"\n"), 0o600))
	code, _, errOut = run("known", "import", known)
	require.Equal(t, 0, code, errOut)

	d, err := db.Open(ctx, db.Config{URL: dbtest.URL(), Schema: env[1][len("DATABASE_SCHEMA="):]})
	require.NoError(t, err)
	defer d.Close()
	o, err := db.OverrideGet(ctx, d.Pool, "cpg", "acme.com")
	require.NoError(t, err)
	require.Equal(t, formula+" [31m red", o.Note, "control characters fold into spaces, as in a model's reason")
	require.Equal(t, "eve [2J", o.SetBy)
	o, err = db.OverrideGet(ctx, d.Pool, "cpg", "beta.com")
	require.NoError(t, err)
	require.Equal(t, "Listed as a known CPG company (Beta ]0;pwned Foods).", o.Note)

	code, export, errOut := run("override", "export", "--kind", "@kind")
	require.Equal(t, 0, code, errOut)
	records, err := csv.NewReader(strings.NewReader(export)).ReadAll()
	require.NoError(t, err)
	for _, rec := range records {
		for _, cell := range rec {
			require.False(t, csvcell.Risky(cell), "a spreadsheet would run %q", cell)
		}
	}
	require.Equal(t, []string{"acme.com", "yes", "", "'@kind", "'" + formula + " [31m red", ""}, records[1])
	data := filepath.Join(t.TempDir(), "overrides.csv")
	require.NoError(t, os.WriteFile(data, []byte(export), 0o600))
	cases, err := evals.LoadCases(data, "is_cpg")
	require.NoError(t, err)
	require.Equal(t, evals.Case{Domain: "acme.com", Label: true, Kind: "@kind", Rationale: formula + " [31m red"}, cases[0],
		"the loader reads back what was exported")
}
