package runner

import (
	"context"
	"time"
)

// executor runs the cells a study has to run. The study loop around it is
// one and the same whatever runs the cells (Run: plan, datasets,
// results.json rewritten after every cell, the exit status); executors
// differ only in where cells run: child processes of this one on this
// host's GPUs (gpuScheduler), or the tasks of a Slurm job array
// (slurmExecutor).
type executor interface {
	// parallel says how many of the queued cells may run at once, for
	// the progress display.
	parallel(queue []*runCell) int
	// runCells runs the queue. It calls r.cellStarted when a cell starts
	// and r.cellFinished with its outcome when it ends, always from the
	// goroutine that called runCells, and returns when every cell has
	// finished, or once ctx is cancelled and nothing it started is still
	// running. An error means cells could not be run at all (a
	// submission the scheduler refused); outcomes already reported stand.
	runCells(ctx context.Context, queue []*runCell, r reporter) error
}

// reporter is what an executor tells the study as cells start and end.
type reporter interface {
	// cellStarted says a cell started; on says where (GPU UUIDs, a Slurm
	// task and its node), for the debug log.
	cellStarted(rc *runCell, on string)
	cellFinished(rc *runCell, o outcome)
	// cellHeld says a cell is not started: its first step would not
	// finish in the time left (left) before the time limit.
	cellHeld(rc *runCell, left time.Duration)
	// halted says no more cells are to start (their results could not be
	// written); those running finish.
	halted() bool
}

// cellStarted implements reporter.
func (s *study) cellStarted(rc *runCell, on string) {
	s.progress.CellStarted(rc.cell.ID)
	s.log.Debug().Str("cell", rc.cell.ID).Str("on", on).Msg("cell started")
}

// cellFinished implements reporter.
func (s *study) cellFinished(rc *runCell, o outcome) { s.record(rc, o) }
