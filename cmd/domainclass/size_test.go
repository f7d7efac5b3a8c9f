package main

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	pathpkg "path"
	"path/filepath"
	"strings"
	"testing"
)

// The sizes issue 38 holds the code to: past them a function stops
// reading top to bottom and a file stops being about one thing.
const (
	maxFuncLines = 80
	maxFileLines = 450
	// maxCmdLines bounds cmd/domainclass's non-test Go files together:
	// the binary wires the packages and holds no policy of its own, which
	// lives with its concern (issue 38).
	maxCmdLines = 1200
)

// TestSourceSize keeps every function of the module's non-test Go files
// within maxFuncLines (from its func line to its closing brace), every
// such file within maxFileLines, and cmd/domainclass's within maxCmdLines
// together. It walks the tree as TestArchitecture
// does, leaving out internal/openapiclient, which is generated.
func TestSourceSize(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	files, funcs, cmdLines := 0, 0, 0
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(repoRoot, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			return skipDir(path, rel, d.Name())
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		n := bytes.Count(src, []byte("\n"))
		if n > maxFileLines {
			t.Errorf("%s is %d lines (limit %d)", rel, n, maxFileLines)
		}
		if pathpkg.Dir(rel) == "cmd/domainclass" {
			cmdLines += n
		}
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok {
				continue
			}
			funcs++
			start, end := fset.Position(fn.Pos()), fset.Position(fn.End())
			if n := end.Line - start.Line + 1; n > maxFuncLines {
				t.Errorf("%s:%d func %s is %d lines (limit %d)", rel, start.Line, funcName(fn), n, maxFuncLines)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 || funcs < 500 || cmdLines == 0 {
		t.Fatalf("%d files, %d functions and %d lines of cmd/domainclass read: the walk is broken", files, funcs, cmdLines)
	}
	if cmdLines > maxCmdLines {
		t.Errorf("cmd/domainclass's non-test Go files are %d lines (limit %d): move policy to the package of its concern", cmdLines, maxCmdLines)
	}
}

// skipDir says whether the walk leaves out the directory at path: hidden
// and underscore directories, testdata, node_modules, vendor, another
// module, and the generated client.
func skipDir(path, rel, name string) error {
	if rel == "." {
		return nil
	}
	if strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") ||
		name == "testdata" || name == "node_modules" || name == "vendor" ||
		rel == "internal/openapiclient" {
		return filepath.SkipDir
	}
	if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
		return filepath.SkipDir // another module
	}
	return nil
}

// funcName names fn as a reader finds it: Recv.Name for a method.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	typ := fn.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	switch x := typ.(type) {
	case *ast.IndexExpr:
		typ = x.X
	case *ast.IndexListExpr:
		typ = x.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}
