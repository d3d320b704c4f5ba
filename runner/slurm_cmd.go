package runner

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
)

// Commander runs the Slurm client commands xrun uses (sbatch, squeue,
// scontrol, scancel) and returns what they wrote on stdout. The Slurm
// executor runs every external command through one, so that tests fake a
// whole cluster with their own.
type Commander interface {
	// Run runs name with args, stdin as its standard input (none when
	// nil). A command that fails returns a *CommandError.
	Run(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, error)
}

// ExecCommander runs the real commands, found on the PATH of this process,
// with Env as their environment (nil: this process's). sbatch hands that
// environment to the tasks (its default --export=ALL), so what the workers
// need (XRUN_CACHE_DIR, ...) travels with it.
type ExecCommander struct {
	Env []string
}

func (e ExecCommander) Run(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = e.Env
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), &CommandError{Command: name + " " + strings.Join(args, " "), Stderr: stderr.String(), Err: err}
	}
	return stdout.Bytes(), nil
}

// CommandError is a Slurm command that failed. Its message is the
// command's own stderr, verbatim: Slurm's words are what a user searches
// for and what their admins recognise.
type CommandError struct {
	Command string // the command line
	Stderr  string
	Err     error // how it ended: an exit status, or why it did not start
}

func (e *CommandError) Error() string {
	if msg := strings.TrimSpace(e.Stderr); msg != "" {
		return msg
	}
	var ee *exec.ExitError
	if errors.As(e.Err, &ee) {
		return e.Command + ": " + e.Err.Error() + " (and nothing on stderr)"
	}
	return e.Command + ": " + e.Err.Error()
}

func (e *CommandError) Unwrap() error { return e.Err }
