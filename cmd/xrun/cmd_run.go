package main

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/xrun-dev/xrun/engine/profile"
	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/layout"
	"github.com/xrun-dev/xrun/runner"
)

type runOptions struct {
	out       string
	resume    bool
	fresh     bool
	only      []string
	gpus      string
	sets      []string
	maxCells  int
	killGrace time.Duration
	gpuBusy   string
	timeLimit string
	// order and orderSeed are --order and --order-seed (orderSeedSet:
	// given, 0 included).
	order        string
	orderSeed    int64
	orderSeedSet bool
	// throttleThreshold is the throttle rule's fraction of a GPU's
	// maximum SM clock.
	throttleThreshold float64
	// started is when the command started: --time-limit counts from it.
	started time.Time
	// --executor slurm and its flags.
	executor                       string
	partition, gres, time, account string
	sbatchArgs                     []string
	dryRun                         bool
	// The shared log flags, read from the command: the run rebuilds the
	// logger on top of its status line.
	logLevel, logFormat string
	// What the executor flags came to (see slurmOptions).
	slurm    *runner.SlurmOptions
	slurmErr error
}

func newRunCommand(a *app) *cobra.Command {
	opts := &runOptions{}
	c := &cobra.Command{
		Use:   "run FILE",
		Short: "Run a study: every cell in its own worker process, results after every cell",
		Long: `Run the study FILE: generate (or reuse) the datasets, run every cell in its
own worker process (xrun re-executed), and write the results directory:

  DIR/results.json            every cell's parameters, status, error, repeats and
                              summaries, and the environment (rewritten after
                              every cell, atomically)
  DIR/results.md              the throughput tables
  DIR/cells/<id>/cell.json    the cell as its worker measured it
  DIR/cells/<id>/requests.jsonl, iterations.csv, log.jsonl, stderr.log

DIR is results/<name> (or the spec's out:), or --out. A cell that crashes,
fails, or outlives its timeout (the spec's timeout:, 2h when it says none)
is recorded as failed and the study goes on. engine: auto runs on the GPU
when one is usable, else on the CPU backend; with several GPUs cells run side
by side, one per GPU or gpus_per_cell GPUs each (--gpus chooses). CPU cells
run one at a time. Before a cell starts, NVML is asked whether another
process uses its GPUs: by default the cell waits for them to be free
(--gpu-busy ignore runs it anyway, --gpu-busy fail fails the cell).

--executor slurm runs the cells as the tasks of one Slurm job array instead
(the results directory must be on a filesystem the nodes share): xrun writes
DIR/.xrun/slurm.sh, submits it with sbatch, follows the tasks with scontrol,
merges each cell as its task ends, and exits as a local run would. A task
that fails, times out, is cancelled or preempted is a failed cell with
Slurm's reason; --resume resubmits only the cells missing or failed; Ctrl-C
cancels the job (scancel). --dry-run prints the script and submits nothing.
engine: auto means cuda when the tasks ask for GPUs (--gres gpu:N; cuda
cells ask for gpu:<gpus_per_cell> by themselves), else cpu.

A directory that already holds results is refused unless --resume (keep the
cells complete with the same fingerprint - same parameters, repeats, xrun
build, backend and GPU or CPU model - and run the rest) or --fresh (discard
them). Two runs never share a directory: the second is refused. Ctrl-C stops
the cell in flight and keeps every cell measured so far; --resume continues.

--time-limit 9m makes the run end within 9 minutes of its start (for a batch
job's time limit, a CI timeout, a capped remote command): a cell's first pass
(with the engine's creation), a timed repeat or the profiled pass predicted to
end past the limit is not started, and the run stops as an interrupted one
does (exit status 130): every repeat finished is kept and --resume runs the
rest. A pass is predicted from the cell's last recorded repeat (also those an
earlier run recorded; the profiled pass x1.2) with a margin of 5 % + 5s; a
cell with none of its own from the most similar cell recorded, scaled by the
plan's roofline estimates of the two (x1.5 where they differ) or else by their
tokens; with nothing recorded at all a cell starts while 30s are left. A pass
still running at the limit is stopped and lost. On several GPUs, cells with
nothing recorded start first, longest first by the plan's roofline estimate,
then the others longest first by their recorded repeats. Inside a Slurm job
that sets SLURM_JOB_END_TIME (recent Slurm) the job's end is a time limit too;
with --executor slurm, each task's (--time-limit is for local runs).

A spec's search block (an SLO search) runs in rounds: each adds the next load
point of every group still searching and resumes the study. --only and
--time-limit (counted from the command's start) hold for every round: a group
--only leaves out is not searched, and a search the time limit or Ctrl-C stops
is unfinished; results.md's SLO frontier says which, with each group's bracket
so far, and --resume goes on from the points measured.

GPU cells record NVML telemetry every 50 ms. A cell is flagged as throttled
(under results.md's table and in xrun diff) when more than 5 % of the samples
of its timed repeats ran below --throttle-threshold (default 0.75, nvbench's
75 %) of the GPU's maximum SM clock; the throttle reasons NVML gives, such as
sw_power_cap on a loaded H100 at full clock, are recorded but flag nothing.

Cells run in random order (--order random, the default), so that a machine
that drifts - warming up, throttling, a neighbour's load - does not line up
with the cells; the seed is drawn for each run, logged and recorded in
results.json and results.md, and --order-seed N repeats an order (for the same
cells to run). --order plan runs them in the plan's order. results.json lists
the cells in the plan's order either way. A directory that holds another
study's results is refused, even with --resume.

Output-directory problems (read-only, a file in the way) and bad datasets are
bad input (exit status 2) and leave nothing behind. When results cannot be
written (a full disk) no further cell starts: the cells not run are marked so,
and the run exits with status 1, saying why.

"xrun FILE" is short for "xrun run FILE".`,
		Example: `  xrun experiments/quickstart.yaml
  xrun run experiments/gemm.yaml --gpus 0,1 --out results/gemm-h200
  xrun run experiments/gemm.yaml --resume --only batch_size=64
  xrun run experiments/gemm.yaml --resume --time-limit 9m
  xrun run experiments/nightly.yaml --fresh --set repeats=3 --log-format json
  xrun run experiments/gemm.yaml --executor slurm --partition gpu --gres gpu:1 --time 1:00:00
  xrun run experiments/gemm.yaml --executor slurm --resume --sbatch-arg=--qos=high`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRun(cmd.Context(), a, opts.withFlags(cmd), args)
		},
	}
	f := c.Flags()
	f.StringVar(&opts.out, "out", "", "results directory (default: the spec's out, else results/<name>)")
	f.BoolVar(&opts.resume, "resume", false, "keep the cells, and the repeats of unfinished cells, already measured with the same fingerprint and run the rest")
	f.BoolVar(&opts.fresh, "fresh", false, "discard the results already in the directory and start over")
	f.StringArrayVar(&opts.only, "only", nil, "run only the cells with KEY=VALUE, keys as xrun plan shows them (repeatable, all must match)")
	f.StringVar(&opts.gpus, "gpus", "", "GPUs to run on, as xrun devices lists them, e.g. 0,1 (default: every usable GPU)")
	f.StringArrayVar(&opts.sets, "set", nil, "override a spec value: PATH=VALUE, VALUE in YAML (repeatable)")
	f.IntVar(&opts.maxCells, "max-cells", runner.DefaultMaxCells, "refuse studies with more cells than this")
	f.DurationVar(&opts.killGrace, "kill-grace", runner.DefaultKillGrace, "how long a worker asked to stop may take before it is killed")
	_ = f.MarkHidden("kill-grace")
	f.StringVar(&opts.timeLimit, "time-limit", "", "end the run within `DURATION` of its start (e.g. 9m, 540s): passes predicted to end past it are not started; --resume continues")
	f.Float64Var(&opts.throttleThreshold, "throttle-threshold", profile.DefaultThrottleThreshold, "flag a GPU cell as throttled when more than 5% of its timed telemetry samples ran below this `FRACTION` of the GPU's maximum SM clock (nvbench's rule; its --throttle-threshold 75 is 0.75 here)")
	f.StringVar(&opts.order, "order", string(runner.OrderRandom), "the order cells run in: random (shuffled with a seed, recorded in results.json) or plan")
	f.Int64Var(&opts.orderSeed, "order-seed", 0, "shuffle the cells with this `SEED` (results.json's order_seed) to repeat a run's order (default: a new seed each run)")
	f.StringVar(&opts.gpuBusy, "gpu-busy", string(runner.BusyWait), "when another process uses a cell's GPU (NVML): wait until it is free, ignore it and run, or fail the cell")
	f.StringVar(&opts.executor, "executor", "local", "where cells run: local (worker processes on this host) or slurm (one task per cell of a Slurm job array)")
	f.StringVar(&opts.partition, "partition", "", "slurm: the partition the tasks run in (default: the cluster's)")
	f.StringVar(&opts.gres, "gres", "", "slurm: generic resources of each task, e.g. gpu:1 (default: gpu:N for cuda cells, N = gpus_per_cell)")
	f.StringVar(&opts.time, "time", "", "slurm: time limit of each task, e.g. 30 or 2:00:00 (default: the partition's)")
	f.StringVar(&opts.account, "account", "", "slurm: the account the tasks are charged to")
	f.StringArrayVar(&opts.sbatchArgs, "sbatch-arg", nil, "slurm: one more sbatch option, e.g. --sbatch-arg=--qos=high (repeatable)")
	f.BoolVar(&opts.dryRun, "dry-run", false, "slurm: print the job-array script and submit nothing")
	return c
}

