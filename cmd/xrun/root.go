package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
)

// rootOptions are the flags every command shares.
type rootOptions struct {
	logLevel  string
	logFormat string
}

// app is what a command's runX function receives besides its own options:
// the outside world and the logger built from the shared flags.
type app struct {
	gs  *globalState
	log zerolog.Logger
	// started is set when a command's own RunE begins, after cobra has
	// validated flags, arguments and required flags; an error before that
	// is a usage error.
	started bool
	// stopped is set by a command for which a signal is the normal end
	// (xrun serve's graceful shutdown): exit 0, not 130.
	stopped bool
}

// newRootCommand wires every command explicitly (no init() registration),
// so the command tree is visible in one place.
func newRootCommand(gs *globalState) (*cobra.Command, *app) {
	opts := &rootOptions{}
	a := &app{gs: gs, log: zerolog.Nop()}
	root := &cobra.Command{
		Use:   "xrun [run] FILE | xrun COMMAND",
		Short: "Declarative experiment-matrix runner for LLM inference performance",
		Long: `xrun expands a YAML study into cells (model x batch size x GEMM plugin x ...),
generates each cell's token-norm-dist dataset, runs the cells on its own
inference engine and writes trtllm-bench throughput tables, profiles and a
results file that diffs cleanly in pull requests.

"xrun FILE" is short for "xrun run FILE".` + exitStatusHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			l, err := newLogger(gs, opts.logLevel, opts.logFormat)
			if err != nil {
				return usageError{err}
			}
			a.log = l
			return nil
		},
	}
	root.PersistentFlags().StringVar(&opts.logLevel, "log-level", "info", "log level: trace, debug, info, warn, error")
	root.PersistentFlags().StringVar(&opts.logFormat, "log-format", "auto", "log format: auto (console on a terminal, else JSON lines), console, json")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	// What mistypedCommand suggests from (cobra's default, set here
	// because SuggestionsFor is called before cobra would set it).
	root.SuggestionsMinimumDistance = 2
	root.SetIn(gs.Stdin)
	root.SetOut(gs.Stdout)
	root.SetErr(gs.Stderr)
	root.CompletionOptions.DisableDefaultCmd = true

	root.AddCommand(
		newVersionCommand(a),
		newDevicesCommand(a),
		newPlanCommand(a),
		newDatasetCommand(a),
		newDiffCommand(a),
		newTrendCommand(a),
		newReportCommand(a),
		newRunCommand(a),
		newServeCommand(a),
		newWorkerCommand(a),
		newKernelsCommand(a),
	)
	decorate(root, a)
	return root, a
}

// decorate gives every command below root the shared behaviour: flag errors
// are usage errors, help ends with EXIT STATUS, and RunE marks the command
// as started (cobra checks required flags after the pre-run hooks, so only
// RunE is late enough to tell usage errors from run-time ones).
func decorate(parent *cobra.Command, a *app) {
	for _, c := range parent.Commands() {
		c.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
		if !strings.Contains(c.Long, "EXIT STATUS") {
			c.Long = strings.TrimRight(c.Long, "\n") + "\n" + exitStatusHelp
		}
		if runE := c.RunE; runE != nil {
			c.RunE = func(cmd *cobra.Command, args []string) error {
				a.started = true
				return runE(cmd, args)
			}
		}
		decorate(c, a)
	}
}

// run executes one command line and returns the exit status. It is the
// in-process entry point the tests use.
func run(ctx context.Context, gs *globalState, args []string) int {
	root, a := newRootCommand(gs)
	if err := mistypedCommand(root, args); err != nil {
		report(gs, err)
		return exitCode(err)
	}
	root.SetArgs(implicitRun(root, args))
	err := root.ExecuteContext(ctx)
	if err != nil && !a.started {
		// Unknown commands, wrong argument counts, missing flags: cobra
		// reports these before any command code runs.
		err = usageError{err}
	}
	if err == nil && ctx.Err() != nil && !a.stopped {
		err = ctx.Err()
	}
	if err != nil {
		report(gs, err)
	}
	return exitCode(err)
}

// report prints the final error once, plainly, on stderr. Library errors
// already name file:line and field, so nothing is added but the prefix.
func report(gs *globalState, err error) {
	if errors.Is(err, context.Canceled) {
		fmt.Fprintln(gs.Stderr, "xrun: interrupted")
		return
	}
	fmt.Fprintf(gs.Stderr, "xrun: %v\n", err)
}

// implicitRun turns "xrun [global flags] FILE ..." into "xrun ... run FILE ...":
// the first positional argument that is not a command name is a study file.
func implicitRun(root *cobra.Command, args []string) []string {
	i := firstPositional(args)
	if i < 0 || isCommand(root, args[i]) {
		return args
	}
	out := append([]string{}, args[:i]...)
	out = append(out, "run")
	return append(out, args[i:]...)
}

// firstPositional is the index of the first argument that is neither a
// global flag nor a flag's value; -1 when there is none before "--".
func firstPositional(args []string) int {
	valueFlags := map[string]bool{"--log-level": true, "--log-format": true}
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			return -1
		}
		if strings.HasPrefix(arg, "-") {
			if valueFlags[arg] {
				i++
			}
			continue
		}
		return i
	}
	return -1
}

func isCommand(root *cobra.Command, arg string) bool {
	if arg == "help" {
		return true
	}
	for _, c := range root.Commands() {
		if c.Name() == arg || c.HasAlias(arg) {
			return true
		}
	}
	return false
}

// mistypedCommand catches "xrun plna FILE": implicitRun would take "plna"
// for a study file and the run would complain about its arguments. A first
// argument that is no command, no existing file and close to a command's
// name is refused with the command it was probably meant to be.
func mistypedCommand(root *cobra.Command, args []string) error {
	i := firstPositional(args)
	if i < 0 {
		return nil
	}
	arg := args[i]
	if arg == "" || isCommand(root, arg) || strings.ContainsAny(arg, `/\`) {
		return nil
	}
	if _, err := os.Stat(arg); err == nil {
		return nil
	}
	cands := root.SuggestionsFor(arg)
	if len(cands) == 0 {
		return nil
	}
	for i, c := range cands {
		cands[i] = strconv.Quote(c)
	}
	mean := cands[0]
	if n := len(cands); n > 1 {
		mean = strings.Join(cands[:n-1], ", ") + " or " + cands[n-1]
	}
	return usageError{fmt.Errorf("unknown command %q; did you mean %s?", arg, mean)}
}
