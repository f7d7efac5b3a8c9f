package httpapi_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/db/dbtest"
)

// npmTool is a dev tool of scripts/npm/package.json, installed by `go tool
// task npm` (which `go tool task test` runs first).
func npmTool(t *testing.T, name string) string {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("..", "scripts", "npm", "node_modules", ".bin", name))
	require.NoError(t, err)
	if _, err := os.Stat(path); err != nil {
		t.Skipf("%s is not installed: `go tool task npm` installs it (it needs Node.js 20.19+ or 22.12+ and npm)", name)
	}
	return path
}

// npmEnv keeps the npm tools from calling home: the machines that run the
// suite reach no such address, and a test must not wait on one.
var npmEnv = append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true", "NO_UPDATE_NOTIFIER=1")

// Redocly CLI lints the document with the rules of redocly.yaml, every one
// of them an error: a clean lint has no warning either. The places a rule
// cannot hold are in .redocly.lint-ignore.yaml, each with its reason.
func TestOpenAPI_Lint(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(npmTool(t, "redocly"), "lint", "--config", "redocly.yaml", "openapi.yaml")
	cmd.Env = npmEnv
	out, err := dbtest.RunTool(cmd, dbtest.BudgetTool)
	require.NoError(t, err, "redocly lint (go tool task lint):\n%s", out)
	require.Contains(t, string(out), "Your API description is valid")
	require.NotRegexp(t, regexp.MustCompile(`You have \d+ warning`), string(out))
}

// openapi-typescript, the usual generator of TypeScript types from an
// OpenAPI document, makes types of it that tsc accepts in strict mode and
// that name the shapes a caller uses (docs/api.md, "Generate a client"),
// and openapi-fetch calls the API with them as docs/api.md shows.
func TestOpenAPI_TypeScript(t *testing.T) {
	t.Parallel()
	generator, tsc := npmTool(t, "openapi-typescript"), npmTool(t, "tsc")
	document, err := filepath.Abs("openapi.yaml")
	require.NoError(t, err)
	dir := t.TempDir() // not here: openapi-typescript would lint by this directory's redocly.yaml, without its exceptions
	generate := exec.Command(generator, document, "-o", "domainclass.d.ts")
	generate.Dir, generate.Env = dir, npmEnv
	out, err := dbtest.RunTool(generate, dbtest.BudgetTool)
	require.NoError(t, err, "openapi-typescript:\n%s", out)

	usage := `import type { components, paths } from "./domainclass";

type Accepted = paths["/domains/classify"]["post"]["responses"][202]["content"]["application/json"];
type Problem = components["schemas"]["Problem"];
type ListRow = components["schemas"]["ListRow"];
type ListReport = paths["/lists/{list_id}"]["get"]["responses"][200]["content"]["application/json"];

export const accepted: Accepted = {
  job_id: "01a226aa-5f28-7580-b7fa-b2964af28226", status: "PENDING",
  status_url: "/domains/classify/01a226aa-5f28-7580-b7fa-b2964af28226", classifier: "cpg",
  domains: [{ input: "https://www.Example.com/about", domain: "example.com" }],
};
export const problem: Problem = { type: "/problems/invalid-domains", title: "Invalid domains", status: 422,
  errors: [{ input: "10.0.0.1", reason: "is an IP address, not a domain" }] };
export const row: ListRow = { row: 1, input: "acme.io", status: "COMPLETED", answer: true, is_cpg: true, confidence: 4, source: "llm" };
// A second classifier's row: its own answer field beside answer.
export const b2b: ListRow = { row: 2, input: "tool.io", status: "COMPLETED", answer: false, is_b2b_software: false, confidence: 3 };
export const yes = (r: ListRow): boolean | undefined => r.answer;
export const done = (l: ListReport): boolean => l.status === "COMPLETED" && l.completed_at !== null;
export const job: components["schemas"]["JobReport"]["status"] = "RUNNING";
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "usage.ts"), []byte(usage), 0o600))
	// The openapi-fetch snippet of docs/api.md ("Generate a client"), as it
	// is there: its bodySerializer and parseAs must type-check against the
	// generated paths (issue 36: the document's readers missed both).
	doc, err := os.ReadFile(filepath.Join("..", "docs", "api.md"))
	require.NoError(t, err)
	snippet := regexp.MustCompile("(?s)```ts\n(import createClient from \"openapi-fetch\";.*?)```").FindSubmatch(doc)
	require.NotNil(t, snippet, "docs/api.md has an openapi-fetch snippet in a ts block")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "client.ts"), snippet[1], 0o600))
	modules, err := filepath.Abs(filepath.Join("..", "scripts", "npm", "node_modules"))
	require.NoError(t, err)
	require.NoError(t, os.Symlink(modules, filepath.Join(dir, "node_modules"))) // where client.ts finds openapi-fetch
	check := exec.Command(tsc, "--noEmit", "--strict", "--skipLibCheck", "false", "--target", "es2022", "--lib", "es2022,dom",
		"--module", "esnext", "--moduleResolution", "bundler", "domainclass.d.ts", "usage.ts", "client.ts")
	check.Dir, check.Env = dir, npmEnv
	out, err = dbtest.RunTool(check, dbtest.BudgetTool)
	require.NoError(t, err, "tsc --strict on the generated types and a caller's use of them:\n%s", out)
}
