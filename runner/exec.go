package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"go.yaml.in/yaml/v3"

	dsets "github.com/xrun-dev/xrun/datasets"
	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/cuda"
	"github.com/xrun-dev/xrun/engine/profile"
	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/htmlreport"
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

// resolveDevices probes the GPUs when a cell may use one and decides which
// GPUs cells run on.
func (s *study) resolveDevices(ctx context.Context) error {
	if s.slurm != nil {
		// The tasks' nodes have the GPUs, not this host: Slurm gives each
		// task its own (--gres).
		return nil
	}
	need := false
	for i := range s.spec.Plan.Cells {
		need = need || s.spec.Plan.Cells[i].Params.Engine != "cpu"
	}
	if !need {
		if s.o.GPUs != nil {
			s.log.Warn().Msg("--gpus has no effect: every cell runs on the cpu engine")
		}
		return nil
	}
	devs, err := cuda.ProbeWith(ctx, cuda.ProbeOptions{Executable: s.o.Executable, Env: s.o.Env})
	if ctx.Err() != nil {
		return fmt.Errorf("probing GPUs: %w", ErrInterrupted)
	}
	s.devs = devs
	var ng *cuda.NoGPUError
	switch {
	case errors.As(err, &ng):
		s.noGPU = ng.Reason
	case err != nil:
		s.noGPU = err.Error()
		s.log.Warn().Err(err).Msg("the GPU probe failed; taking this machine to have no usable GPU")
	}
	var usable []cuda.DeviceInfo
	for _, g := range devs.GPUs {
		if g.Unusable == "" {
			usable = append(usable, g)
		}
	}
	if s.o.GPUs == nil {
		s.gpus = usable
		return nil
	}
	for _, idx := range s.o.GPUs {
		i := slices.IndexFunc(devs.GPUs, func(g cuda.DeviceInfo) bool { return g.Index == idx })
		switch {
		case i < 0 && len(devs.GPUs) == 0:
			return &OptionError{"--gpus", fmt.Sprintf("GPU %d: this machine has no usable GPU (%s)", idx, s.noGPU)}
		case i < 0:
			return &OptionError{"--gpus", fmt.Sprintf("GPU %d does not exist; xrun devices lists GPUs 0 to %d", idx, len(devs.GPUs)-1)}
		case devs.GPUs[i].Unusable != "":
			return &OptionError{"--gpus", fmt.Sprintf("GPU %d (%s) is not usable: %s", idx, devs.GPUs[i].Name, devs.GPUs[i].Unusable)}
		}
		s.gpus = append(s.gpus, devs.GPUs[i])
	}
	return nil
}

