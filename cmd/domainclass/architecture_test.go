package main

import (
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestArchitecture keeps docs/architecture.md's map of the code true to
// the tree: the package table of "Packages and the rules between them"
// names every package of the module and no other, and every file and test
// that "Where to change what" names exists. It reads the directories, not
// `go list`, so it needs no go tool.
func TestArchitecture(t *testing.T) {
	t.Parallel()
	doc := readDoc(t, "docs/architecture.md")
	pkgs, tests := moduleTree(t)

	t.Run("packages", func(t *testing.T) {
		t.Parallel()
		named := map[string]bool{}
		for _, row := range tableRows(t, doc, "Packages and the rules between them") {
			for _, name := range backticked(row[0]) {
				named[name] = true
			}
		}
		for _, p := range pkgs {
			if !named[p] {
				t.Errorf("package %s is missing from docs/architecture.md's package table (\"Packages and the rules between them\"): add a row saying what it owns and imports", p)
			}
		}
		for name := range named {
			if !slices.Contains(pkgs, name) {
				t.Errorf("docs/architecture.md's package table names %s, which is no package of the module: remove or rename its row", name)
			}
		}
	})

	t.Run("whereToChangeWhat", func(t *testing.T) {
		t.Parallel()
		rows := tableRows(t, doc, "Where to change what")
		if len(rows) < 5 {
			t.Fatalf("docs/architecture.md's \"Where to change what\" has %d rows, want the five commonest changes", len(rows))
		}
		paths, names := 0, 0
		for _, row := range rows {
			for _, cell := range row[1:] {
				for _, s := range backticked(cell) {
					switch {
					case testName.MatchString(s):
						names++
						if !tests[s] {
							t.Errorf("docs/architecture.md, \"Where to change what\" (%s): no test is named %s", row[0], s)
						}
					case isRepoPath(s):
						paths++
						pattern := filepath.Join(repoRoot, filepath.FromSlash(placeholder.ReplaceAllString(s, "*")))
						matches, err := filepath.Glob(pattern)
						if err != nil {
							t.Fatal(err)
						}
						if len(matches) == 0 {
							t.Errorf("docs/architecture.md, \"Where to change what\" (%s): %s does not exist", row[0], s)
						}
					}
				}
			}
		}
		if paths < 20 || names < 5 {
			t.Fatalf("%d paths and %d tests read in \"Where to change what\": the check is broken", paths, names)
		}
	})
}

var (
	testName    = regexp.MustCompile(`^Test[A-Z0-9]\w*$`)
	placeholder = regexp.MustCompile(`<[a-z_]+>`) // evals/<name>.csv: any file of that shape
)

// isRepoPath reports whether a backticked span names a file or directory
// of the repository (httpapi/server.go, wire/), not a route, a command or
// an identifier.
func isRepoPath(s string) bool {
	return strings.Contains(s, "/") && !strings.ContainsAny(s, " ()") && !strings.HasPrefix(s, "/")
}

// tableRows returns the cells of the table rows under heading "## name"
// of doc (the header row and its separator left out).
func tableRows(t *testing.T, doc, name string) [][]string {
	t.Helper()
	var rows [][]string
	in, found := false, false
	for line := range strings.SplitSeq(doc, "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
			in = line == "## "+name
			found = found || in
		case in && strings.HasPrefix(line, "|"):
			cells := strings.Split(strings.Trim(line, "|"), "|")
			if strings.HasPrefix(cells[0], "---") || len(rows) == 0 && !strings.Contains(line, "`") {
				continue // the header and its separator
			}
			for i := range cells {
				cells[i] = strings.TrimSpace(cells[i])
			}
			rows = append(rows, cells)
		}
	}
	if !found || len(rows) == 0 {
		t.Fatalf("docs/architecture.md has no table under \"## %s\"", name)
	}
	return rows
}

// moduleTree walks the module as the go tool does (leaving out testdata,
// node_modules and hidden directories) and returns its packages, as paths
// from the module's root (a directory with Go files, tests alone count),
// and the names of the tests declared in it.
func moduleTree(t *testing.T) (pkgs []string, tests map[string]bool) {
	t.Helper()
	tests = map[string]bool{}
	decl := regexp.MustCompile(`(?m)^func (Test\w+)\(`)
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			if strings.HasSuffix(path, "_test.go") {
				b, err := os.ReadFile(path)
				if err != nil {
					return err
				}
				for _, m := range decl.FindAllStringSubmatch(string(b), -1) {
					tests[m[1]] = true
				}
			}
			return nil
		}
		if name := d.Name(); path != repoRoot && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "node_modules" || name == "testdata") {
			return filepath.SkipDir
		}
		if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && path != repoRoot {
			return filepath.SkipDir // another module
		}
		if _, err := build.ImportDir(path, 0); err != nil {
			return nil // no Go files here
		}
		rel, err := filepath.Rel(repoRoot, path)
		if err != nil {
			return err
		}
		pkgs = append(pkgs, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 10 || len(tests) < 50 {
		t.Fatalf("%d packages and %d tests read: the walk is broken", len(pkgs), len(tests))
	}
	return pkgs, tests
}
