package golden

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recorder stands in for the test that calls Check, recording its
// failures; Fatal stops Check as testing's does, by leaving it.
type recorder struct {
	testing.TB
	errs, fatals []string
}

var errFatal = errors.New("fatal")

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.fatals = append(r.fatals, fmt.Sprintf(format, args...))
	panic(errFatal)
}
func (r *recorder) Fatal(args ...any) {
	r.fatals = append(r.fatals, fmt.Sprint(args...))
	panic(errFatal)
}

// check runs Check against a package directory of its own.
func check[T ~string | ~[]byte](t *testing.T, dir string, upd bool, name string, got T) *recorder {
	t.Helper()
	oldDir, oldUpdate := pkgDir, *update
	pkgDir, *update = dir, upd
	defer func() { pkgDir, *update = oldDir, oldUpdate }()
	r := &recorder{}
	func() {
		defer func() {
			if p := recover(); p != nil && p != errFatal {
				panic(p)
			}
		}()
		Check(r, name, got)
	}()
	return r
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCheck(t *testing.T) {
	cases := []struct {
		name        string
		file        string // testdata/out.txt's content; "" for none
		got         string
		update      bool
		errs        []string // what the failures contain, in order
		fatal       string
		wantFile    string // testdata/out.txt afterwards
		wantGotFile string // testdata/out.txt.got afterwards; "" for none
	}{
		{name: "same", file: "a\n", got: "a\n", wantFile: "a\n"},
		{name: "differs", file: "a\n", got: "b\n", wantFile: "a\n", wantGotFile: "b\n",
			errs: []string{"testdata/out.txt differs from the golden file; see testdata/out.txt.got"}},
		{name: "missing", got: "b\n", fatal: "-update creates it"},
		{name: "update rewrites", file: "a\n", got: "b\n", update: true, wantFile: "b\n"},
		{name: "update creates", got: "b\n", update: true, wantFile: "b\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "testdata", "sub", "out.txt")
			if tc.file != "" {
				writeFile(t, path, tc.file)
			}
			r := check(t, dir, tc.update, "sub/out.txt", tc.got)
			if len(r.errs) != len(tc.errs) {
				t.Fatalf("errors %q, want %d", r.errs, len(tc.errs))
			}
			for i, e := range tc.errs {
				if !strings.Contains(r.errs[i], strings.ReplaceAll(e, "out.txt", "sub/out.txt")) {
					t.Errorf("error %q, want it to contain %q", r.errs[i], e)
				}
			}
			switch {
			case tc.fatal == "" && len(r.fatals) > 0:
				t.Errorf("fatal %q", r.fatals)
			case tc.fatal != "" && (len(r.fatals) != 1 || !strings.Contains(r.fatals[0], tc.fatal)):
				t.Errorf("fatal %q, want one containing %q", r.fatals, tc.fatal)
			}
			if b, _ := os.ReadFile(path); string(b) != tc.wantFile {
				t.Errorf("golden file %q, want %q", b, tc.wantFile)
			}
			b, err := os.ReadFile(path + ".got")
			if tc.wantGotFile == "" && err == nil {
				t.Errorf("a .got file was left: %q", b)
			}
			if tc.wantGotFile != "" && string(b) != tc.wantGotFile {
				t.Errorf(".got file %q (%v), want %q", b, err, tc.wantGotFile)
			}
		})
	}
}

// TestCheckBytes: []byte and string outputs compare alike.
func TestCheckBytes(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "testdata", "b"), "xy")
	if r := check(t, dir, false, "b", []byte("xy")); len(r.errs)+len(r.fatals) > 0 {
		t.Errorf("equal bytes reported: %q %q", r.errs, r.fatals)
	}
	if r := check(t, dir, false, "b", []byte("xz")); len(r.errs) != 1 {
		t.Errorf("different bytes: errors %q, want one", r.errs)
	}
}

// TestPkgArg: the hint names the package as go test takes it from the
// module's root, whatever directory the test has moved to since.
func TestPkgArg(t *testing.T) {
	if got := pkgArg(); got != "./results/golden" {
		t.Errorf("pkgArg() = %q, want ./results/golden", got)
	}
	t.Chdir(t.TempDir())
	if got := pkgArg(); got != "./results/golden" {
		t.Errorf("after t.Chdir: pkgArg() = %q, want ./results/golden", got)
	}
	old := pkgDir
	defer func() { pkgDir = old }()
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "go.mod"), "module m\n")
	pkgDir = filepath.Join(root, "a", "b")
	if got := pkgArg(); got != "./a/b" {
		t.Errorf("in another module: pkgArg() = %q, want ./a/b", got)
	}
}
