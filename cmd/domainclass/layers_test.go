package main

import (
	"go/build"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestLayers keeps the arrows between the packages pointing down
// (docs/architecture.md, "Packages and the rules between them"): the
// domain knows no HTTP, River or Postgres; the workers and the queries
// never import the server.
func TestLayers(t *testing.T) {
	t.Parallel()
	const mod = "github.com/domainclass/domainclass/"
	rules := []struct {
		dir       string
		forbidden []string
	}{
		{"classifier", []string{mod + "httpapi", mod + "jobs", mod + "db", mod + "wire", "github.com/riverqueue/", "github.com/jackc/pgx", "github.com/gin-gonic/"}},
		{"db", []string{mod + "httpapi", mod + "jobs", mod + "wire", "github.com/gin-gonic/"}},
		{"jobs", []string{mod + "httpapi", "github.com/gin-gonic/"}},
		// The callers' money: Postgres and the model's price, counted for
		// the workers, which it does not know.
		{"spend", []string{mod + "httpapi", mod + "jobs", mod + "wire", "github.com/riverqueue/", "github.com/gin-gonic/"}},
		// The account's leases and their metrics: llm's rules, db's queries.
		{"capacity", []string{mod + "httpapi", mod + "jobs", mod + "wire", "github.com/riverqueue/", "github.com/gin-gonic/"}},
		// The handlers call jobs' steps (AcceptJob, CancelList, …), which
		// alone know River's kinds, states and args.
		{"httpapi", []string{"github.com/riverqueue/"}},
		// The reader of list files, the server's and the CLI's: no HTTP,
		// nothing of either side.
		{"listfile", []string{mod + "httpapi", mod + "cli", mod + "jobs", mod + "cmd/", "net/http", "github.com/gin-gonic/",
			"github.com/riverqueue/", "github.com/jackc/pgx"}},
		// A list's admission is asked by the server and by jobs.AcceptList;
		// it knows neither, nor River.
		{"admission", []string{mod + "httpapi", mod + "jobs", mod + "cli", "github.com/riverqueue/", "github.com/gin-gonic/"}},
		{"wire", []string{mod + "httpapi", mod + "jobs", mod + "db", "github.com/riverqueue/", "github.com/jackc/pgx"}},
		// The commands reach the service only through what main wires.
		// and an API key's form is internal/apikey's, not the server's.
		{"cli", []string{mod + "cmd/", mod + "httpapi", "github.com/riverqueue/river/riverdriver", "github.com/jackc/pgx"}},
		// The callers' client speaks HTTP and the wire shapes only.
		// An API key's form: the standard library only, so that the server
		// and the CLI both may use it.
		{"internal/apikey", []string{"github.com/", "golang.org/"}}, // ours too: the module is github.com/…
		// The reader of the table of environment variables: the standard library.
		{"internal/envvar", []string{"github.com/", "golang.org/"}},
		// The logs: db's errors (an outage's), nothing of the service above.
		{"internal/logging", []string{mod + "httpapi", mod + "jobs", mod + "cli", mod + "cmd/", mod + "classifier", mod + "wire",
			"github.com/riverqueue/", "github.com/gin-gonic/"}},
		// The traces: OpenTelemetry's and its pgx and River instruments only.
		{"internal/tracing", []string{mod, "github.com/gin-gonic/"}},
		// The pools' sizes and metrics: pgx's pool and Prometheus only.
		{"db/pools", []string{mod, "github.com/riverqueue/", "github.com/gin-gonic/"}},
		{"client", []string{mod + "httpapi", mod + "jobs", mod + "db", "github.com/riverqueue/", "github.com/jackc/pgx", "github.com/gin-gonic/"}},
	}
	t.Run("NothingButMainImportsTheCLI", func(t *testing.T) {
		t.Parallel()
		dirs := 0
		err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return err
			}
			if name := d.Name(); path != repoRoot && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "testdata") {
				return filepath.SkipDir
			}
			pkg, err := build.ImportDir(path, 0)
			if err != nil {
				return nil // no Go files here
			}
			dirs++
			rel, _ := filepath.Rel(repoRoot, path)
			if slices.Contains(pkg.Imports, mod+"cli") && rel != filepath.Join("cmd", "domainclass") {
				t.Errorf("%s imports the CLI: only the binary's main may (docs/architecture.md)", rel)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if dirs < 10 {
			t.Fatalf("%d packages read: the check is broken", dirs)
		}
	})
	for _, r := range rules {
		pkg, err := build.ImportDir(filepath.Join(repoRoot, r.dir), 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(pkg.Imports) == 0 {
			t.Fatalf("%s: no imports read: the check is broken", r.dir)
		}
		for _, imp := range pkg.Imports {
			for _, f := range r.forbidden {
				if strings.HasPrefix(imp, f) {
					t.Errorf("%s imports %s: an arrow running back up (docs/architecture.md)", r.dir, imp)
				}
			}
		}
	}
}
