package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/xrun-dev/xrun/engine/cenv"
	"github.com/xrun-dev/xrun/engine/cuda"
	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/layout"
)

// DefaultCellTimeout bounds a cell whose spec sets no timeout (none): long
// enough for any cell xrun's studies run on one GPU, short enough that a
// hung GPU costs a nightly run one cell, not the night.
const DefaultCellTimeout = 2 * time.Hour

// DefaultKillGrace is how long a worker asked to stop (SIGTERM) may take
// before it is killed.
const DefaultKillGrace = 10 * time.Second

// CacheDirEnv overrides where generated datasets are cached.
const CacheDirEnv = "XRUN_CACHE_DIR"

// Options configure Run.
type Options struct {
	// Out is the results directory; "" means the spec's (results/<name>).
	Out string
	// Resume keeps the cells already complete with the same fingerprint
	// and runs the others (missing, failed or changed); of a cell whose
	// worker stopped part-way, the repeats it recorded under the same
	// fingerprint are kept and only the rest run.
	Resume bool
	// Fresh discards the results an earlier run left in Out.
	Fresh bool
	// Only are --only KEY=VALUE terms, all of which a cell must match to
	// run now.
	Only []string
	// GPUs are the indices (as xrun devices lists them) of the GPUs cells
	// may use, one cell per GPU at a time; nil means every usable GPU.
	GPUs []int
	// BusyGPUs says what to do when another process uses a GPU a cell is
	// about to run on; "" means BusyWait.
	BusyGPUs BusyGPUPolicy
	// Slurm, when set, runs the cells as the tasks of a Slurm job array
	// instead of on this host.
	Slurm *SlurmOptions
	// Executable is the xrun binary to run cells with (`xrun worker`);
	// Env is the workers' environment.
	Executable string
	Env        []string
	// CacheDir keeps generated datasets; see DatasetCacheDir.
	CacheDir string
	// KillGrace is how long a worker asked to stop has before it is
	// killed; 0 means DefaultKillGrace.
	KillGrace time.Duration
	// TimeLimit, when > 0, is how long the run may take from Started (zero:
	// when Run is called): a worker's first pass, a timed repeat or the
	// profiled pass predicted to end past it is not started, and the run
	// stops as an interrupted one does (ErrTimeLimit); at the limit itself,
	// steps still in flight are stopped. A local run inside a Slurm job
	// also stops before the job's end (SLURM_JOB_END_TIME in Env). See
	// timelimit.go.
	TimeLimit time.Duration
	Started   time.Time
	// Order is the order in which cells run (results.json lists them in
	// the plan's order whatever it is): OrderPlan, or OrderRandom, shuffled
	// with OrderSeed (0: one drawn at random), the seed recorded in
	// results.json and the log. The zero value is the plan's order, or
	// OrderRandom when OrderSeed is set; xrun run's default is OrderRandom.
	Order     CellOrder
	OrderSeed int64
	// ThrottleThreshold is the throttle rule's fraction of a GPU's maximum
	// SM clock (see profile.SummarizeTelemetry); 0 means the default,
	// profile.DefaultThrottleThreshold.
	ThrottleThreshold float64
	// Command is the command line, recorded in the lock file so that a
	// refused run can say who holds the directory.
	Command  string
	Log      zerolog.Logger
	Progress Progress
}

// DatasetCacheDir is where generated datasets are kept: $XRUN_CACHE_DIR,
// else the user's cache directory's xrun/datasets.
func DatasetCacheDir(getenv func(string) string) (string, error) {
	if d := getenv(CacheDirEnv); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no directory for the dataset cache (set %s): %w", CacheDirEnv, err)
	}
	return filepath.Join(d, "xrun", "datasets"), nil
}

// ExistingResultsError refuses to run into a directory that already holds
// results, unless told what to do with them.
type ExistingResultsError struct {
	Dir, Found string
}

func (e *ExistingResultsError) Error() string {
	return fmt.Sprintf("%s already holds results (%s): run with --resume to complete them (cells already measured are kept), --fresh to discard them and start over, or --out to write elsewhere", e.Dir, e.Found)
}

func (e *ExistingResultsError) BadInput() bool { return true }

