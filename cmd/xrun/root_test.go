package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A mistyped command is told as one, with the command it was probably
// meant to be, instead of being run as a study file; a file of that name,
// or a word close to no command, is still a study file.
func TestMistypedCommand(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	spec := "name: s\nparams: {model: tiny-llama, engine: cpu}\n"
	if err := os.WriteFile(filepath.Join(dir, "s.yaml"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		code int
		want string // in stderr
	}{
		{[]string{"plna", "s.yaml"}, exitBadInput, `xrun: unknown command "plna"; did you mean "plan"?`},
		{[]string{"plna"}, exitBadInput, `unknown command "plna"; did you mean "plan"?`},
		{[]string{"--log-level", "error", "dif", "a", "b"}, exitBadInput, `unknown command "dif"; did you mean "diff"?`},
		{[]string{"verison"}, exitBadInput, `unknown command "verison"; did you mean "version"?`},
		{[]string{"Kernles", "d", "a", "b"}, exitBadInput, `unknown command "Kernles"; did you mean "kernels"?`},
		{[]string{"de"}, exitBadInput, `unknown command "de"; did you mean "devices"?`},
		{[]string{"d"}, exitBadInput, `unknown command "d"; did you mean "dataset", "devices" or "diff"?`},
		// Not close to a command: a study file that does not exist.
		{[]string{"quickstart.yaml"}, exitBadInput, "quickstart.yaml: cannot read the spec"},
		{[]string{"./plna"}, exitBadInput, "plna: cannot read the spec"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			r := runCLI(t, nil, c.args...)
			if r.code != c.code || !strings.Contains(r.stderr, c.want) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", r.code, r.stderr, c.code, c.want)
			}
			if r.stdout != "" {
				t.Errorf("stdout %q", r.stdout)
			}
		})
	}
	// An existing file named like a command's typo is a study file (this
	// one a bad spec, so that nothing runs).
	if err := os.WriteFile(filepath.Join(dir, "plna"), []byte("nme: s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, nil, "plna")
	if r.code != exitBadInput || !strings.Contains(r.stderr, `plna:1:1: nme: unknown key; did you mean "name"?`) {
		t.Errorf("an existing file was not run as a study: exit %d, stderr %q", r.code, r.stderr)
	}
}
