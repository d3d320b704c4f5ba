package main

import (
	"context"
	"errors"

	"github.com/spf13/cobra"

	"github.com/xrun-dev/xrun/runner"
)

type workerOptions struct {
	dir  string
	cell string
}

// newWorkerCommand is the hidden command xrun runs each cell with. It
// needs nothing but the results directory (whose .xrun/plan.json describes
// the cell) and the cell id, so a local child process and a Slurm array
// task on another host run exactly the same command line.
func newWorkerCommand(a *app) *cobra.Command {
	opts := &workerOptions{}
	c := &cobra.Command{
		Use:    "worker --dir DIR --cell ID",
		Short:  "Run one cell of a planned study (used by xrun run; not for people)",
		Long:   "Run one cell of the study whose results directory is DIR, as DIR/.xrun/plan.json\ndescribes it, and record it in DIR/cells/ID/cell.json.",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE:   func(cmd *cobra.Command, _ []string) error { return runWorker(cmd.Context(), a, opts) },
	}
	c.Flags().StringVar(&opts.dir, "dir", "", "the study's results directory")
	c.Flags().StringVar(&opts.cell, "cell", "", "the id of the cell to run")
	return c
}

func runWorker(ctx context.Context, a *app, opts *workerOptions) error {
	if opts.dir == "" || opts.cell == "" {
		return usageError{errors.New("worker: --dir and --cell are required")}
	}
	return runner.RunWorker(ctx, opts.dir, opts.cell, runner.WorkerOptions{Getenv: a.gs.Getenv})
}
