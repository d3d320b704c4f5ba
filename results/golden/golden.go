// Package golden compares what a test rendered with a file under its
// package's testdata/ directory: the one golden-file helper of the
// module's tests.
//
// `go test ./PKG -update` rewrites the files instead of comparing. The
// flag is registered here, so a test package importing golden must not
// register its own -update.
package golden

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/ with the current output")

// pkgDir is the test's package directory: go test starts the test binary
// there, and this is read before any test can move elsewhere (t.Chdir).
var pkgDir, _ = os.Getwd()

// Update reports whether -update was given, for tests that keep other
// files up to date with it.
func Update() bool { return *update }

// Check compares got with testdata/name of the package under test. With
// -update it writes got there (creating directories); otherwise a
// mismatch leaves testdata/name.got beside it to diff against.
func Check[T ~string | ~[]byte](t testing.TB, name string, got T) {
	t.Helper()
	rel := filepath.Join("testdata", name)
	path := filepath.Join(pkgDir, rel)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test %s -update creates it)", err, pkgArg())
	}
	if !bytes.Equal([]byte(got), want) {
		os.WriteFile(path+".got", []byte(got), 0o644)
		t.Errorf("%s differs from the golden file; see %s.got (go test %s -update accepts it)", rel, rel, pkgArg())
	}
}

// pkgArg names the package under test as go test takes it from the
// module's root: ./runner.
func pkgArg() string {
	for dir := pkgDir; ; {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if rel, err := filepath.Rel(dir, pkgDir); err == nil {
				return "./" + filepath.ToSlash(rel)
			}
			break
		}
		up := filepath.Dir(dir)
		if up == dir {
			break
		}
		dir = up
	}
	return "."
}