// slurmOptions checks the executor flags: the Slurm ones only go with
// --executor slurm.
func (o *runOptions) slurmOptions(cmd *cobra.Command) (*runner.SlurmOptions, error) {
	switch o.executor {
	case "local":
		for _, name := range []string{"partition", "gres", "time", "account", "sbatch-arg", "dry-run"} {
			if cmd.Flags().Changed(name) {
				return nil, usageError{fmt.Errorf("--%s: only with --executor slurm", name)}
			}
		}
		return nil, nil
	case "slurm":
		return &runner.SlurmOptions{Partition: o.partition, Gres: o.gres, Time: o.time, Account: o.account,
			SbatchArgs: o.sbatchArgs, DryRun: o.dryRun}, nil
	}
	return nil, usageError{fmt.Errorf("--executor: %q: expected local or slurm", o.executor)}
}

// withFlags reads what runRun needs from the command itself: the shared
// log flags (the run rebuilds the logger on top of its status line) and
// which executor flags were given.
func (o *runOptions) withFlags(cmd *cobra.Command) *runOptions {
	o.started = time.Now()
	o.orderSeedSet = cmd.Flags().Changed("order-seed")
	o.slurm, o.slurmErr = o.slurmOptions(cmd)
	o.logLevel, o.logFormat = "info", "auto"
	if fl := cmd.Flag("log-level"); fl != nil {
		o.logLevel = fl.Value.String()
	}
	if fl := cmd.Flag("log-format"); fl != nil {
		o.logFormat = fl.Value.String()
	}
	return o
}