// buildPlan resolves every planned cell for its worker: backend, absolute
// paths, dataset, timeout and fingerprint.
func (s *study) buildPlan(sel []bool) error {
	abs, err := filepath.Abs(s.o.CacheDir)
	if err != nil {
		return err
	}
	s.plan = &workerPlan{Version: workerPlanVersion, Name: s.spec.Name, Spec: s.spec.File, Repeats: s.spec.Repeats, CacheDir: abs,
		Command: s.spec.Command, Trtllm: s.spec.Trtllm, ThrottleThreshold: s.o.ThrottleThreshold,
		// Allocated whole, so the runCells may point into it.
		Cells: make([]workerCell, 0, len(s.spec.Plan.Cells))}
	build := Build()
	gpuDevice := ""
	if len(s.gpus) > 0 {
		var names []string
		for _, g := range s.gpus {
			if !slices.Contains(names, g.Name) {
				names = append(names, g.Name)
			}
		}
		slices.Sort(names)
		gpuDevice = strings.Join(names, "+") + " driver " + s.devs.DriverVersion
	}
	loggedAuto, loggedNoGPU := false, false
	for i := range s.spec.Plan.Cells {
		c := &s.spec.Plan.Cells[i]
		p := &c.Params
		backend := p.Engine
		if backend == "auto" && s.slurm != nil {
			backend = "cpu"
			if s.slurm.gpus > 0 {
				backend = "cuda"
			}
			if !loggedAuto {
				s.log.Info().Str("backend", backend).Str("gres", s.slurm.gres).Msg("engine auto under Slurm: cuda when the tasks ask for GPUs (--gres gpu:N), else cpu")
				loggedAuto = true
			}
		}
		if backend == "auto" {
			backend = "cpu"
			if len(s.gpus) > 0 {
				backend = "cuda"
			}
			if !loggedAuto {
				if backend == "cuda" {
					s.log.Info().Int("gpus", len(s.gpus)).Str("gpu", s.gpus[0].Name).Msg("engine auto: running on the GPU (cuda backend)")
				} else {
					s.log.Info().Str("why", s.noGPU).Msg("engine auto: no usable GPU, running on the cpu backend")
				}
				loggedAuto = true
			}
		}
		if sel[i] {
			// engine auto became cuda only now: float32 is refused there.
			if err := c.CheckBackend(backend); err != nil {
				return err
			}
		}
		rc := &runCell{cell: c, selected: sel[i]}
		device := hostDevice()
		external := !builtinEngine(backend)
		if s.slurm != nil {
			// Checked against the tasks' GPUs once the plan is built.
			device = s.slurm.device()
		} else if external && len(s.gpus) == 0 {
			// An external engine's tool says for itself whether it needs a
			// GPU; its cells run one at a time, as CPU cells do.
			if !loggedNoGPU {
				s.log.Warn().Str("engine", backend).Str("why", s.noGPU).Msg("no usable GPU: cells of external engines run without one")
				loggedNoGPU = true
			}
		} else if backend == "cuda" || external {
			if len(s.gpus) == 0 {
				return fmt.Errorf("cell %s: engine cuda, but no GPU is usable: %s", c.ID, s.noGPU)
			}
			if sel[i] && p.GPUsPerCell > len(s.gpus) {
				return fmt.Errorf("cell %s needs %d GPUs (gpus_per_cell); only %d can be used", c.ID, p.GPUsPerCell, len(s.gpus))
			}
			rc.gpus = p.GPUsPerCell
			device = gpuDevice
		}
		timeout := p.Timeout
		if timeout <= 0 {
			timeout = DefaultCellTimeout
		}
		s.plan.Cells = append(s.plan.Cells, workerCell{
			ID: c.ID, Hash: c.Hash,
			Fingerprint: fingerprint(c, s.spec.Repeats, build, s.engineIdentity(backend), device, s.switches()),
			Params:      c.Flat(),
			Engine:      engineConfig(c, backend),
			Dataset:     workerDatasetFor(c),
			Timeout:     timeout,
		})
		if external {
			s.plan.Cells[len(s.plan.Cells)-1].Driver = cellDriverParams(s.spec, c)
		}
		rc.wc = &s.plan.Cells[len(s.plan.Cells)-1]
		s.cells = append(s.cells, rc)
	}
	if s.slurm != nil {
		if err := s.slurm.planGPUs(s.cells); err != nil {
			return err
		}
		// The fingerprints name the GPUs the tasks ask for, known only
		// now.
		for _, rc := range s.cells {
			rc.wc.Fingerprint = fingerprint(rc.cell, s.spec.Repeats, build, s.engineIdentity(rc.wc.Engine.Backend), s.slurm.device(), s.switches())
		}
	}
	return nil
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

// engineConfig is a cell's engine configuration on backend.
func engineConfig(c *Cell, backend string) engine.Config {
	p := &c.Params
	return engine.Config{
		Model: absModel(c.ModelRef), Backend: backend, Dtype: p.Dtype,
		BatchSize: p.BatchSize, MaxNumTokens: p.MaxNumTokens, GemmPlugin: p.GemmPlugin,
		RoutingMode: p.RoutingMode, ProfileWindow: p.ProfileWindow, Seed: p.Seed, Warmup: p.Warmup,
		NumGPUs: p.GPUsPerCell, KVCacheFreeGPUMemFraction: p.KVCacheFreeGPUMemFraction,
	}
}

// absModel makes a model directory absolute, so a worker in another
// directory (or on another host sharing the filesystem) finds it; zoo
// names stay names.
func absModel(ref string) string {
	if _, ok := engine.ZooModel(ref); ok {
		return ref
	}
	if a, err := filepath.Abs(ref); err == nil {
		return a
	}
	return ref
}

// workerDatasetFor turns a cell's dataset parameters into what its worker
// loads.
func workerDatasetFor(c *Cell) workerDataset {
	d := c.Params.Dataset
	wd := workerDataset{ID: c.Dataset.ID, Vocab: c.Model.Vocab}
	if d.Kind() == GenFile {
		wd.File = c.DatasetFile
		if a, err := filepath.Abs(c.DatasetFile); err == nil {
			wd.File = a
		}
		return wd
	}
	g := &dsets.Params{
		Dist: d.Generator, NumRequests: d.NumRequests,
		InputMean: d.InputMean, InputStdev: d.InputStdev, OutputMean: d.OutputMean, OutputStdev: d.OutputStdev,
		InputMin: d.InputMin, InputMax: d.InputMax, OutputMin: d.OutputMin, OutputMax: d.OutputMax,
		Seed: int64(d.Seed), VocabSize: d.VocabSize, EOSID: d.EOSID,
		// The model's special tokens (Llama-3's EOS among them) may lie
		// beyond the base vocabulary token ids are drawn from.
		FullVocabSize: max(c.Model.Vocab, d.VocabSize),
	}
	if d.RandTaskID.Set {
		g.LoRA = &dsets.LoRAParams{TaskID: -1, Rand: &[2]int{d.RandTaskID.Min, d.RandTaskID.Max}}
	}
	wd.Generate = g
	return wd
}

// loadRecords finds the cells an earlier run completed with the same
// fingerprint: those are not run again.
func (s *study) loadRecords() {
	for _, rc := range s.cells {
		rec, err := readCellRecord(s.dir, rc.cell.ID)
		switch {
		case err != nil:
			s.log.Warn().Err(err).Str("cell", rc.cell.ID).Msg("ignoring an unreadable cell record; the cell runs again")
		case rec == nil:
		case rec.Fingerprint != rc.wc.Fingerprint:
			s.log.Debug().Str("cell", rc.cell.ID).Msg("earlier record has another fingerprint (parameters, build, backend or device changed)")
		case rec.Status == results.StatusOK || !rc.selected:
			rc.record = rec
		}
		if rc.todo() {
			kept, why := loadKeptRepeats(s.dir, rc.wc, s.plan.Repeats)
			rc.kept = kept
			if len(kept) > 0 {
				s.log.Info().Str("cell", rc.cell.ID).Int("repeats_kept", len(kept)).Int("repeats", s.plan.Repeats).Msg("repeats recorded by an earlier run are kept; the cell runs the rest")
			} else if why != "" {
				s.log.Debug().Str("cell", rc.cell.ID).Str("reason", why).Msg("repeats recorded by an earlier run are not kept")
			}
		}
	}
}

// todo reports whether this run runs the cell.
func (rc *runCell) todo() bool {
	return rc.selected && (rc.record == nil || rc.record.Status != results.StatusOK)
}

// prepareDatasets generates (or verifies) every dataset the cells to run
// need, and checks dataset files, before any cell starts: a bad dataset is
// reported once, as bad input, not once per cell. Files are checked first,
// so that a bad one costs no generation and leaves nothing in the cache; a
// generation stops at an interrupt, leaving no part of its file behind.
func (s *study) prepareDatasets(ctx context.Context) error {
	done := map[string]bool{}
	for _, rc := range s.cells {
		d := rc.wc.Dataset
		if !rc.todo() || d.Generate != nil {
			continue
		}
		if ctx.Err() != nil {
			return fmt.Errorf("preparing datasets: %w", ErrInterrupted)
		}
		key := fmt.Sprintf("%s\x00%d", d.File, d.Vocab)
		if done[key] {
			continue
		}
		done[key] = true
		st, err := dsets.CheckFile(d.File, d.Vocab)
		if err != nil {
			return fmt.Errorf("dataset %s: %w", d.ID, err)
		}
		if err := s.checkLongest(d.ID, d.File, st.Longest); err != nil {
			return err
		}
		s.log.Info().Str("dataset", d.ID).Str("path", d.File).Int("requests", st.Requests).Msg("dataset file checked")
	}
	for _, rc := range s.cells {
		d := rc.wc.Dataset
		if !rc.todo() || d.Generate == nil {
			continue
		}
		if ctx.Err() != nil {
			return fmt.Errorf("preparing datasets: %w", ErrInterrupted)
		}
		key := d.Generate.Key()
		if done[key] {
			continue
		}
		done[key] = true
		// The lengths are drawn before the costly token ids, so a request
		// longer than a model's positions stops the study before anything
		// is generated or run.
		longest, err := dsets.LongestRequest(*d.Generate)
		if err != nil {
			return fmt.Errorf("dataset %s: %w", d.ID, err)
		}
		if err := s.checkLongest(d.ID, dsets.Cache{Dir: s.plan.CacheDir}.FilePath(*d.Generate), longest); err != nil {
			return err
		}
		t0 := time.Now()
		e, err := dsets.Cache{Dir: s.plan.CacheDir}.EnsureContext(ctx, *d.Generate)
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("dataset %s: generation stopped, nothing kept: %w", d.ID, ErrInterrupted)
			}
			return fmt.Errorf("dataset %s: %w", d.ID, err)
		}
		ev := s.log.Debug()
		if e.Generated {
			ev = s.log.Info().Str("reason", e.Reason).Str("elapsed", fmtDur(time.Since(t0)))
		}
		ev.Str("dataset", d.ID).Str("path", e.Path).Int("requests", d.Generate.NumRequests).Msg("dataset ready")
	}
	return nil
}

