package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxProductFuncLines: a product function fits a screen (docs/design.md, "Package map").
const maxProductFuncLines = 80

// TestNoProductFunctionIsLongerThanAScreen checks every function of the product's
// non-test files (everything but the harness wings and the harness commands).
func TestNoProductFunctionIsLongerThanAScreen(t *testing.T) {
	root := "../.."
	skip := append(append([]string{"hack/", "deploy/", "bench/", "internal/layout"}, harness...), harnessCommands...)
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if _, skipped := hasPrefix(rel, skip); skipped || strings.HasPrefix(rel, ".") && rel != "." {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() || !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			if fd, ok := decl.(*ast.FuncDecl); ok && fd.Body != nil {
				if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > maxProductFuncLines {
					t.Errorf("%s: %s is %d lines (at most %d): split it into named steps", rel, fd.Name.Name, n, maxProductFuncLines)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