func runRun(ctx context.Context, a *app, opts *runOptions, args []string) error {
	if opts.maxCells < 1 {
		return usageError{fmt.Errorf("--max-cells: expected an integer >= 1, got %d", opts.maxCells)}
	}
	if opts.slurmErr != nil {
		return opts.slurmErr
	}
	if !(opts.throttleThreshold > 0 && opts.throttleThreshold <= 1) {
		return usageError{fmt.Errorf("--throttle-threshold: %v: expected a fraction of the GPU's maximum SM clock, greater than 0 and at most 1, such as 0.75 (nvbench's --throttle-threshold 75)", opts.throttleThreshold)}
	}
	var timeLimit time.Duration
	if opts.timeLimit != "" {
		d, err := time.ParseDuration(opts.timeLimit)
		if err != nil || d <= 0 {
			return usageError{fmt.Errorf("--time-limit: %q: expected a duration greater than 0, such as 9m, 540s or 1h30m", opts.timeLimit)}
		}
		timeLimit = d
	}
	busy, err := runner.ParseBusyGPUPolicy(opts.gpuBusy)
	if err != nil {
		return err
	}
	order, err := runner.ParseCellOrder(opts.order)
	if err != nil {
		return err
	}
	if opts.orderSeed < 0 || opts.orderSeedSet && opts.orderSeed == 0 {
		return usageError{fmt.Errorf("--order-seed: %d: expected an integer >= 1 (results.json's order_seed)", opts.orderSeed)}
	}
	var gpus []int
	if opts.gpus != "" {
		if gpus, err = runner.ParseGPUs(opts.gpus); err != nil {
			return err
		}
	}
	spec, err := runner.LoadSpec(args[0], runner.LoadOptions{Sets: opts.sets, MaxCells: opts.maxCells})
	if err != nil {
		return err
	}
	cacheDir, err := runner.DatasetCacheDir(a.gs.Getenv)
	if err != nil {
		return err
	}

	// On a terminal with console logs, a status line sits under the log
	// lines; with JSON logs (cron, CI) each finished cell is a log line.
	log := a.log
	var progress runner.Progress
	console := opts.logFormat == "console" || (opts.logFormat == "auto" && a.gs.StderrIsTerminal)
	if a.gs.StderrIsTerminal && console {
		sl := runner.NewStatusLine(a.gs.Stderr, terminalWidth(a.gs.Stderr))
		gs := *a.gs
		gs.Stderr = sl
		if l, err := newLogger(&gs, opts.logLevel, opts.logFormat); err == nil {
			log = l
			progress = sl
		}
	}

	if opts.slurm != nil {
		opts.slurm.ScriptOut = a.gs.Stdout
	}
	ro := runner.Options{
		Out: opts.out, Resume: opts.resume, Fresh: opts.fresh, Only: opts.only, GPUs: gpus, BusyGPUs: busy, Slurm: opts.slurm,
		Executable: a.gs.Executable, Env: a.gs.Environ(), CacheDir: cacheDir, KillGrace: opts.killGrace,
		TimeLimit: timeLimit, Started: opts.started, Order: order, OrderSeed: opts.orderSeed, ThrottleThreshold: opts.throttleThreshold,
		Command: "xrun run " + args[0], Log: log, Progress: progress,
	}
	load := func(sets []string) (*runner.Spec, error) {
		return runner.LoadSpec(args[0], runner.LoadOptions{Sets: sets, MaxCells: opts.maxCells})
	}
	if opts.resume {
		spec = resumeSearch(spec, opts, load, log)
	}
	// A search block runs rounds: each adds the next load points and
	// resumes the study, keeping what earlier rounds measured. Every round
	// runs under the same --only (a point it leaves out is not measured,
	// and its group's search says so) and the same --time-limit, counted
	// from the command's start (ro.Started).
	out := cmp.Or(opts.out, spec.Out)
	res, runErr := runner.SearchRounds(spec, load,
		func(sp *runner.Spec, round int) (*results.Results, error) {
			return runner.Run(ctx, sp, roundOptions(ro, round, out))
		},
		func(round int, points []string) {
			log.Info().Int("round", round).Strs("points", points).Msg("SLO search: measuring the next points")
		})
	if stalled := runner.SearchStalled(res); len(stalled) > 0 {
		log.Warn().Strs("groups", stalled).Msg("SLO search: not every group's search ended (xrun run --resume goes on with them); results.md's SLO frontier says why")
	}
	if res != nil {
		var buf bytes.Buffer
		if err := results.Render(&buf, "text", res, results.RenderOptions{}); err != nil {
			log.Error().Err(err).Msg("rendering the table")
		} else if _, err := a.gs.Stdout.Write(buf.Bytes()); err != nil && runErr == nil {
			runErr = err
		}
	}
	return runErr
}