// checkLongest refuses a dataset whose longest request does not fit the
// positions of a model that a cell to run serves it with (checkLengths:
// xrun's own engine; external engines size themselves to the dataset).
func (s *study) checkLongest(id, file string, l dsets.Longest) error {
	for _, rc := range s.cells {
		if rc.todo() && rc.wc.Dataset.ID == id {
			if err := checkLengths(rc.cell, file, l.Line, l.Input, l.Output); err != nil {
				return fmt.Errorf("dataset %s, cell %s: %w", id, rc.cell.ID, err)
			}
		}
	}
	return nil
}

// initResults lays out results.json: every planned cell, with its record
// where there is one, else as skipped with the reason.
func (s *study) initResults(ctx context.Context) {
	s.res = &results.Results{
		Name:        s.spec.Name,
		Description: s.spec.Description,
		Spec:        specJSON(s.spec),
		SpecFile:    s.spec.File,
		SpecSets:    s.spec.Sets,
		Environment: Environment(ctx, s.spec.Dir, s.devs, s.gpus),
		Axes:        resultAxes(s.spec),
		Started:     time.Now(),
		OrderSeed:   s.seed,
		Cells:       make([]results.Cell, 0, len(s.cells)),
	}
	s.res.Environment.Engines = s.engineTools()
	s.res.Environment.Switches = s.switches()
	for _, c := range s.spec.Compare {
		s.res.Compare = append(s.res.Compare, results.CompareSpec{Axis: c.Axis, Baseline: c.Baseline})
	}
	var prior map[string]*results.Roofline
	if s.o.Resume {
		// The study began with the first run of it.
		if old, err := results.ReadFile(filepath.Join(s.dir, layout.JSONFile)); err == nil {
			if old.Started.Before(s.res.Started) && !old.Started.IsZero() {
				s.res.Started = old.Started
			}
			prior = keptRooflines(old, s.cells)
		}
	}
	s.byID = map[string]int{}
	for _, rc := range s.cells {
		var c results.Cell
		switch {
		case rc.todo():
			c = results.Cell{Status: results.StatusSkipped, Error: notRunYet}
			if s.o.Resume {
				if c.Repeats = keptMetrics(s.dir, rc.wc, s.plan.Repeats); len(c.Repeats) > 0 {
					c.Error += fmt.Sprintf(" (%d of %d repeats kept from an earlier run)", len(c.Repeats), s.plan.Repeats)
				}
			}
		case rc.record != nil:
			c = rc.record.Cell
			// The previous results.json's roofline (keptRooflines): a
			// record is kept only under the same build, so its records
			// would give the same one, and they may be gone. Without it,
			// attachRooflines computes one.
			c.Roofline = prior[rc.cell.ID]
		case rc.selected:
			c = results.Cell{Status: results.StatusSkipped, Error: "not run"}
		default:
			c = results.Cell{Status: results.StatusSkipped, Error: "not selected by --only"}
		}
		c.ID, c.Params, c.Summary = rc.cell.ID, rc.wc.Params, nil
		s.byID[c.ID] = len(s.res.Cells)
		s.res.Cells = append(s.res.Cells, c)
	}
}

