package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// cliResult is what one in-process run of the CLI produced.
type cliResult struct {
	code   int
	stdout string
	stderr string
}

// runCLI runs xrun in-process with injected stdio and environment, the way
// every CLI test does. env entries are "KEY=VALUE".
func runCLI(t *testing.T, env []string, args ...string) cliResult {
	t.Helper()
	return runCLIExe(t, "xrun-test-binary-not-available", env, args...)
}

// runCLIExe is runCLI with exe as the binary xrun re-executes (workers,
// device probes).
func runCLIExe(t *testing.T, exe string, env []string, args ...string) cliResult {
	t.Helper()
	var stdout, stderr bytes.Buffer
	envMap := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		envMap[k] = v
	}
	gs := &globalState{
		Stdin:      strings.NewReader(""),
		Stdout:     &stdout,
		Stderr:     &stderr,
		Getenv:     func(k string) string { return envMap[k] },
		Environ:    func() []string { return append([]string(nil), env...) },
		Executable: exe,
	}
	code := run(context.Background(), gs, args)
	return cliResult{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

func TestVersion(t *testing.T) {
	r := runCLI(t, nil, "version")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	for _, want := range []string{"xrun ", "commit:", "go:", "cuda:"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("version output lacks %q:\n%s", want, r.stdout)
		}
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	for _, args := range [][]string{
		{"version", "extra"},
		{"version", "--no-such-flag"},
		{"--log-level", "loud", "version"},
		{"--log-format", "xml", "version"},
	} {
		r := runCLI(t, nil, args...)
		if r.code != exitBadInput {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, r.code, r.stderr)
		}
		if r.stdout != "" {
			t.Errorf("%v: wrote to stdout: %q", args, r.stdout)
		}
	}
}

func TestHelpHasExitStatus(t *testing.T) {
	root, _ := newRootCommand(&globalState{})
	for _, c := range append(root.Commands(), root) {
		if c.Hidden || c.Name() == "help" {
			continue
		}
		if !strings.Contains(c.Long, "EXIT STATUS") {
			t.Errorf("%s --help has no EXIT STATUS section", c.Name())
		}
	}
}

func TestImplicitRun(t *testing.T) {
	root, _ := newRootCommand(&globalState{})
	cases := []struct{ in, want string }{
		{"study.yaml", "run study.yaml"},
		{"--log-level debug study.yaml --resume", "--log-level debug run study.yaml --resume"},
		{"version", "version"},
		{"help version", "help version"},
		{"--help", "--help"},
	}
	for _, c := range cases {
		got := strings.Join(implicitRun(root, strings.Fields(c.in)), " ")
		if got != c.want {
			t.Errorf("implicitRun(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestMissingRequiredFlagExit2(t *testing.T) {
	// cobra checks required flags after the pre-run hooks; that must still
	// count as bad usage (2), not as a run-time failure (1).
	var stderr bytes.Buffer
	gs := &globalState{Stdin: strings.NewReader(""), Stdout: &bytes.Buffer{}, Stderr: &stderr,
		Getenv: func(string) string { return "" }}
	root, a := newRootCommand(gs)
	ran := false
	child := &cobra.Command{Use: "needs-flag", RunE: func(*cobra.Command, []string) error { ran = true; return nil }}
	child.Flags().String("dir", "", "")
	if err := child.MarkFlagRequired("dir"); err != nil {
		t.Fatal(err)
	}
	holder := &cobra.Command{}
	holder.AddCommand(child)
	decorate(holder, a)
	root.AddCommand(child)
	root.SetArgs([]string{"needs-flag"})
	err := root.ExecuteContext(context.Background())
	if err != nil && !a.started {
		err = usageError{err}
	}
	if ran || exitCode(err) != exitBadInput {
		t.Fatalf("ran=%v exit %d (%v), want 2", ran, exitCode(err), err)
	}
}