// study is one Run in progress.
type study struct {
	spec     *Spec
	o        Options
	dir      string
	log      zerolog.Logger
	progress Progress

	devs  cuda.Devices
	gpus  []cuda.DeviceInfo // the GPUs cells may use
	noGPU string            // why there is none, when there is none
	cells []*runCell
	plan  *workerPlan
	// exec runs one cell on the GPUs given (UUIDs; none for the cpu
	// backend); nil means a localExecutor.
	exec cellExecutor
	// slurm runs the cells instead when Options.Slurm is set.
	slurm   *slurmExecutor
	res     *results.Results
	byID    map[string]int // index into res.Cells
	lastErr error          // the last failure to write results
	// writeResults writes results.json and results.md: results.WriteDir,
	// or a failing one in tests (WriteFaultEnv); nil means WriteDir.
	writeResults func(dir string, r *results.Results) error
	// halt, once set, is why no more cells start: results (or a cell's
	// record) could not be written, most often because the disk is full.
	halt error
	// seed shuffles the order in which cells run; 0: the plan's order.
	seed int64
	// limit is the run's time limit (nil: none); limitStops counts the
	// cells with a step not started because of it.
	limit      *budget
	limitStops int
	limitBy    string // the limit that stopped them
	// tools are the external engines' tools, by engine (probeEngines).
	tools map[string]results.EngineTool
}

// runCell is one planned cell and what this run does with it.
type runCell struct {
	cell     *Cell
	wc       *workerCell
	selected bool        // --only selects it
	record   *cellRecord // an earlier, still valid record (--resume)
	gpus     int         // GPUs it takes; 0 for the cpu backend
	// kept are the repeats an earlier worker recorded that the next one
	// keeps (--resume); first is the first step its worker runs and rest
	// the time the cell is predicted to take from them (0: unknown), for
	// the time limit and the order of running.
	kept  []repeatRecord
	first step
	rest  time.Duration
	// roof is the roofline's estimate of one repeat (roofPass) on the
	// study's GPUs, in seconds; 0 where the plan has none.
	roof float64
}

// Run executes a study: it locks the results directory, generates the
// datasets the cells need, runs each cell in its own worker process (see
// RunWorker) — cells on GPUs in parallel, one GPU each; CPU cells one at a
// time — and rewrites results.json and results.md after every cell. A cell
// that fails is recorded as failed and the study goes on.
//
// It returns the results with an error wrapping ErrCellsFailed when a cell
// failed, or ErrInterrupted when ctx was cancelled (the worker in flight is
// stopped; every cell measured so far is kept). Errors in the options, a
// refused directory or a bad dataset are BadInput errors, returned before
// anything is run or written.
func Run(ctx context.Context, spec *Spec, o Options) (*results.Results, error) {
	if o.Resume && o.Fresh {
		return nil, &OptionError{"--fresh", "cannot be combined with --resume (--resume keeps earlier results, --fresh discards them)"}
	}
	sel, err := selectCells(spec.Plan, o.Only)
	if err != nil {
		return nil, err
	}
	s := &study{spec: spec, o: o, dir: o.Out, log: o.Log, progress: o.Progress}
	if s.dir == "" {
		s.dir = spec.Out
	}
	if s.progress == nil {
		s.progress = noProgress{}
	}
	if s.o.KillGrace <= 0 {
		s.o.KillGrace = DefaultKillGrace
	}
	if s.o.CacheDir == "" {
		return nil, errors.New("runner: Options.CacheDir is empty (see DatasetCacheDir)")
	}
	if err := s.timeLimit(); err != nil {
		return nil, err
	}
	if s.seed, err = s.orderSeed(); err != nil {
		return nil, err
	}
	if s.writeResults, err = resultsWriter(envLookup(o.Env)); err != nil {
		return nil, err
	}
	if o.Slurm != nil {
		if s.slurm, err = newSlurmExecutor(o, s.dir, spec.Name, s.log); err != nil {
			return nil, err
		}
		if o.Slurm.DryRun {
			return nil, s.slurmDryRun(sel)
		}
	}

	// Until the plan is written, a failure leaves the directory as it was
	// (and its parents: --out a/b/c may create a and a/b).
	created := firstMissing(s.dir)
	_, statErr := os.Stat(filepath.Join(s.dir, layout.StateDir))
	createdState := errors.Is(statErr, os.ErrNotExist)
	lock, err := lockDir(s.dir, o.Command)
	if err != nil {
		var le *LockedError
		if errors.As(err, &le) {
			// Nothing is removed: a run that started at the same moment
			// may have created the directory and hold it now.
			return nil, err
		}
		// No run holds what a failed lockDir created (only empty
		// directories, which removeCreated leaves if another put files in).
		removeCreated(s.dir, created)
		return nil, s.outDirError(err)
	}
	committed := false
	defer func() {
		lock.release()
		switch {
		case committed:
		case created != "":
			removeCreated(s.dir, created)
		case createdState:
			os.RemoveAll(filepath.Join(s.dir, layout.StateDir))
		}
	}()
	if err := s.checkHeld(); err != nil {
		return nil, err
	}
	if err := probeWritable(s.dir); err != nil {
		return nil, s.outDirError(err)
	}

	if err := s.resolveDevices(ctx); err != nil {
		return nil, err
	}
	s.probeEngines(ctx)
	if ctx.Err() != nil {
		return nil, fmt.Errorf("asking the engines' tools their versions: %w", ErrInterrupted)
	}
	if err := s.buildPlan(sel); err != nil {
		return nil, err
	}
	if o.Resume {
		s.loadRecords()
	}
	if s.slurm != nil {
		if err := s.slurm.precheck(ctx, s.queue()); err != nil {
			return nil, err
		}
	}
	if err := s.prepareDatasets(ctx); err != nil {
		return nil, err
	}
	if o.Fresh {
		if err := clearResults(s.dir); err != nil {
			return nil, s.outDirError(err)
		}
	}
	if err := writeJSONAtomic(filepath.Join(s.dir, layout.StateDir, layout.PlanFile), s.plan); err != nil {
		return nil, s.outDirError(fmt.Errorf("writing the plan: %w", err))
	}
	committed = true
	s.initResults(ctx)
	s.write()
	if err := s.lastErr; err != nil {
		return nil, writeFailure("writing results", err)
	}
	return s.execute(ctx)
}