// specJSON is the spec the plan was built from, as a JSON object.
func specJSON(spec *Spec) json.RawMessage {
	var v any
	if err := yaml.Unmarshal(spec.Effective, &v); err == nil {
		if b, err := json.Marshal(v); err == nil {
			return b
		}
	}
	return json.RawMessage("{}")
}

// resultAxes lists the parameters that vary between cells with their
// values in the spec's order, as results.json's axes.
func resultAxes(spec *Spec) []results.Axis {
	var out []results.Axis
	for _, key := range spec.Plan.Varying {
		var order []any
		seen := map[string]bool{}
		add := func(v any) {
			if k := formatValue(v); !seen[k] {
				seen[k] = true
				order = append(order, v)
			}
		}
		for _, ax := range spec.Axes {
			if k := slices.Index(ax.Keys, key); k >= 0 {
				for _, row := range ax.Values {
					add(row[k])
				}
			}
		}
		// Keep the values cells have, in the spec's order, then those only
		// include entries brought.
		present := map[string]any{}
		var extra []any
		for i := range spec.Plan.Cells {
			if v, ok := spec.Plan.Cells[i].Flat()[key]; ok {
				k := formatValue(v)
				if _, dup := present[k]; !dup {
					present[k] = v
					if !seen[k] {
						extra = append(extra, v)
					}
				}
			}
		}
		var values []any
		for _, v := range order {
			if pv, ok := present[formatValue(v)]; ok {
				values = append(values, pv)
			}
		}
		values = append(values, extra...)
		if len(values) > 1 {
			out = append(out, results.Axis{Name: key, Values: values})
		}
	}
	return out
}

