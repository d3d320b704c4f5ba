package main

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/xrun-dev/xrun/results"
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
	// The shared log flags, read from the command: the run rebuilds the
	// logger on top of its status line.
	logLevel, logFormat string
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
by side, one per GPU (--gpus chooses). CPU cells run one at a time.

A directory that already holds results is refused unless --resume (keep the
cells complete with the same fingerprint - same parameters, repeats, xrun
build, backend and GPU or CPU model - and run the rest) or --fresh (discard
them). Two runs never share a directory: the second is refused. Ctrl-C stops
the cell in flight and keeps every cell measured so far; --resume continues.

"xrun FILE" is short for "xrun run FILE".`,
		Example: `  xrun experiments/quickstart.yaml
  xrun run experiments/gemm.yaml --gpus 0,1 --out results/gemm-h200
  xrun run experiments/gemm.yaml --resume --only batch_size=64
  xrun run experiments/nightly.yaml --fresh --set repeats=3 --log-format json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRun(cmd.Context(), a, opts.withLogFlags(cmd), args)
		},
	}
	f := c.Flags()
	f.StringVar(&opts.out, "out", "", "results directory (default: the spec's out, else results/<name>)")
	f.BoolVar(&opts.resume, "resume", false, "keep the cells already complete with the same fingerprint and run the others")
	f.BoolVar(&opts.fresh, "fresh", false, "discard the results already in the directory and start over")
	f.StringArrayVar(&opts.only, "only", nil, "run only the cells with KEY=VALUE, keys as xrun plan shows them (repeatable, all must match)")
	f.StringVar(&opts.gpus, "gpus", "", "GPUs to run on, as xrun devices lists them, e.g. 0,1 (default: every usable GPU)")
	f.StringArrayVar(&opts.sets, "set", nil, "override a spec value: PATH=VALUE, VALUE in YAML (repeatable)")
	f.IntVar(&opts.maxCells, "max-cells", runner.DefaultMaxCells, "refuse studies with more cells than this")
	f.DurationVar(&opts.killGrace, "kill-grace", runner.DefaultKillGrace, "how long a worker asked to stop may take before it is killed")
	_ = f.MarkHidden("kill-grace")
	return c
}

func (o *runOptions) withLogFlags(cmd *cobra.Command) *runOptions {
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
	var gpus []int
	if opts.gpus != "" {
		var err error
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

	res, runErr := runner.Run(ctx, spec, runner.Options{
		Out: opts.out, Resume: opts.resume, Fresh: opts.fresh, Only: opts.only, GPUs: gpus,
		Executable: a.gs.Executable, Env: a.gs.Environ(), CacheDir: cacheDir, KillGrace: opts.killGrace,
		Command: "xrun run " + args[0], Log: log, Progress: progress,
	})
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

// terminalWidth is the width of the terminal w writes to, or 0 if unknown.
func terminalWidth(w any) int {
	if f, ok := w.(interface{ Fd() uintptr }); ok {
		if width, _, err := term.GetSize(int(f.Fd())); err == nil {
			return width
		}
	}
	return 0
}