// checkHeld refuses a directory that holds results this run was not told
// what to do with, or another study's, which even --resume would replace.
func (s *study) checkHeld() error {
	held, found := holdsResults(s.dir)
	if !held || s.o.Fresh {
		return nil
	}
	if e := s.otherStudy(); e != nil {
		return e
	}
	if !s.o.Resume {
		return &ExistingResultsError{Dir: s.dir, Found: found}
	}
	return nil
}

// writeFailure is the error of a run that could not write what (its
// results, a cell's record); a full disk says so.
func writeFailure(what string, err error) error {
	if errors.Is(err, syscall.ENOSPC) {
		return fmt.Errorf("the disk is full: %s: %w", what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// queue lists the cells this run runs, in plan order.
func (s *study) queue() []*runCell {
	var q []*runCell
	for _, rc := range s.cells {
		if rc.todo() {
			q = append(q, rc)
		}
	}
	return q
}

// slurmDryRun prints the job-array script a Slurm run would submit, and
// touches nothing: no lock, no plan, no datasets.
func (s *study) slurmDryRun(sel []bool) error {
	if err := s.checkHeld(); err != nil {
		return err
	}
	if err := s.buildPlan(sel); err != nil {
		return err
	}
	if s.o.Resume {
		s.loadRecords()
	}
	return s.slurm.dryRun(s.queue())
}

// todo reports whether this run runs the cell.
func (rc *runCell) todo() bool {
	return rc.selected && (rc.record == nil || rc.record.Status != results.StatusOK)
}

// stop makes err the reason no more cells start, unless one already is.
func (s *study) stop(err error) {
	if s.halt != nil {
		return
	}
	s.halt = err
	s.log.Error().Err(err).Msg("the study stops: no more cells start; the cells not run yet are marked so, and xrun run --resume runs them once the cause is fixed")
}

// halted implements reporter.
func (s *study) halted() bool { return s.halt != nil }

// execute hands the cells to run to the executor and merges each outcome
// into the results as it comes.
func (s *study) execute(ctx context.Context) (*results.Results, error) {
	x, err := s.executor()
	if err != nil {
		return nil, err
	}
	queue := s.queue()
	total, complete := len(s.cells), len(s.cells)-len(queue)
	ev := s.log.Info().Str("dir", s.dir).Int("cells", total).Int("to_run", len(queue))
	if complete > 0 {
		ev = ev.Int("kept", complete)
	}
	if s.seed != 0 {
		queue = shuffled(queue, s.seed)
		ev = ev.Str("order", string(OrderRandom)).Int64("order_seed", s.seed)
	} else {
		ev = ev.Str("order", string(OrderPlan))
	}
	ev.Msg("running the study")
	if s.seed != 0 {
		s.log.Debug().Int64("order_seed", s.seed).Msgf("cells run in random order: --order-seed %d repeats it, --order plan keeps the plan's", s.seed)
	}
	if note := untestableNote(s.spec); note != "" {
		s.log.Warn().Msg(note)
	}
	runCtx, stopAtLimit := s.limitContext(ctx, queue)
	defer stopAtLimit()
	s.progress.Start(total, complete, len(queue), x.parallel(queue))
	if p, ok := s.progress.(Predictor); ok {
		rest := map[string]time.Duration{}
		for _, rc := range queue {
			rest[rc.cell.ID] = rc.rest
		}
		p.Predicted(rest)
	}
	runErr := x.runCells(runCtx, queue, s)
	s.progress.Stop()
	// The time limit itself was reached (ctx itself is intact).
	limitRanOut := ctx.Err() == nil && runCtx.Err() != nil
	if limitRanOut {
		s.log.Warn().Str("limit", s.limit.limit).Msg("the time limit ran out: a step still running was stopped and is lost (nothing recorded predicted it, or it took longer than predicted)")
	}

	failed := 0
	for _, c := range s.res.Cells {
		if c.Status == results.StatusFailed {
			failed++
		}
	}
	notRun := ""
	switch {
	case runErr != nil:
		notRun = "not run: " + runErr.Error()
	case ctx.Err() != nil:
		notRun = "not run: the study was interrupted (xrun run --resume runs it)"
	case s.halt != nil:
		notRun = "not run: the study stopped: " + s.halt.Error() + " (xrun run --resume runs it)"
	case limitRanOut || s.limitStops > 0:
		notRun = "not run: the study stopped at its time limit (xrun run --resume runs it)"
	}
	if notRun != "" {
		for i := range s.res.Cells {
			c := &s.res.Cells[i]
			if c.Status == results.StatusSkipped && strings.HasPrefix(c.Error, notRunYet) {
				c.Error = notRun
				if len(c.Repeats) > 0 {
					c.Error += fmt.Sprintf("; %d of %d repeats kept", len(c.Repeats), s.plan.Repeats)
				}
			}
		}
	}
	s.write()
	if s.lastErr == nil {
		s.log.Info().Str("results", filepath.Join(s.dir, layout.JSONFile)).Str("table", filepath.Join(s.dir, layout.MarkdownFile)).
			Str("cells", filepath.Join(s.dir, layout.CellsDir)).Msg("results written")
	} else {
		s.log.Error().Str("results", filepath.Join(s.dir, layout.JSONFile)).
			Msg("results not written: results.json and results.md are as the last write that succeeded left them")
	}
	switch {
	case runErr != nil:
		return s.res, runErr
	case ctx.Err() != nil:
		return s.res, fmt.Errorf("stopped; the cells measured so far are in %s: %w", s.dir, ErrInterrupted)
	case s.halt != nil:
		// A failed write halts the study (write), this last one included.
		notRun := 0
		for _, rc := range queue {
			if s.res.Cells[s.byID[rc.cell.ID]].Status == results.StatusSkipped {
				notRun++
			}
		}
		if notRun == 0 {
			return s.res, s.halt
		}
		return s.res, fmt.Errorf("%w; %d of the %d cells to run were not run (xrun run --resume runs them once it is fixed)", s.halt, notRun, len(queue))
	case limitRanOut || s.limitStops > 0:
		return s.res, s.limitError(queue)
	case failed > 0:
		return s.res, fmt.Errorf("%d of %d cells failed (their errors are in %s): %w", failed, total, filepath.Join(s.dir, layout.MarkdownFile), ErrCellsFailed)
	}
	return s.res, nil
}

// executor is what runs this study's cells: the Slurm executor when the
// options ask for it, else the local scheduler over this host's GPUs.
func (s *study) executor() (executor, error) {
	if s.slurm != nil {
		return s.slurm, nil
	}
	absDir, err := filepath.Abs(s.dir)
	if err != nil {
		return nil, err
	}
	x := s.exec
	if x == nil {
		lx := &localExecutor{exe: s.o.Executable, env: s.o.Env, dir: absDir, grace: s.o.KillGrace,
			libcSpawn: cenv.UnderLauncher(cenv.SelfMaps())}
		if s.limit != nil {
			lx.deadline = s.limit.deadline
		}
		x = s.busyCheck(lx)
	}
	return &gpuScheduler{gpus: s.gpus, cell: x, limit: s.limit, paces: s.paces()}, nil
}
