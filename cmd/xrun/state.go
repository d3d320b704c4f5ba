package main

import (
	"io"
	"os"

	"golang.org/x/term"
)

// globalState is everything a command may touch of the outside world. The
// real one wraps the process; tests build one over buffers and a fake
// environment (k6's GlobalState pattern).
type globalState struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Getenv reads the environment; tests inject a map.
	Getenv func(string) string
	// Environ lists the environment, for child processes.
	Environ func() []string
	// StderrIsTerminal decides console versus JSON logs and progress bars.
	StderrIsTerminal bool
	// StdoutIsTerminal decides whether tables may use terminal widths.
	StdoutIsTerminal bool
	// Executable is the path used to re-execute xrun as a worker.
	Executable string
}

func newOSState() *globalState {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	return &globalState{
		Stdin:            os.Stdin,
		Stdout:           os.Stdout,
		Stderr:           os.Stderr,
		Getenv:           os.Getenv,
		Environ:          os.Environ,
		StderrIsTerminal: term.IsTerminal(int(os.Stderr.Fd())),
		StdoutIsTerminal: term.IsTerminal(int(os.Stdout.Fd())),
		Executable:       exe,
	}
}
