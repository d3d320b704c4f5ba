package main

import (
	"context"
	"errors"

	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/runner"
)

// Exit statuses, as documented in every command's help.
const (
	exitOK          = 0
	exitCellsFailed = 1 // also any other runtime failure
	exitBadInput    = 2
	exitRegression  = 3
	exitNotCompared = 4
	exitInterrupted = 130
)

// badInput is implemented by every library error that blames the user's
// input (spec, dataset, results file, flags) rather than the run.
type badInput interface{ BadInput() bool }

// usageError marks command-line mistakes found by the CLI itself.
type usageError struct{ err error }

func (e usageError) Error() string  { return e.err.Error() }
func (e usageError) Unwrap() error  { return e.err }
func (e usageError) BadInput() bool { return true }

// exitCode is the one place that maps an outcome to an exit status.
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var bi badInput
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, runner.ErrInterrupted):
		return exitInterrupted
	case errors.As(err, &bi) && bi.BadInput():
		return exitBadInput
	case errors.Is(err, results.ErrRegression):
		return exitRegression
	case errors.Is(err, results.ErrNotCompared):
		return exitNotCompared
	default:
		return exitCellsFailed
	}
}

// exitStatusHelp is appended to every command's help text.
const exitStatusHelp = `
EXIT STATUS
  0    success
  1    some cells failed (or another runtime failure)
  2    bad usage, bad spec, bad dataset or results file; nothing was written
  3    diff found a significant regression beyond the threshold, or trend
       found one starting at the newest run
  4    diff or trend compared nothing, or the results cannot be compared
       (different studies), or cells ok in OLD are missing or skipped in NEW
       (diff --missing fail)
  130  interrupted (SIGINT/SIGTERM); everything measured so far is kept
`
