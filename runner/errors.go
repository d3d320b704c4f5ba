package runner

import "errors"

// ErrCellsFailed is returned (wrapped) by a run in which at least one cell
// failed while the study itself completed.
var ErrCellsFailed = errors.New("some cells failed")

// ErrInterrupted is returned (wrapped) when a run stopped on SIGINT/SIGTERM.
var ErrInterrupted = errors.New("interrupted")