// write rewrites results.json and results.md (atomically); a failure is
// logged and remembered. Once a write has failed no more cells start (see
// halted): what they measured could not be recorded.
func (s *study) write() {
	s.res.Finished = time.Now()
	s.attachRooflines()
	write := s.writeResults
	if write == nil {
		write = results.WriteDir
	}
	if err := write(s.dir, s.res); err != nil {
		s.lastErr = err
		s.log.Error().Err(err).Str("dir", s.dir).Msg("writing results")
		s.stop(writeFailure("writing results", err))
		return
	}
	s.lastErr = nil
	// report.html is drawn from what was just written; xrun report --format
	// html draws it again, so a failure is logged and stops nothing.
	if err := htmlreport.WriteDir(s.dir, s.res, htmlreport.Options{Stage: profile.MoEStage}); err != nil {
		s.log.Warn().Err(err).Str("dir", s.dir).Msg("writing " + layout.HTMLFile)
	}
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
		lx := &localExecutor{exe: s.o.Executable, env: s.o.Env, dir: absDir, grace: s.o.KillGrace}
		if s.limit != nil {
			lx.deadline = s.limit.deadline
		}
		x = s.busyCheck(lx)
	}
	return &gpuScheduler{gpus: s.gpus, cell: x, limit: s.limit, paces: s.paces()}, nil
}

