package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/xrun-dev/xrun/engine/cuda"
	"github.com/xrun-dev/xrun/runner"
)

type planOptions struct {
	json       bool
	commands   bool
	sets       []string
	maxCells   int
	gpu        string
	efficiency float64
	gpus       int
	results    string
	probe      string
	// estimateFlags are those of gpu, efficiency, gpus, results and probe
	// given.
	estimateFlags []string
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

Every cell gets an estimated run time on one GPU (--gpu, default H100):
its repeats, each a warm-up and a timed pass, the profiled pass and the
engine's start-up; and the study its total, and the time on --gpus GPUs
running cells in parallel. With --results DIR the cells measured there
(the same cell, else the most similar one) predict the time; the rest come
from the roofline at --efficiency. Cells on the cpu engine have none.

Every cell of xrun's own engine gets the GPU memory it needs (weights,
workspaces, and the KV cache of one request of the dataset's longest
length), and the cells that cannot fit are marked: against the GPUs of
this machine when it has any (--probe auto, the default, probes them
when a cell may run on a GPU, --gpu is not given and the NVIDIA driver's
/dev/nvidiactl exists, so a machine without GPUs is never probed; --probe
yes always, --probe no never), else against the --gpu kind. xrun run
refuses such cells before anything runs.

--set PATH=VALUE overrides any part of the spec (VALUE is YAML), with the
same validation as the file:
  xrun plan study.yaml --set matrix.batch_size=[8,16] --set params.dataset.num_requests=100`,
		Example: `  xrun plan experiments/gemm.yaml
  xrun plan experiments/nightly.yaml --gpu H200 --results results/nightly
  xrun plan experiments/gemm.yaml --json | jq '.cells[].id'
  xrun plan experiments/trtllm-gemm.yaml --commands`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, name := range []string{"gpu", "efficiency", "gpus", "results", "probe"} {
				if cmd.Flags().Changed(name) {
					opts.estimateFlags = append(opts.estimateFlags, name)
				}
			}
			return runPlan(cmd.Context(), a, opts, args)
		},
	}
	f := c.Flags()
	f.BoolVar(&opts.json, "json", false, "print the plan as JSON (every cell's id, hash and parameters)")
	f.BoolVar(&opts.commands, "commands", false, "print the commands each cell of an external engine will run")
	f.StringArrayVar(&opts.sets, "set", nil, "override a spec value: PATH=VALUE, VALUE in YAML (repeatable)")
	f.IntVar(&opts.maxCells, "max-cells", runner.DefaultMaxCells, "refuse studies with more cells than this")
	f.StringVar(&opts.gpu, "gpu", runner.DefaultEstimateGPU, "estimate run times on this GPU: H100, H200, or a GPU name containing one")
	f.Float64Var(&opts.efficiency, "efficiency", runner.DefaultEfficiency, "share of the roofline taken for cells with nothing measured, in (0, 1]")
	f.IntVar(&opts.gpus, "gpus", 1, "how many GPUs the run would use, for the study's time")
	f.StringVar(&opts.results, "results", "", "a results directory whose measured cells predict the run times")
	f.StringVar(&opts.probe, "probe", "auto", "check the cells' GPU memory against this machine's GPUs: auto (when its NVIDIA driver is loaded and --gpu is not given), yes or no")
	return c
}

func runPlan(ctx context.Context, a *app, opts *planOptions, args []string) error {
	if opts.maxCells < 1 {
		return usageError{fmt.Errorf("--max-cells: expected an integer >= 1, got %d", opts.maxCells)}
	}
	if opts.json && opts.commands {
		return usageError{fmt.Errorf("--commands and --json: give one (the JSON plan has no commands)")}
	}
	if opts.commands && len(opts.estimateFlags) > 0 {
		return usageError{fmt.Errorf("--%s has no effect with --commands (it is for the plan's time estimates)", opts.estimateFlags[0])}
	}
	// 0 would mean the defaults to the runner: refuse it here.
	if !(opts.efficiency > 0 && opts.efficiency <= 1) {
		return usageError{fmt.Errorf("--efficiency: expected a share of the roofline in (0, 1], e.g. %g; got %g", runner.DefaultEfficiency, opts.efficiency)}
	}
	if opts.gpus < 1 {
		return usageError{fmt.Errorf("--gpus: expected a number of GPUs >= 1, got %d", opts.gpus)}
	}
	switch opts.probe {
	case "auto", "yes", "no":
	default:
		return usageError{fmt.Errorf("--probe: expected auto, yes or no, got %q", opts.probe)}
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
	default:
		err = spec.Plan.EstimateTime(runner.EstimateOptions{GPU: opts.gpu, Efficiency: opts.efficiency, GPUs: opts.gpus, Results: opts.results,
			Getenv: a.gs.Getenv})
		if err != nil {
			return err
		}
		mo, err := planGPUs(ctx, a, opts, spec.Plan)
		if err != nil {
			return err
		}
		if err = spec.Plan.CheckMemory(mo); err != nil {
			return err
		}
		if opts.json {
			err = spec.Plan.WriteJSON(&buf)
		} else {
			err = spec.Plan.WriteText(&buf)
		}
	}
	if err != nil {
		return err
	}
	_, err = a.gs.Stdout.Write(buf.Bytes())
	return err
}

// nvidiaDriverLoaded says, cheaply, whether this machine may have an
// NVIDIA GPU: the driver's control device exists once it is loaded (in a
// container too, where the runtime mounts it).
func nvidiaDriverLoaded() bool {
	_, err := os.Stat("/dev/nvidiactl")
	return err == nil
}

// planGPUs says which GPUs the plan's cells must fit: this machine's usable
// GPUs, probed as xrun run probes them (a child process, bounded in time),
// when --probe asks for it and a cell of xrun's engine may run on a GPU;
// else the --gpu kind.
func planGPUs(ctx context.Context, a *app, opts *planOptions, plan *runner.Plan) (runner.MemoryOptions, error) {
	mo := runner.MemoryOptions{GPU: opts.gpu, Getenv: a.gs.Getenv}
	// Only the built-in engine's GPU cells have a memory to check.
	mayUseGPU := false
	for i := range plan.Cells {
		e := plan.Cells[i].Params.Engine
		mayUseGPU = mayUseGPU || e == "auto" || e == "cuda"
	}
	gpuGiven := false
	for _, f := range opts.estimateFlags {
		gpuGiven = gpuGiven || f == "gpu"
	}
	switch {
	case !mayUseGPU || opts.probe == "no":
		return mo, nil
	case opts.probe == "auto" && (gpuGiven || !nvidiaDriverLoaded()):
		return mo, nil
	}
	devs, err := cuda.ProbeWith(ctx, cuda.ProbeOptions{Executable: a.gs.Executable, Env: a.gs.Environ()})
	if ctx.Err() != nil {
		return mo, ctx.Err()
	}
	for _, g := range devs.GPUs {
		if g.Unusable == "" {
			mo.GPUs = append(mo.GPUs, runner.GPUMemory{Index: g.Index, Name: g.Name, Bytes: float64(g.MemoryBytes)})
		}
	}
	if len(mo.GPUs) > 0 || opts.probe == "auto" {
		// A machine whose probe fails plans as one without GPUs does.
		return mo, nil
	}
	why := "no GPU here is usable"
	var ng *cuda.NoGPUError
	switch {
	case errors.As(err, &ng):
		why = ng.Reason
	case err != nil:
		why = "the GPU probe failed: " + err.Error()
	}
	mo.Note = why + "; the cells are checked against the --gpu kind"
	return mo, nil
}
