package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier/llm/llmtest"
	"github.com/domainclass/domainclass/cli"
)

// Issue 27: a CRM export names its columns as it likes; submit names them
// for the API.
func TestSubmitList_ColumnMapping(t *testing.T) {
	t.Parallel()
	e := newE2E(t, func(llmtest.Request) llmtest.Reply { return llmtest.Answer(true, 4, "Snacks.") }, nil)
	e.start(cli.RoleAll)
	dir := t.TempDir()
	file, answers := filepath.Join(dir, "export.csv"), filepath.Join(dir, "answers.csv")
	require.NoError(t, os.WriteFile(file, []byte("Account Name,Website,Account ID,Domain\n"+
		"Acme,https://www.acme.com/about,A-1,old.example\nBeta,beta.io,A-2,\n"), 0o600))
	env := []string{"DOMAINCLASS_URL=" + e.api.APIURL()}

	code, out, errOut := e.cli(context.Background(), "", env, "submit", "--file", file, "--domain-column", "website",
		"--ref-column", "account id", "--wait", "--poll", "100ms", "--out", answers)
	require.Equal(t, 0, code, errOut)
	require.Empty(t, out)
	require.Contains(t, errOut, ": 2 rows, 2 domains, 0 duplicates, 0 rejected\n", "two domains with a mapping go as a list")
	records := readCSVFile(t, answers)
	require.Len(t, records, 3)
	require.Equal(t, []string{"1", "https://www.acme.com/about", "A-1", "acme.com", "COMPLETED"}, records[1][:5])
	require.Equal(t, []string{"2", "beta.io", "A-2", "beta.io", "COMPLETED"}, records[2][:5])

	// The CLI names its flags, not the API's query parameters (issue 36).
	code, _, errOut = e.cli(context.Background(), "", env, "submit", "--file", file, "--domain-column", "url")
	require.Equal(t, 1, code)
	require.Equal(t, "domainclass: 400 Bad Request: The CSV header has no column \"url\" (--domain-column); "+
		"its columns are \"Account Name\",\"Website\",\"Account ID\",\"Domain\".\n", errOut)
	noDomain := filepath.Join(dir, "accounts.csv")
	require.NoError(t, os.WriteFile(noDomain, []byte("Account Name,Website\nAcme,acme.com\n"), 0o600))
	code, _, errOut = e.cli(context.Background(), "", env, "submit", "--list", "--file", noDomain)
	require.Equal(t, 1, code)
	require.Equal(t, "domainclass: 400 Bad Request: The CSV header has no column \"domain\"; its columns are "+
		"\"Account Name\",\"Website\". Name the column of the domains with --domain-column.\n", errOut)
	code, _, errOut = e.cli(context.Background(), "", env, "submit", "--dry-run", "--file", file, "--ref-column", "id")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `The CSV header has no column "id" (--ref-column)`)

	plain := filepath.Join(dir, "domains.txt")
	require.NoError(t, os.WriteFile(plain, []byte("acme.com\nbeta.io\n"), 0o600))
	code, _, errOut = e.cli(context.Background(), "", env, "submit", "--file", plain, "--domain-column", "website")
	require.Equal(t, 2, code, errOut)
	require.Contains(t, errOut, "is not a CSV file")
	code, _, errOut = e.cli(context.Background(), "", env, "submit", "acme.com", "--ref-column", "id")
	require.Equal(t, 2, code, errOut)
	require.Equal(t, 1, e.count("list"), "nothing sent but the first")
}
