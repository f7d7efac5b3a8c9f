package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSurface keeps jobs' exported surface small (issue 38: at most 100
// names), as River keeps each of its packages': what only jobs uses stays
// unexported, and a concern of its own (spend, review metrics) lives in
// its own package. It counts the top-level exported names of the
// package's non-test files: types, functions, variables and constants
// (not methods or fields, which come with their type). Run with -v to
// see the count.
func TestSurface(t *testing.T) {
	t.Parallel()
	const maxJobs = 100
	names := exportedNames(t, filepath.Join(repoRoot, "jobs"))
	t.Logf("jobs exports %d top-level names", len(names))
	if len(names) > maxJobs {
		t.Errorf("jobs exports %d top-level names, more than %d: unexport what nothing outside jobs uses, or move a concern to a package of its own (docs/architecture.md):\n%s",
			len(names), maxJobs, strings.Join(names, "\n"))
	}
}

// exportedNames are the top-level exported names of the Go package in dir,
// test files left out, sorted.
func exportedNames(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var names []string
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			names = append(names, declNames(d)...)
		}
	}
	if len(names) < 10 {
		t.Fatalf("%d exported names read in %s: the check is broken", len(names), dir)
	}
	slices.Sort(names)
	return names
}

// declNames are the exported top-level names d declares.
func declNames(d ast.Decl) []string {
	var names []string
	switch d := d.(type) {
	case *ast.FuncDecl:
		if d.Recv == nil && d.Name.IsExported() {
			names = append(names, "func "+d.Name.Name)
		}
	case *ast.GenDecl:
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.TypeSpec:
				if s.Name.IsExported() {
					names = append(names, "type "+s.Name.Name)
				}
			case *ast.ValueSpec:
				for _, n := range s.Names {
					if n.IsExported() {
						names = append(names, d.Tok.String()+" "+n.Name)
					}
				}
			}
		}
	}
	return names
}
