package openapiclient_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/db/dbtest"
)

// TestGenerated runs the pinned oapi-codegen (a tool of go.mod) as
// doc.go's go:generate line does, and as a caller would.
func TestGenerated(t *testing.T) {
	t.Parallel()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^//go:generate go tool oapi-codegen (.*) -o client\.gen\.go (\S+)$`).FindSubmatch(doc)
	require.NotNil(t, m, "doc.go has a go:generate line running oapi-codegen into client.gen.go")
	flags, document := strings.Fields(string(m[1])), string(m[2])
	generate := func(t *testing.T, out string, flags ...string) {
		t.Helper()
		args := append(append([]string{"tool", "oapi-codegen"}, flags...), "-o", out, document)
		b, err := dbtest.RunTool(exec.Command(gobin, args...), dbtest.BudgetTool)
		require.NoError(t, err, "go %s\n%s", strings.Join(args, " "), b)
	}

	t.Run("TheCommittedClientIsTheDocuments", func(t *testing.T) {
		t.Parallel()
		out := filepath.Join(t.TempDir(), "client.gen.go")
		generate(t, out, flags...)
		got, err := os.ReadFile(out)
		require.NoError(t, err)
		committed, err := os.ReadFile("client.gen.go")
		require.NoError(t, err)
		require.True(t, bytes.Equal(got, committed),
			"client.gen.go is not what oapi-codegen makes of the OpenAPI document now: run `go generate ./internal/openapiclient` and commit it")
	})

	// The shortest command a caller would try, with oapi-codegen's
	// default pruning (which drops ListRow, and any schema only a
	// `webhooks` entry uses), compiles too.
	t.Run("ThePlainCommandCompiles", func(t *testing.T) {
		t.Parallel()
		out := filepath.Join(t.TempDir(), "client.gen.go")
		generate(t, out, "-generate", "types,client", "-package", "domainclass")
		// Build it as a package of this module, from where it lies: an
		// overlay puts it in place without writing into the source tree.
		here, err := os.Getwd()
		require.NoError(t, err)
		overlay, err := json.Marshal(map[string]map[string]string{
			"Replace": {filepath.Join(here, "plain", "client.gen.go"): out}})
		require.NoError(t, err)
		overlayFile := filepath.Join(t.TempDir(), "overlay.json")
		require.NoError(t, os.WriteFile(overlayFile, overlay, 0o600))
		b, err := dbtest.RunTool(exec.Command(gobin, "build", "-overlay", overlayFile, "./plain"), dbtest.BudgetTool)
		require.NoError(t, err, "the client of `oapi-codegen -generate types,client` compiles\n%s", b)
	})
}
