package profile

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/xrun-dev/xrun"

// packageImports lists what the package in dir imports, over all its
// non-test files whatever their build constraints (a cgo file counts as
// much as its stub).
func packageImports(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, name), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}

// TestProfileImports keeps this package below results and datasets: it
// returns its own types (PassSummary, TelemetrySummary, Roofline), which
// the runner converts to results.json's, and it knows nothing of a cell's
// record, so that results' schema and the runner's files change without
// it. It may use the leaves under results/ that hold no schema (layout,
// kernelname, numfmt, atomicfile). Nothing it imports, however
// indirectly, may import results; datasets may come in through the
// engine, whose requests it defines, but not directly.
func TestProfileImports(t *testing.T) {
	root := filepath.Join("..", "..")
	dirOf := func(pkg string) string {
		return filepath.Join(root, filepath.FromSlash(strings.TrimPrefix(pkg, module+"/")))
	}
	for _, p := range packageImports(t, ".") {
		switch {
		case p == module+"/datasets" || p == module+"/results":
			t.Errorf("engine/profile imports %s", p)
		case strings.HasPrefix(p, module+"/results/"):
			for _, q := range packageImports(t, dirOf(p)) {
				if strings.HasPrefix(q, module+"/") {
					t.Errorf("engine/profile imports %s, which is no leaf: it imports %s", p, q)
				}
			}
		}
	}
	// Every package of the module reachable from here, with the path
	// that reached it.
	via := map[string][]string{module + "/engine/profile": nil}
	queue := []string{module + "/engine/profile"}
	for len(queue) > 0 {
		pkg := queue[0]
		queue = queue[1:]
		for _, p := range packageImports(t, dirOf(pkg)) {
			if !strings.HasPrefix(p, module+"/") || via[p] != nil {
				continue
			}
			via[p] = append(slices.Clone(via[pkg]), pkg)
			if p == module+"/results" {
				t.Errorf("engine/profile depends on results through %s", strings.Join(via[p], " -> "))
				continue
			}
			queue = append(queue, p)
		}
	}
	if via[module+"/engine"] == nil {
		t.Error("the walk did not reach engine: are the module's directories where this test looks?")
	}
}
