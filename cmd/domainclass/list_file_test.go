package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier/llm/llmtest"
	"github.com/domainclass/domainclass/cli"
)

// Issue 38: submit reads a file of at most ten domains itself (to send it
// as jobs) and sends a longer one to the server as a list. Both read it by
// the same rules: a hostile file's rows are rejected for the same reasons,
// or the file refused with the same sentence, whichever way it goes.
func TestSubmit_ReadsAFileAsTheServerDoes(t *testing.T) {
	t.Parallel()
	e := newE2E(t, func(llmtest.Request) llmtest.Reply { return llmtest.Answer(true, 4, "Snacks.") },
		map[string]string{"CALLER_MAX_ACTIVE_LISTS": "100"})
	e.start(cli.RoleAll)
	env := []string{"DOMAINCLASS_URL=" + e.api.APIURL()}
	dir := t.TempDir()
	accepted := regexp.MustCompile(`^list \S+: (\d+) rows, \d+ domains, \d+ duplicates, (\d+) rejected\n`)
	refused := regexp.MustCompile(`^domainclass: \d{3} [^:]+: `)
	for _, tc := range []struct{ name, body string }{
		{"TwoDomainColumns", "domain,Domain\nacme.com,evil..com\nbad..com,beta.io\n"},
		{"ABareQuote", "domain,ref\nacme.com,1\nbad\"quote.com,2\n"},
		{"AnEmptyDomainField", "domain,ref\n,r1\nacme.com,r2\n"},
		{"ALineOf70KB", "acme.com\n" + strings.Repeat("a", 70<<10) + ".com\n"},
		{"AQuoteNeverClosed", "domain,ref\nacme.com,1\n\"never.com,2\nbeta.io,3\n"},
		{"ARecordOf70KB", "domain,ref\nacme.com," + strings.Repeat("r", 70<<10) + "\nbad..com,2\n"},
		{"NoDomainColumn", "website,ref\nacme.com,1\n"},
		{"ControlAndBrokenBytes", "acme.com\nac\x00me.com\n\xff\xfe.com\n"},
		{"ABOMCommentsAndCRLF", "\ufeffDomain,Ref\r\nacme.com,1\r\n\r\nlocalhost,2\r\n"},
		{"AOneColumnHeaderIsARow", "\ufeffdomain\nacme.com\n# note\n\n  localhost  \n"},
		{"DuplicatesAndAnAddress", "domain,ref\nacme.com,1\nACME.com,2\nhttps://acme.com/x,3\n10.0.0.1,4\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(dir, tc.name)
			require.NoError(t, os.WriteFile(file, []byte(tc.body), 0o600))
			_, _, server := e.cli(context.Background(), "", env, "submit", "--list", "--file", file)
			code, _, local := e.cli(context.Background(), "", env, "submit", "--file", file)
			require.Equal(t, 1, code, "every file has a row no job may take, or is refused: %s", local)
			if m := accepted.FindStringSubmatch(server); m != nil {
				require.Equal(t, rowLines(server), rowLines(local), "the rows the server rejects, and why")
				require.Contains(t, local, "\ndomainclass: "+m[2]+" of "+m[1]+" domains cannot be classified")
				return
			}
			require.Regexp(t, refused, server)
			require.Equal(t, "domainclass: "+refused.ReplaceAllString(server, ""), local, "the server's refusal")
		})
	}
	require.Zero(t, e.count("classify_job"), "nothing was sent as jobs")
}

// rowLines are the lines of out that name a row.
func rowLines(out string) []string {
	var rows []string
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, "  row ") {
			rows = append(rows, line)
		}
	}
	return rows
}
