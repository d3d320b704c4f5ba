package main

import (
	"bytes"
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/xrun-dev/xrun/runner"
)

type planOptions struct {
	json     bool
	commands bool
	sets     []string
	maxCells int
}

func newPlanCommand(a *app) *cobra.Command {
	opts := &planOptions{}
	c := &cobra.Command{
		Use:   "plan FILE",
		Short: "Expand a study into its cells and show them without running anything",
		Long: `Decode and validate a study spec, expand its matrix and print the plan: every
cell's id and the parameters that vary, the combinations excluded or collapsed
(and why), the datasets the cells need, and the total requests and tokens.
Nothing is run and nothing is written but the plan on stdout. The same spec
and flags always print the same bytes.

--commands prints instead, cell by cell, every command a run will start for
cells of external engines (engine: trtllm, engine: command): the checkpoint
conversion and engine build, the benchmark of each repeat, the profiled pass
and its post-processing, with the paths the run will use.

--set PATH=VALUE overrides any part of the spec (VALUE is YAML), with the
same validation as the file:
  xrun plan study.yaml --set matrix.batch_size=[8,16] --set params.dataset.num_requests=100`,
		Example: `  xrun plan experiments/gemm.yaml
  xrun plan experiments/gemm.yaml --json | jq '.cells[].id'
  xrun plan experiments/trtllm-gemm.yaml --commands`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runPlan(cmd.Context(), a, opts, args) },
	}
	f := c.Flags()
	f.BoolVar(&opts.json, "json", false, "print the plan as JSON (every cell's id, hash and parameters)")
	f.BoolVar(&opts.commands, "commands", false, "print the commands each cell of an external engine will run")
	f.StringArrayVar(&opts.sets, "set", nil, "override a spec value: PATH=VALUE, VALUE in YAML (repeatable)")
	f.IntVar(&opts.maxCells, "max-cells", runner.DefaultMaxCells, "refuse studies with more cells than this")
	return c
}

func runPlan(_ context.Context, a *app, opts *planOptions, args []string) error {
	if opts.maxCells < 1 {
		return usageError{fmt.Errorf("--max-cells: expected an integer >= 1, got %d", opts.maxCells)}
	}
	if opts.json && opts.commands {
		return usageError{fmt.Errorf("--commands and --json: give one (the JSON plan has no commands)")}
	}
	spec, err := runner.LoadSpec(args[0], runner.LoadOptions{Sets: opts.sets, MaxCells: opts.maxCells})
	if err != nil {
		return err
	}
	// Render fully before writing, so that a failure never leaves half a plan.
	var buf bytes.Buffer
	switch {
	case opts.commands:
		var cache string
		if cache, err = runner.DatasetCacheDir(a.gs.Getenv); err != nil {
			return err
		}
		err = spec.Plan.WriteCommands(&buf, runner.CommandsOptions{CacheDir: cache})
	case opts.json:
		err = spec.Plan.WriteJSON(&buf)
	default:
		err = spec.Plan.WriteText(&buf)
	}
	if err != nil {
		return err
	}
	_, err = a.gs.Stdout.Write(buf.Bytes())
	return err
}