// roundOptions are the options of an SLO search's round: after the
// first, a resume of the same directory (what earlier rounds measured is
// kept); --only, --time-limit and its start stay those of the command, so
// that the limit bounds every round together.
func roundOptions(o runner.Options, round int, out string) runner.Options {
	if round > 0 {
		o.Resume, o.Fresh, o.Out = true, false, out
	}
	return o
}

// resumeSearch is spec with the points an earlier run of its SLO search
// added (runner.SearchResumed), so that --resume keeps them from the first
// round on and goes on from them. A results file it cannot read or use
// leaves spec as it is: the rounds then ask for those points again, and
// --resume keeps what was measured of them.
func resumeSearch(spec *runner.Spec, opts *runOptions, load func([]string) (*runner.Spec, error), log zerolog.Logger) *runner.Spec {
	if spec.Search == nil {
		return spec
	}
	prior, err := results.ReadFile(filepath.Join(cmp.Or(opts.out, spec.Out), layout.JSONFile))
	if err != nil {
		return spec
	}
	set, ids, err := runner.SearchResumed(spec, prior)
	if err == nil && set != "" {
		var next *runner.Spec
		if next, err = load(append(slices.Clone(spec.Sets), set)); err == nil {
			log.Info().Strs("cells", ids).Msg("SLO search: resuming with the points earlier rounds added")
			return next
		}
	}
	if err != nil {
		log.Warn().Err(err).Msg("SLO search: the points earlier rounds added could not be planned again; the search asks for them again")
	}
	return spec
}

// terminalWidth is the width of the terminal w writes to, or 0 if unknown.
func terminalWidth(w any) int {
	if f, ok := w.(interface{ Fd() uintptr }); ok {
		if width, _, err := term.GetSize(int(f.Fd())); err == nil {
			return width
		}
	}
	return 0
}
