package driver

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func sh(script string) Command {
	return Command{Stage: StageBench, Argv: []string{"sh", "-c", script}}
}

func TestExecSuccessLogsAndAudits(t *testing.T) {
	dir := t.TempDir()
	var log strings.Builder
	var out strings.Builder
	audit := &Audit{Path: filepath.Join(dir, "commands.jsonl")}
	c := sh("echo to-stdout; echo to-stderr >&2")
	c.Env = []string{"XRUN_T=1"}
	if err := Exec(context.Background(), c, ExecOptions{Log: &log, Stdout: &out, Audit: audit, Pass: 3}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "to-stdout") || !strings.Contains(log.String(), "to-stderr") {
		t.Errorf("log %q lacks one of the streams", log.String())
	}
	if out.String() != "to-stdout\n" {
		t.Errorf("stdout %q", out.String())
	}
	b, err := os.ReadFile(audit.Path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"stage":"bench"`, `"pass":3`, `"status":0`, `"shell":"XRUN_T=1 sh -c`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("audit line %s lacks %s", b, want)
		}
	}
}

func TestExecFailureCarriesTheToolsMessage(t *testing.T) {
	for _, tc := range []struct {
		name, script, wantTail, wantReason string
		status                             int
	}{
		{"python traceback", `echo "Traceback (most recent call last):" >&2; echo '  File "x.py", line 3, in <module>' >&2; echo "RuntimeError: Executor failed: bad mMaxNumTokens" >&2; exit 1`,
			"RuntimeError: Executor failed: bad mMaxNumTokens", "", 1},
		{"gpu oom", `echo "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB." >&2; exit 1`,
			"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.", "out of GPU memory", 1},
		{"plain last line", `echo working; echo done-badly; exit 3`, "done-badly", "", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Exec(context.Background(), sh(tc.script), ExecOptions{LogPath: "cells/x/tool/pass-0/output.log"})
			var te *ToolError
			if !errors.As(err, &te) {
				t.Fatalf("got %v, want a *ToolError", err)
			}
			if te.Status != tc.status || te.Tail != tc.wantTail || te.Reason != tc.wantReason {
				t.Errorf("status %d tail %q reason %q; want %d %q %q", te.Status, te.Tail, te.Reason, tc.status, tc.wantTail, tc.wantReason)
			}
			msg := err.Error()
			for _, want := range []string{"sh (bench)", tc.wantTail, "[full output: cells/x/tool/pass-0/output.log]"} {
				if !strings.Contains(msg, want) {
					t.Errorf("message %q lacks %q", msg, want)
				}
			}
		})
	}
}

func TestExecNotFound(t *testing.T) {
	err := Exec(context.Background(), Command{Stage: StageVersion, Argv: []string{"xrun-no-such-tool-anywhere"}}, ExecOptions{})
	var te *ToolError
	if !errors.As(err, &te) || te.Reason != "not found" {
		t.Fatalf("got %v, want not found", err)
	}
	if want := "xrun-no-such-tool-anywhere (version): xrun-no-such-tool-anywhere: not found"; err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
}

// TestExecCancelKillsTheGroup starts a tool that ignores SIGTERM and
// leaves a child behind; cancelling must kill both.
func TestExecCancelKillsTheGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	script := `trap "" TERM; sleep 300 & echo $! > ` + pidFile + `; wait`
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Exec(ctx, sh(script), ExecOptions{Grace: 200 * time.Millisecond}) }()
	var pid int
	for i := 0; i < 200 && pid == 0; i++ {
		time.Sleep(10 * time.Millisecond)
		if b, err := os.ReadFile(pidFile); err == nil && strings.TrimSpace(string(b)) != "" {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
	}
	if pid == 0 {
		t.Fatal("the tool never started its child")
	}
	cancel()
	select {
	case err := <-done:
		var te *ToolError
		if !errors.As(err, &te) || te.Reason != "stopped" {
			t.Errorf("got %v, want a stopped tool", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Exec did not return after the cancel")
	}
	// The child may take a moment to be reaped by init.
	for i := 0; i < 100; i++ {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("the tool's child %d outlived the cancel", pid)
}

func TestDiagnose(t *testing.T) {
	tail, reason := Diagnose([]byte("\x1b[31mERROR\x1b[0m: Report 'x' could not be found.\n\n"))
	if tail != "ERROR: Report 'x' could not be found." || reason != "" {
		t.Errorf("got %q %q", tail, reason)
	}
	if tail, reason = Diagnose([]byte("Killed\n")); reason != "out of host memory" || tail != "Killed" {
		t.Errorf("got %q %q", tail, reason)
	}
	if tail, _ = Diagnose(nil); tail != "" {
		t.Errorf("empty output gave %q", tail)
	}
}

func TestShellQuote(t *testing.T) {
	c := Command{Argv: []string{"python3", "-c", "print('x')", "a b", ""}, Env: []string{"A=1 2"}, Dir: "/tmp/x y"}
	want := `cd '/tmp/x y' && A='1 2' python3 -c 'print('\''x'\'')' 'a b' ''`
	if got := c.String(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
