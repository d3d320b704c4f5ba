package runner

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// badCases lists testdata/bad/*.yaml; each has NN-name.err with the exact
// message and may have NN-name.args (see readArgs).
func badCases(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < 30 {
		t.Fatalf("%d malformed specs in %s, want at least 30", len(names), dir)
	}
	for i, n := range names {
		names[i] = strings.TrimSuffix(filepath.Base(n), ".yaml")
	}
	return names
}

// TestBadSpecs loads every malformed spec from inside testdata/bad, so
// that messages name the file as a user in that directory would see it.
func TestBadSpecs(t *testing.T) {
	names := badCases(t, "testdata/bad")
	t.Chdir("testdata/bad")
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			opts := readArgs(t, name+".args")
			_, err := LoadSpec(name+".yaml", opts)
			if err == nil {
				t.Fatal("loaded without error")
			}
			var se *SpecError
			if !errors.As(err, &se) || !se.BadInput() {
				t.Fatalf("error %T is not a *SpecError: %v", err, err)
			}
			if se.Set == "" && (se.Line < 1 || se.Column < 1) {
				t.Errorf("no line:column in %q", err)
			}
			if se.Set == "" && !strings.HasPrefix(err.Error(), name+".yaml:") {
				t.Errorf("message does not start with the file name: %q", err)
			}
			got := err.Error() + "\n"
			if *update {
				os.WriteFile(name+".err", []byte(got), 0o644)
				return
			}
			want, rerr := os.ReadFile(name + ".err")
			if rerr != nil {
				t.Fatal(rerr)
			}
			if got != string(want) {
				t.Errorf("message\n got %q\nwant %q", got, want)
			}
		})
	}
}
