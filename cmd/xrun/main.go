// Command xrun is the thin entry point of the experiment-matrix runner: it
// builds the process's global state, runs the command tree in-process and
// turns the outcome into an exit status. Everything it does is in functions
// that take a *globalState, so tests run the whole CLI without a process.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	gs := newOSState()
	// The first SIGINT/SIGTERM cancels the context so the command can stop
	// the cell in flight and keep what was measured; a second one kills.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	os.Exit(run(ctx, gs, os.Args[1:]))
}