// record merges one cell's outcome into the results and writes them.
func (s *study) record(rc *runCell, o outcome) {
	c := &s.res.Cells[s.byID[rc.cell.ID]]
	switch {
	case o.rec != nil:
		*c = o.rec.Cell
		if n := len(c.Repeats); c.Status == results.StatusFailed && n > 0 {
			c.Error += fmt.Sprintf("; %d of %d repeats kept (xrun run --resume runs the rest)", n, s.plan.Repeats)
		}
	case o.interrupted:
		// The repeats the worker recorded are kept, and shown.
		kept := keptMetrics(s.dir, rc.wc, s.plan.Repeats)
		note := interruptedNote(len(kept), s.plan.Repeats, rc.wc)
		if o.timeLimit != nil {
			note = stoppedNote(len(kept), s.plan.Repeats, rc.wc)
			s.limitStopped(o.timeLimit)
			s.log.Warn().Str("cell", rc.cell.ID).Fields(o.timeLimit.fields()).Int("repeats_kept", len(kept)).
				Msg("not started: it would not finish before the time limit (xrun run --resume runs it)")
		}
		*c = results.Cell{Status: results.StatusSkipped, Error: note,
			Repeats: kept, Artifacts: existingArtifacts(s.dir, rc.cell.ID)}
	default:
		kept := keptMetrics(s.dir, rc.wc, s.plan.Repeats)
		*c = results.Cell{Status: results.StatusFailed, Error: o.failure, Repeats: kept, Artifacts: existingArtifacts(s.dir, rc.cell.ID)}
		if len(kept) > 0 {
			c.Error += fmt.Sprintf("; %d of %d repeats kept (xrun run --resume runs the rest)", len(kept), s.plan.Repeats)
		}
	}
	// The plan's parameters are authoritative (JSON would turn the
	// record's integers into floats), and summaries are the writer's.
	c.ID, c.Params, c.Summary = rc.cell.ID, rc.wc.Params, nil
	switch {
	case o.writeErr != nil:
		s.stop(writeFailure("cell "+rc.cell.ID, o.writeErr))
	case c.Status == results.StatusFailed && strings.Contains(c.Error, syscall.ENOSPC.Error()):
		// The worker's own failure to write its records comes as text.
		s.stop(fmt.Errorf("the disk is full: cell %s could not record what it measured: %w", rc.cell.ID, syscall.ENOSPC))
	}
	s.progress.CellFinished(rc.cell.ID, c.Status, o.elapsed)
	switch c.Status {
	case results.StatusOK:
		ev := s.log.Info().Str("cell", c.ID).Str("elapsed", fmtDur(o.elapsed))
		if sum := results.Summarize(column(c.Repeats, "system_output_throughput_tok_s")); sum.N > 0 {
			ev = ev.Float64("output_tok_s", sum.Median)
		}
		ev.Msg("cell ok")
	case results.StatusFailed:
		s.log.Warn().Str("cell", c.ID).Str("elapsed", fmtDur(o.elapsed)).Str("error", c.Error).Msg("cell failed")
	case results.StatusSkipped:
		if o.timeLimit != nil {
			s.log.Info().Str("cell", c.ID).Msg("cell stopped at the time limit")
			break
		}
		fallthrough
	default:
		s.log.Info().Str("cell", c.ID).Msg("cell interrupted")
	}
	s.write()
}

// notRunYet is the error of a cell waiting for its turn, until it runs or
// the study stops.
const notRunYet = "not run yet"

// interruptedNote is the error of a cell whose worker was interrupted
// after recording kept of its repeats.
func interruptedNote(kept, repeats int, c *workerCell) string {
	spans, _ := engine.ParseProfileWindow(c.Engine.ProfileWindow)
	switch {
	case kept == 0:
		return "not run: interrupted while running (xrun run --resume runs it)"
	case kept == repeats && len(spans) > 0:
		return fmt.Sprintf("interrupted after %d of %d repeats, in the profiled pass; xrun run --resume runs the profiled pass", kept, repeats)
	}
	return fmt.Sprintf("interrupted after %d of %d repeats; xrun run --resume runs the rest", kept, repeats)
}

func column(reps []results.Metrics, key string) []float64 {
	var out []float64
	for _, m := range reps {
		if v, ok := m[key]; ok {
			out = append(out, v)
		}
	}
	return out
}
