package runner

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	dsets "github.com/xrun-dev/xrun/datasets"
	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/command"
	"github.com/xrun-dev/xrun/engine/driver"
	"github.com/xrun-dev/xrun/engine/openai"
	"github.com/xrun-dev/xrun/engine/profile"
	"github.com/xrun-dev/xrun/engine/trtllm"
	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/atomicfile"
	"github.com/xrun-dev/xrun/results/layout"
)

// workerPlanVersion is the version of DIR/.xrun/plan.json. The worker
// refuses other versions: a worker of another build could otherwise
// misread a cell.
const workerPlanVersion = 1

// workerPlan is DIR/.xrun/plan.json: every planned cell, resolved so far
// that a worker needs nothing but the results directory and a cell id.
// The same command therefore runs a cell as a local child process or as a
// Slurm array task on another host sharing the directory.
type workerPlan struct {
	Version int    `json:"version"`
	Name    string `json:"name"`
	Spec    string `json:"spec"`
	Repeats int    `json:"repeats"`
	// CacheDir holds the generated datasets; a worker whose host lacks
	// them generates them there again (the cache verifies every file).
	CacheDir string       `json:"cache_dir"`
	Cells    []workerCell `json:"cells"`
	// Command and Trtllm are the spec's blocks for external engines.
	Command *command.Definition `json:"command,omitempty"`
	Trtllm  *trtllm.Options     `json:"trtllm,omitempty"`
	// OpenAI is the openai block (engine openai); SLO the study's
	// latency targets, which the goodput of every pass counts against.
	OpenAI *openai.Options `json:"openai,omitempty"`
	SLO    *engine.SLO     `json:"slo,omitempty"`
	// ThrottleThreshold is the throttle rule's fraction of the GPU's
	// maximum SM clock (xrun run --throttle-threshold; 0: the default).
	ThrottleThreshold float64 `json:"throttle_threshold,omitempty"`
}

// workerCell is one cell as its worker runs it.
type workerCell struct {
	ID   string `json:"id"`
	Hash string `json:"hash"`
	// Fingerprint is what --resume compares (see fingerprint); the worker
	// copies it into cell.json.
	Fingerprint string         `json:"fingerprint"`
	Params      map[string]any `json:"params"`
	// Engine is the engine configuration with the backend resolved and
	// paths absolute; Device is 0 because the worker sees only its own
	// GPUs (CUDA_VISIBLE_DEVICES).
	Engine  engine.Config `json:"engine"`
	Dataset workerDataset `json:"dataset"`
	// Timeout bounds the whole cell; the executor enforces it.
	Timeout time.Duration `json:"timeout_ns"`
	// Driver are an external engine's cell's parameters, all of them,
	// paths absolute (nil for the built-in engine).
	Driver driver.Params `json:"driver,omitempty"`
}

// workerDataset says where a cell's requests come from: a generator's
// parameters (through the cache) or a dataset file.
type workerDataset struct {
	ID       string        `json:"id"`
	Generate *dsets.Params `json:"generate,omitempty"`
	File     string        `json:"file,omitempty"`
	// Vocab is the model's vocabulary size every token id must be below.
	Vocab int `json:"vocab"`
}

// cellRecord is cells/<id>/cell.json: the cell's results.Cell as its worker
// measured it, and what xrun needs to trust it later. It is written last,
// atomically: a cell is complete exactly when its cell.json exists. Its
// repeats may have been measured by more than one worker process (an
// interrupted cell resumed; see worker_repeats.go): Sessions and Passes say
// which measured what, and the rest is the same as for a cell run in one go.
type cellRecord struct {
	results.Cell
	// Fingerprint is the plan's fingerprint of the cell this record
	// measured; --resume reuses the record only while it is unchanged.
	Fingerprint string `json:"fingerprint"`
	// Backend is the engine's backend and GEMM path, e.g.
	// "cpu/cpu_gemm_blocked_avx2_6x16".
	Backend string `json:"backend,omitempty"`
	// Host, Started and Finished are the worker's that recorded the cell.
	Host     string    `json:"host"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// Sessions are the worker processes that measured the cell, first to
	// last (the one that recorded it); more than one when an interrupted
	// or crashed cell was resumed.
	Sessions []workerSession `json:"sessions,omitempty"`
	// Ceilings are the roofline's ceilings the GPU backend measured, on a
	// GPU xrun knows none for (engine/profile reads them from here).
	Ceilings *engine.Ceilings `json:"ceilings,omitempty"`
	// MoEWeights is how the engine kept a MoE model's experts, moe_weights
	// resolved ("mxfp4" or "bf16"); absent for dense models and external
	// engines.
	MoEWeights string `json:"moe_weights,omitempty"`
	// Switches are the engine switches not at their defaults in the
	// worker's environment (engine.NonDefaultSwitches), name -> value.
	Switches map[string]string `json:"switches,omitempty"`
	// Tool, Build and Commands describe an external engine's cell: its
	// tool and version, what its engine was built with, and the distinct
	// commands it ran (commands.jsonl has every one).
	Tool     *driver.Tool      `json:"tool,omitempty"`
	Build    map[string]string `json:"build,omitempty"`
	Commands []driver.Command  `json:"commands,omitempty"`
	// Passes say which session ran each timed repeat, in order, and then
	// the profiled pass; earlier_session marks those kept from an earlier
	// worker.
	Passes []passOrigin `json:"passes,omitempty"`
}

// WorkerOptions adjust RunWorker.
type WorkerOptions struct {
	// Getenv reads the environment (XRUN_TEST_FAULT, the time limit);
	// nil means os.Getenv.
	Getenv func(string) string
	// Now is the clock the time limit and the repeats' records read; nil
	// means time.Now.
	Now func() time.Time
}

// RunWorker runs one cell of the study whose results directory is dir, as
// the plan in dir/.xrun/plan.json describes it: it reads the cell's
// dataset, creates the engine once, runs the timed repeats, recording each
// under cells/<id>/repeats/ as it finishes, then the profiled pass if the
// cell has a profile window, and writes the cell's artifacts and, last,
// cells/<id>/cell.json. Repeats an earlier worker of the cell recorded
// under the same fingerprint are kept: only the rest run (after the
// engine's warm-up, as every pass). A cell that fails (a bad model
// directory, a CUDA error, running out of memory) is still recorded, as
// failed with its error, and RunWorker returns nil; it returns an error
// only when it could not record the cell at all, or when ctx was cancelled
// (then the cell is not recorded; its recorded repeats stay for --resume).
// Under a time limit (the run's, passed in XRUN_DEADLINE, or the Slurm
// job's end) it does not start a pass predicted to end past it: it stops as
// when interrupted, leaves a note saying so, and returns ErrTimeLimit.
func RunWorker(ctx context.Context, dir, id string, o WorkerOptions) error {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	plan, err := readWorkerPlan(dir)
	if err != nil {
		return err
	}
	var cell *workerCell
	for i := range plan.Cells {
		if plan.Cells[i].ID == id {
			cell = &plan.Cells[i]
		}
	}
	if cell == nil {
		return fmt.Errorf("%s: no cell %q in the plan", filepath.Join(dir, layout.StateDir, layout.PlanFile), id)
	}
	cdir := layout.CellDir(dir, id)
	if err := os.MkdirAll(cdir, 0o755); err != nil {
		return err
	}
	// A record left by an earlier attempt must not pass for this one.
	if err := os.Remove(filepath.Join(cdir, layout.CellFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	host, _ := os.Hostname()
	sess := workerSession{Host: host, PID: os.Getpid(), Started: time.Now().UTC()}
	kept, dropped := loadKeptRepeats(dir, cell, plan.Repeats)
	// The log goes on where an earlier worker's, whose repeats are kept,
	// stopped.
	flags := os.O_CREATE | os.O_WRONLY | os.O_APPEND
	if len(kept) == 0 {
		flags |= os.O_TRUNC
	}
	logf, err := os.OpenFile(filepath.Join(cdir, layout.LogFile), flags, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	log := zerolog.New(logf).With().Timestamp().Str("cell", id).Logger()
	if dropped != "" {
		log.Warn().Str("reason", dropped).Int("kept", len(kept)).Msg("repeats recorded earlier are not kept; they are measured again")
	}
	if err := pruneRepeats(dir, id, len(kept)); err != nil {
		return fmt.Errorf("cell %s: clearing repeats not kept: %w", id, err)
	}

	rec := &cellRecord{
		Cell:        results.Cell{ID: id, Params: cell.Params, Status: results.StatusOK},
		Fingerprint: cell.Fingerprint,
		Host:        host,
		Started:     sess.Started,
		Switches:    engine.NonDefaultSwitches(o.Getenv),
	}
	log.Info().Str("fingerprint", cell.Fingerprint).Str("backend", cell.Engine.Backend).
		Str("cuda_visible_devices", o.Getenv("CUDA_VISIBLE_DEVICES")).Int("repeats", plan.Repeats).Int("repeats_kept", len(kept)).Msg("cell started")
	w := &cellWorker{dir: dir, cell: cell, plan: plan, getenv: o.Getenv, repeats: plan.Repeats, cacheDir: plan.CacheDir, log: log, rec: rec,
		fault: faultFor(o.Getenv(FaultEnv), id), session: sess, done: kept, telOrigin: sess.Started, now: o.Now}
	w.took, w.fault = passTimeFault(w.fault)
	if w.limit, err = workerBudget(o.Getenv, w.clock); err != nil {
		return err
	}
	if len(kept) > 0 && !kept[0].TelemetryOrigin.IsZero() {
		w.telOrigin = kept[0].TelemetryOrigin
	}
	// GPU telemetry (NVML, every 50 ms) over the whole cell, cut into a
	// segment per repeat so that each is recorded with its repeat.
	if cell.Engine.Backend != "cpu" {
		w.tel, w.telStart = profile.StartTelemetry(0), time.Now()
	}
	err = w.measure(ctx)
	if ctx.Err() != nil {
		if w.tel != nil {
			w.tel.Stop()
		}
		log.Warn().Int("repeats_recorded", len(w.done)).Int("repeats", w.repeats).
			Msg("interrupted; the cell is not recorded, its recorded repeats are kept, and --resume runs the rest")
		return fmt.Errorf("cell %s: %w", id, ErrInterrupted)
	}
	if w.stopped != nil {
		return w.stopAtLimit()
	}
	if aerr := w.writeArtifacts(); aerr != nil && err == nil {
		err = aerr
	}
	for _, r := range w.done {
		rec.Repeats = append(rec.Repeats, r.Metrics)
	}
	if len(w.done) > 0 {
		rec.ExpertLoad = w.done[0].ExpertLoad
	}
	if err != nil {
		rec.Status, rec.Error = results.StatusFailed, err.Error()
		log.Error().Err(err).Msg("cell failed")
	}
	rec.Finished = time.Now().UTC()
	rec.Sessions, rec.Passes = w.origins()
	rec.Artifacts = w.artifacts
	if err := writeJSONAtomic(filepath.Join(cdir, layout.CellFile), rec); err != nil {
		return fmt.Errorf("cell %s: recording it: %w", id, err)
	}
	if rec.Status == results.StatusOK {
		// cell.json holds all they did; a failed cell keeps them for
		// --resume.
		if err := os.RemoveAll(repeatsDir(dir, id)); err != nil {
			log.Warn().Err(err).Msg("cannot remove the repeats directory")
		}
	}
	log.Info().Str("status", string(rec.Status)).Str("elapsed", fmtDur(rec.Finished.Sub(rec.Started))).Msg("cell recorded")
	return nil
}

func readWorkerPlan(dir string) (*workerPlan, error) {
	path := filepath.Join(dir, layout.StateDir, layout.PlanFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the plan: %w", err)
	}
	var p workerPlan
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if p.Version != workerPlanVersion {
		return nil, fmt.Errorf("%s: plan version %d; this xrun reads version %d (was it written by another xrun build?)", path, p.Version, workerPlanVersion)
	}
	return &p, nil
}

// cellWorker measures one cell.
type cellWorker struct {
	dir      string
	cell     *workerCell
	plan     *workerPlan
	getenv   func(string) string
	repeats  int
	cacheDir string
	log      zerolog.Logger
	rec      *cellRecord
	fault    string
	session  workerSession
	// done are the timed repeats recorded so far, in order: those an
	// earlier worker recorded first, then this one's.
	done []repeatRecord
	// profiledPass is the profiled pass, once run.
	profiledPass                      *engine.Result
	profiledStarted, profiledFinished time.Time
	artifacts                         []string
	// tel samples the GPUs since telStart (nil on the cpu backend); its
	// rows' times count from telOrigin, the cell's first worker's start.
	tel                 *profile.Telemetry
	telStart, telOrigin time.Time
	// external is the cell's external engine, if it has one.
	external driver.External
	// now is the clock; skew is added to it, took more after every pass
	// (a test fault: passes that take minutes without taking them).
	now        func() time.Time
	skew, took time.Duration
	// limit is the time limit (nil: none); setup how long this worker took
	// to get ready for its first pass; stopped says which step the limit
	// left unstarted.
	limit   *budget
	setup   time.Duration
	stopped *timeLimitNote
}

// clock is the worker's time.
func (w *cellWorker) clock() time.Time { return w.now().Add(w.skew) }

func (w *cellWorker) measure(ctx context.Context) error {
	spans, _ := engine.ParseProfileWindow(w.cell.Engine.ProfileWindow)
	profiled := len(spans) > 0
	if len(w.done) > 0 && len(w.done) == w.repeats && !profiled {
		// Earlier workers measured everything; only the record is missing.
		// This worker's few samples of an idle GPU would only dilute
		// the telemetry of the repeats.
		if w.tel != nil {
			w.tel.Stop()
			w.tel = nil
		}
		w.rec.Backend = w.done[0].Backend
		w.log.Info().Int("repeats_kept", len(w.done)).Msg("every repeat was recorded earlier; recording the cell")
		return nil
	}
	// The engine is not even created for a first pass that would not
	// finish in time.
	if err := w.mayStart(nextStep(w.done, w.repeats, profiled, true)); err != nil {
		return err
	}
	ready := w.clock()
	reqs, path, err := w.requests(ctx)
	if err != nil {
		return err
	}
	t0 := time.Now()
	e, err := w.openEngine(ctx, path, reqs)
	if err != nil {
		return fmt.Errorf("creating the engine: %w", err)
	}
	defer e.Close()
	if x, ok := e.(driver.External); ok {
		// Recorded as the engine runs: a failed pass still says what ran.
		w.external = x
		defer w.recordExternal()
	}
	w.setup = w.clock().Sub(ready)
	w.rec.Backend = e.Backend()
	if cr, ok := e.(engine.CeilingsReporter); ok {
		if c := cr.Ceilings(); c != nil {
			w.rec.Ceilings = c
			w.log.Info().Float64("bytes_per_s", c.BytesPerSec).Float64("flop_per_s", c.FLOPs).Str("source", c.Source).
				Msg("roofline ceilings measured on this GPU (none known for it, or XRUN_MEASURE_CEILINGS=1)")
		}
	}
	if er, ok := e.(engine.ExpertsReporter); ok {
		w.rec.MoEWeights = er.MoEWeights()
	}
	w.log.Info().Str("backend", e.Backend()).Str("elapsed", fmtDur(time.Since(t0))).Int("requests", len(reqs)).Msg("engine ready")
	if len(w.done) > 0 && w.done[0].Backend != e.Backend() {
		// Not in the fingerprint: a path the backend chose on this host,
		// say. Repeats of two GEMM paths must not be mixed.
		w.log.Warn().Str("recorded", w.done[0].Backend).Str("now", e.Backend()).Msg("the repeats recorded earlier ran on another backend; measuring them again")
		w.done, w.telOrigin = nil, w.session.Started
		if err := pruneRepeats(w.dir, w.cell.ID, 0); err != nil {
			return fmt.Errorf("clearing repeats not kept: %w", err)
		}
	}
	if err := injectFault(ctx, faultAt(w.fault, "")); err != nil {
		return err
	}
	for r := len(w.done); r < w.repeats; r++ {
		if err := w.mayStart(nextStep(w.done, w.repeats, profiled, false)); err != nil {
			return err
		}
		started, passStart := w.clock().UTC(), time.Now()
		res, err := e.Run(ctx, reqs, engine.RunOptions{})
		if err == nil {
			addServingMetrics(res, w.cell.Engine.Load, w.plan.SLO)
		}
		w.skew += w.took
		if err != nil {
			return fmt.Errorf("repeat %d of %d: %w", r+1, w.repeats, err)
		}
		if err := w.recordRepeat(ctx, r+1, res, started, passStart); err != nil {
			return fmt.Errorf("repeat %d of %d: recording it: %w", r+1, w.repeats, err)
		}
		w.log.Info().Int("repeat", r+1).Float64("request_throughput_req_s", res.Metrics["request_throughput_req_s"]).
			Float64("system_output_throughput_tok_s", res.Metrics["system_output_throughput_tok_s"]).Msg("repeat done")
		if err := injectFault(ctx, faultAt(w.fault, "r"+strconv.Itoa(r+1))); err != nil {
			return err
		}
	}
	if profiled {
		if err := w.mayStart(nextStep(w.done, w.repeats, profiled, false)); err != nil {
			return err
		}
		if err := injectFault(ctx, faultAt(w.fault, "profile")); err != nil {
			return err
		}
		// The profiled pass is extra: its timings carry the profiler's
		// cost, so they never join the repeats. On xrun's own engine it
		// stops after its window: the rest would cost a pass and show
		// nothing (the profiling cost is compared where it profiled).
		started := w.clock().UTC()
		res, err := e.Run(ctx, reqs, engine.RunOptions{Profile: true, StopAfterWindow: w.external == nil})
		w.skew += w.took
		if err != nil {
			return fmt.Errorf("profiled pass: %w", err)
		}
		w.profiledPass, w.profiledStarted, w.profiledFinished = res, started, w.clock().UTC()
		popt := profile.Options{Window: w.cell.Engine.ProfileWindow, Top: math.MaxInt, Device: profile.MeasuredDevice(w.rec.Ceilings),
			Split: cellSplit(w.cell.Params), Formats: passFormats(w.cell.Params, w.cell.Engine, e)}
		var p *profile.PassSummary
		var files []string
		if w.external != nil {
			// An external profiler's kernel summary, not per-kernel records.
			p, files, err = profile.SummaryArtifacts(res, e.Model(), popt)
		} else {
			p, files, err = profile.WriteArtifacts(layout.CellDir(w.dir, w.cell.ID), res, e.Model(), popt)
		}
		if err != nil {
			return fmt.Errorf("profile artifacts: %w", err)
		}
		w.rec.Profile = topKernels(profileRecord(p), profile.DefaultTopKernels)
		for _, f := range files {
			w.artifacts = append(w.artifacts, layout.CellArtifact(w.cell.ID, f))
		}
		w.rec.Profile.PassMetrics = results.Metrics(res.Metrics)
		timedFirst := 0
		for _, d := range w.done {
			timedFirst = max(timedFirst, d.FirstTimedIteration)
		}
		w.rec.Profile.WarmupIterations, w.rec.Profile.FirstTimedIteration = profiledWarmup(res.Iterations, timedFirst)
		if _, mean := windowTiming(res, spans); mean > 0 {
			var timed []float64
			for _, d := range w.done {
				if d.WindowIterationNs > 0 {
					timed = append(timed, d.WindowIterationNs)
				}
			}
			w.rec.Profile.WindowIterationNs = mean
			if len(timed) > 0 {
				w.rec.Profile.TimedWindowIterationNs = results.Median(timed)
			}
		}
		w.log.Info().Int("ops", len(res.Ops)).Float64("system_output_throughput_tok_s", res.Metrics["system_output_throughput_tok_s"]).Msg("profiled pass done")
	}
	return nil
}

// profiledWarmup counts the profiled iterations that ran warm-up
// requests and finds the first timed iteration; 0, 0 when none did. A pass
// that stopped after its window inside the warm-up recorded no timed
// iteration: the first is then timedFirst, where the timed repeats' began
// (firstTimedIteration), or 0, unknown, when they say nothing past its
// last iteration. Its last warm-up iteration plus one would be a guess,
// and a window moved there would profile the warm-up again.
func profiledWarmup(its []engine.IterationRecord, timedFirst int) (warm, firstTimed int) {
	lastWarm := -1
	for _, r := range its {
		if r.Warmup {
			lastWarm = max(lastWarm, r.Index)
			if r.Profiled {
				warm++
			}
		}
	}
	if warm == 0 {
		return 0, 0
	}
	if firstTimed = firstTimedIteration(its); firstTimed == 0 && timedFirst > lastWarm {
		firstTimed = timedFirst
	}
	return warm, firstTimed
}

// firstTimedIteration is the first iteration of the timed requests in a
// pass with a warm-up; 0 when it has no warm-up or never left it.
func firstTimedIteration(its []engine.IterationRecord) int {
	warm := false
	for _, r := range its {
		if r.Warmup {
			warm = true
		} else if warm {
			return r.Index
		}
	}
	return 0
}

// profileRecord is a profiled pass's summary as results.json records it,
// with every kernel the summary kept.
func profileRecord(p *profile.PassSummary) *results.Profile {
	out := &results.Profile{Window: p.Window, Iterations: p.Iterations, Diagnosis: p.Diagnosis, Stats: p.Stats}
	for _, k := range p.Kernels {
		// The same fields: a field added to one alone stops the build.
		out.Kernels = append(out.Kernels, results.Kernel(k))
	}
	return out
}

// topKernels keeps the top n of a profile's kernels in full and, so that
// a kernel diff between cells (results.md, xrun diff) knows every kernel
// each ran, the others by name, time and launches, with their count.
func topKernels(p *results.Profile, n int) *results.Profile {
	n = min(n, len(p.Kernels))
	p.DistinctKernels = len(p.Kernels)
	for _, k := range p.Kernels[n:] {
		p.OtherKernels = append(p.OtherKernels, results.KernelTime{Name: k.Name, TotalNs: k.TotalNs, Instances: k.Instances, ExclusiveNs: k.ExclusiveNs})
	}
	p.Kernels = p.Kernels[:n]
	return p
}

// requests loads the cell's dataset: a generated one through the cache
// (which verifies it, and generates it again where it is missing), or the
// user's file, checked against the model's vocabulary.
func (w *cellWorker) requests(ctx context.Context) ([]dsets.Request, string, error) {
	d := w.cell.Dataset
	path := d.File
	if d.Generate != nil {
		// A worker on another host (Slurm) may have to generate it again;
		// an interrupt stops that too.
		e, err := dsets.Cache{Dir: w.cacheDir}.EnsureContext(ctx, *d.Generate)
		if err != nil {
			return nil, "", fmt.Errorf("dataset %s: %w", d.ID, err)
		}
		if e.Generated {
			w.log.Info().Str("path", e.Path).Str("reason", e.Reason).Msg("dataset generated")
		}
		path = e.Path
	}
	reqs, err := dsets.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("dataset %s: %w", d.ID, err)
	}
	if d.Vocab > 0 {
		if err := dsets.CheckVocab(reqs, d.Vocab); err != nil {
			return nil, "", fmt.Errorf("dataset %s: %w", d.ID, err)
		}
	}
	return reqs, path, nil
}

// expertLoad summarises a MoE cell's routing for results.json: the mean
// max/mean load over timed iterations and the tokens each expert received,
// summed over layers and timed iterations.
func expertLoad(l *engine.ExpertLoad) *results.ExpertLoad {
	out := &results.ExpertLoad{MaxOverMean: l.MaxOverMean, TotalMaxOverMean: l.TotalMaxOverMean, Histogram: make([]int64, l.Experts)}
	for i := range l.Iterations {
		if i < len(l.Warmup) && l.Warmup[i] {
			continue
		}
		for layer := range l.Layers {
			for x, n := range l.At(i, layer) {
				out.Histogram[x] += int64(n)
			}
		}
	}
	return out
}

// writeArtifacts writes what the passes recorded: every request (with its
// generated token ids, like trtllm-bench's --request_json), every engine
// iteration, a MoE cell's expert load and the GPU telemetry, from the
// recorded repeats' files and the profiled pass. Each file is written
// whole and renamed into place.
func (w *cellWorker) writeArtifacts() error {
	cdir := layout.CellDir(w.dir, w.cell.ID)
	// Appended to: the profile's files are listed already.
	w.artifacts = append(w.artifacts, layout.CellArtifact(w.cell.ID, layout.LogFile))
	if err := w.writeTelemetry(); err != nil {
		// Telemetry describes the measurement; it never fails it.
		w.log.Warn().Err(err).Msg("no GPU telemetry: writing " + layout.TelemetryFile)
	}
	if len(w.done) == 0 && w.profiledPass == nil {
		return nil
	}
	profiledPass := func(out io.Writer, write func(io.Writer, int, bool, *engine.Result) error) error {
		if w.profiledPass == nil {
			return nil
		}
		return write(out, len(w.done), true, w.profiledPass)
	}
	err := atomicfile.Write(filepath.Join(cdir, layout.RequestsFile), func(out io.Writer) error {
		if err := w.copyRepeatFiles(out, layout.RequestsFile); err != nil {
			return err
		}
		return profiledPass(out, writePassRequests)
	})
	if err != nil {
		return fmt.Errorf("writing %s: %w", layout.RequestsFile, err)
	}
	err = atomicfile.Write(filepath.Join(cdir, layout.IterationsFile), func(out io.Writer) error {
		if _, err := io.WriteString(out, iterationsHeader); err != nil {
			return err
		}
		if err := w.copyRepeatFiles(out, layout.IterationsFile); err != nil {
			return err
		}
		return profiledPass(out, writePassIterations)
	})
	if err != nil {
		return fmt.Errorf("writing %s: %w", layout.IterationsFile, err)
	}
	w.artifacts = append(w.artifacts, layout.CellArtifact(w.cell.ID, layout.RequestsFile), layout.CellArtifact(w.cell.ID, layout.IterationsFile))
	if len(w.done) > 0 && w.done[0].ExpertLoad != nil {
		err := atomicfile.Write(filepath.Join(cdir, layout.ExpertLoadFile), func(out io.Writer) error { return w.copyRepeatFiles(out, layout.ExpertLoadFile) })
		if err != nil {
			return fmt.Errorf("writing %s: %w", layout.ExpertLoadFile, err)
		}
		w.artifacts = append(w.artifacts, layout.CellArtifact(w.cell.ID, layout.ExpertLoadFile))
	}
	return nil
}

// writeTelemetry ends the telemetry and writes telemetry.csv — the
// recorded repeats' segments and the rest of this worker's (the profiled
// pass) — and, for results.json, the summary of the timed repeats.
func (w *cellWorker) writeTelemetry() error {
	tail := w.cutTelemetry(false).rows
	var parts []*results.Telemetry
	for _, r := range w.done {
		parts = append(parts, r.Telemetry)
	}
	w.rec.Telemetry = mergeTelemetry(parts, w.plan.ThrottleThreshold)
	if w.rec.Telemetry == nil && len(tail) == 0 {
		if w.tel != nil {
			w.log.Warn().Str("reason", w.tel.Reason()).Msg("no GPU telemetry")
		}
		return nil
	}
	var header bytes.Buffer
	profile.WriteTelemetryCSV(&header, nil)
	err := atomicfile.Write(filepath.Join(layout.CellDir(w.dir, w.cell.ID), layout.TelemetryFile), func(out io.Writer) error {
		if _, err := out.Write(header.Bytes()); err != nil {
			return err
		}
		if err := w.copyRepeatFiles(out, layout.TelemetryFile); err != nil {
			return err
		}
		_, err := out.Write(tail)
		return err
	})
	if err != nil {
		return err
	}
	w.artifacts = append(w.artifacts, layout.CellArtifact(w.cell.ID, layout.TelemetryFile))
	return nil
}

// writeExpertLoad writes the tokens each expert received, per engine
// iteration and MoE layer, of the first timed pass (routing is seeded, so
// every repeat routes alike): iteration,warmup,layer,max_over_mean, then one
// column per expert.
func writeExpertLoad(out io.Writer, l *engine.ExpertLoad) error {
	bw := bufio.NewWriterSize(out, 1<<16)
	bw.WriteString("iteration,warmup,layer,max_over_mean")
	for x := range l.Experts {
		fmt.Fprintf(bw, ",expert_%d", x)
	}
	bw.WriteByte('\n')
	var b []byte
	for i, iter := range l.Iterations {
		warm := i < len(l.Warmup) && l.Warmup[i]
		for layer := range l.Layers {
			counts := l.At(i, layer)
			var sum, most int64
			for _, n := range counts {
				sum += int64(n)
				most = max(most, int64(n))
			}
			ratio := 0.0
			if sum > 0 {
				ratio = float64(most) * float64(len(counts)) / float64(sum)
			}
			b = strconv.AppendInt(b[:0], int64(iter), 10)
			b = append(b, ',')
			b = strconv.AppendBool(b, warm)
			b = append(b, ',')
			b = strconv.AppendInt(b, int64(layer), 10)
			b = append(b, ',')
			b = strconv.AppendFloat(b, ratio, 'g', 6, 64)
			for _, n := range counts {
				b = append(b, ',')
				b = strconv.AppendInt(b, int64(n), 10)
			}
			b = append(b, '\n')
			bw.Write(b)
		}
	}
	return bw.Flush()
}

// requestLine is one line of requests.jsonl. Pass counts the timed repeats
// from 0; the profiled pass, when there is one, comes last.
type requestLine struct {
	Pass     int  `json:"pass"`
	Profiled bool `json:"profiled"`
	engine.RequestRecord
}

const iterationsHeader = "pass,profiled,iteration,ctx_requests,ctx_tokens,gen_requests,start_ns,duration_ns,warmup,in_window\n"

// recordExternal puts what an external engine ran into the cell's record.
func (w *cellWorker) recordExternal() {
	x := w.external
	t := x.Tool()
	w.rec.Tool, w.rec.Build, w.rec.Commands = &t, x.Build(), x.Commands()
	if _, err := os.Stat(filepath.Join(layout.CellDir(w.dir, w.cell.ID), layout.CommandsFile)); err == nil {
		w.artifacts = append(w.artifacts, layout.CellArtifact(w.cell.ID, layout.CommandsFile))
	}
}
