package runner

import (
	"bufio"
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
	"github.com/xrun-dev/xrun/engine/profile"
	"github.com/xrun-dev/xrun/results"
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
// atomically: a cell is complete exactly when its cell.json exists.
type cellRecord struct {
	results.Cell
	// Fingerprint is the plan's fingerprint of the cell this record
	// measured; --resume reuses the record only while it is unchanged.
	Fingerprint string `json:"fingerprint"`
	// Backend is the engine's backend and GEMM path, e.g.
	// "cpu/cpu_gemm_blocked_avx2_6x16".
	Backend  string    `json:"backend,omitempty"`
	Host     string    `json:"host"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
}

// WorkerOptions adjust RunWorker.
type WorkerOptions struct {
	// Getenv reads the environment (XRUN_TEST_FAULT); nil means os.Getenv.
	Getenv func(string) string
}

// RunWorker runs one cell of the study whose results directory is dir, as
// the plan in dir/.xrun/plan.json describes it: it reads the cell's
// dataset, creates the engine once, runs the timed repeats and then the
// profiled pass if the cell has a profile window, and writes the cell's
// artifacts and, last, cells/<id>/cell.json. A cell that fails (a bad model
// directory, a CUDA error, running out of memory) is still recorded, as
// failed with its error, and RunWorker returns nil; it returns an error
// only when it could not record the cell at all, or when ctx was cancelled
// (then nothing is recorded and the cell runs again on --resume).
func RunWorker(ctx context.Context, dir, id string, o WorkerOptions) error {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
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
		return fmt.Errorf("%s: no cell %q in the plan", filepath.Join(dir, StateDir, PlanFile), id)
	}
	cdir := CellDir(dir, id)
	if err := os.MkdirAll(cdir, 0o755); err != nil {
		return err
	}
	// A record left by an earlier attempt must not pass for this one.
	if err := os.Remove(filepath.Join(cdir, CellFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	logf, err := os.Create(filepath.Join(cdir, LogFile))
	if err != nil {
		return err
	}
	defer logf.Close()
	log := zerolog.New(logf).With().Timestamp().Str("cell", id).Logger()

	host, _ := os.Hostname()
	rec := &cellRecord{
		Cell:        results.Cell{ID: id, Params: cell.Params, Status: results.StatusOK},
		Fingerprint: cell.Fingerprint,
		Host:        host,
		Started:     time.Now().UTC(),
	}
	log.Info().Str("fingerprint", cell.Fingerprint).Str("backend", cell.Engine.Backend).
		Str("cuda_visible_devices", o.Getenv("CUDA_VISIBLE_DEVICES")).Int("repeats", plan.Repeats).Msg("cell started")
	w := &cellWorker{dir: dir, cell: cell, repeats: plan.Repeats, cacheDir: plan.CacheDir, log: log, rec: rec,
		fault: faultFor(o.Getenv(FaultEnv), id)}
	// GPU telemetry (NVML, every 50 ms) over the whole cell.
	var tel *profile.Telemetry
	if cell.Engine.Backend != "cpu" {
		tel = profile.StartTelemetry(0)
	}
	err = w.measure(ctx)
	if tel != nil {
		if sum, files, terr := tel.Finish(cdir); sum != nil && terr == nil {
			rec.Telemetry = sum
			w.artifacts = append(w.artifacts, cellArtifact(id, files[0]))
		} else {
			log.Warn().AnErr("error", terr).Str("reason", tel.Reason()).Msg("no GPU telemetry")
		}
	}
	if aerr := w.writeArtifacts(); aerr != nil && err == nil {
		err = aerr
	}
	if ctx.Err() != nil {
		log.Warn().Msg("interrupted; the cell is not recorded and runs again on --resume")
		return fmt.Errorf("cell %s: %w", id, ErrInterrupted)
	}
	if err != nil {
		rec.Status, rec.Error = results.StatusFailed, err.Error()
		log.Error().Err(err).Msg("cell failed")
	}
	rec.Finished = time.Now().UTC()
	rec.Artifacts = w.artifacts
	if err := writeJSONAtomic(filepath.Join(cdir, CellFile), rec); err != nil {
		return fmt.Errorf("cell %s: recording it: %w", id, err)
	}
	log.Info().Str("status", string(rec.Status)).Str("elapsed", fmtDur(rec.Finished.Sub(rec.Started))).Msg("cell recorded")
	return nil
}

func readWorkerPlan(dir string) (*workerPlan, error) {
	path := filepath.Join(dir, StateDir, PlanFile)
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
	repeats  int
	cacheDir string
	log      zerolog.Logger
	rec      *cellRecord
	fault    string
	// passes are the results of the passes run so far, timed repeats
	// first, then the profiled pass.
	passes    []*engine.Result
	profiled  bool
	artifacts []string
}

func (w *cellWorker) measure(ctx context.Context) error {
	reqs, err := w.requests()
	if err != nil {
		return err
	}
	t0 := time.Now()
	e, err := engine.New(ctx, w.cell.Engine)
	if err != nil {
		return fmt.Errorf("creating the engine: %w", err)
	}
	defer e.Close()
	w.rec.Backend = e.Backend()
	w.log.Info().Str("backend", e.Backend()).Str("elapsed", fmtDur(time.Since(t0))).Int("requests", len(reqs)).Msg("engine ready")
	if err := injectFault(w.fault); err != nil {
		return err
	}
	for r := range w.repeats {
		res, err := e.Run(ctx, reqs, engine.RunOptions{})
		if err != nil {
			return fmt.Errorf("repeat %d of %d: %w", r+1, w.repeats, err)
		}
		w.passes = append(w.passes, res)
		w.rec.Repeats = append(w.rec.Repeats, results.Metrics(res.Metrics))
		if r == 0 && res.ExpertLoad != nil {
			w.rec.ExpertLoad = expertLoad(res.ExpertLoad)
		}
		w.log.Info().Int("repeat", r+1).Float64("request_throughput_req_s", res.Metrics["request_throughput_req_s"]).
			Float64("system_output_throughput_tok_s", res.Metrics["system_output_throughput_tok_s"]).Msg("repeat done")
	}
	if spans, _ := engine.ParseProfileWindow(w.cell.Engine.ProfileWindow); len(spans) > 0 {
		// The profiled pass is extra: its timings carry the profiler's
		// cost, so they never join the repeats.
		res, err := e.Run(ctx, reqs, engine.RunOptions{Profile: true})
		if err != nil {
			return fmt.Errorf("profiled pass: %w", err)
		}
		w.passes = append(w.passes, res)
		w.profiled = true
		p, files, err := profile.WriteArtifacts(CellDir(w.dir, w.cell.ID), res, e.Model(), profile.Options{Window: w.cell.Engine.ProfileWindow, Top: math.MaxInt})
		if err != nil {
			return fmt.Errorf("profile artifacts: %w", err)
		}
		w.rec.Profile = topKernels(p, profile.DefaultTopKernels)
		for _, f := range files {
			w.artifacts = append(w.artifacts, cellArtifact(w.cell.ID, f))
		}
		w.rec.Profile.PassMetrics = results.Metrics(res.Metrics)
		w.log.Info().Int("ops", len(res.Ops)).Float64("system_output_throughput_tok_s", res.Metrics["system_output_throughput_tok_s"]).Msg("profiled pass done")
	}
	return nil
}

// topKernels keeps the top n of a profile's kernels in full and, so that
// a kernel diff between cells (results.md, xrun diff) knows every kernel
// each ran, the others by name, time and launches, with their count.
func topKernels(p *results.Profile, n int) *results.Profile {
	n = min(n, len(p.Kernels))
	p.DistinctKernels = len(p.Kernels)
	for _, k := range p.Kernels[n:] {
		p.OtherKernels = append(p.OtherKernels, results.KernelTime{Name: k.Name, TotalNs: k.TotalNs, Instances: k.Instances})
	}
	p.Kernels = p.Kernels[:n]
	return p
}

// requests loads the cell's dataset: a generated one through the cache
// (which verifies it, and generates it again where it is missing), or the
// user's file, checked against the model's vocabulary.
func (w *cellWorker) requests() ([]dsets.Request, error) {
	d := w.cell.Dataset
	path := d.File
	if d.Generate != nil {
		e, err := dsets.Cache{Dir: w.cacheDir}.Ensure(*d.Generate)
		if err != nil {
			return nil, fmt.Errorf("dataset %s: %w", d.ID, err)
		}
		if e.Generated {
			w.log.Info().Str("path", e.Path).Str("reason", e.Reason).Msg("dataset generated")
		}
		path = e.Path
	}
	reqs, err := dsets.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("dataset %s: %w", d.ID, err)
	}
	if d.Vocab > 0 {
		if err := dsets.CheckVocab(reqs, d.Vocab); err != nil {
			return nil, fmt.Errorf("dataset %s: %w", d.ID, err)
		}
	}
	return reqs, nil
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
// generated token ids, like trtllm-bench's --request_json) and every engine
// iteration. Each file is written whole and renamed into place.
func (w *cellWorker) writeArtifacts() error {
	cdir := CellDir(w.dir, w.cell.ID)
	// Appended to: the profile's and the telemetry's files are listed already.
	w.artifacts = append(w.artifacts, cellArtifact(w.cell.ID, LogFile))
	if len(w.passes) == 0 {
		return nil
	}
	if err := dsets.WriteFileAtomic(filepath.Join(cdir, RequestsFile), w.writeRequests); err != nil {
		return fmt.Errorf("writing %s: %w", RequestsFile, err)
	}
	if err := dsets.WriteFileAtomic(filepath.Join(cdir, IterationsFile), w.writeIterations); err != nil {
		return fmt.Errorf("writing %s: %w", IterationsFile, err)
	}
	w.artifacts = append(w.artifacts, cellArtifact(w.cell.ID, RequestsFile), cellArtifact(w.cell.ID, IterationsFile))
	if l := w.passes[0].ExpertLoad; l != nil {
		err := dsets.WriteFileAtomic(filepath.Join(cdir, ExpertLoadFile), func(out io.Writer) error { return writeExpertLoad(out, l) })
		if err != nil {
			return fmt.Errorf("writing %s: %w", ExpertLoadFile, err)
		}
		w.artifacts = append(w.artifacts, cellArtifact(w.cell.ID, ExpertLoadFile))
	}
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

// isProfiled reports whether pass i is the profiled pass.
func (w *cellWorker) isProfiled(i int) bool { return w.profiled && i == len(w.passes)-1 }

// requestLine is one line of requests.jsonl. Pass counts the timed repeats
// from 0; the profiled pass, when there is one, comes last.
type requestLine struct {
	Pass     int  `json:"pass"`
	Profiled bool `json:"profiled"`
	engine.RequestRecord
}

func (w *cellWorker) writeRequests(out io.Writer) error {
	bw := bufio.NewWriterSize(out, 1<<16)
	enc := json.NewEncoder(bw)
	for i, res := range w.passes {
		for _, r := range res.Requests {
			if err := enc.Encode(requestLine{Pass: i, Profiled: w.isProfiled(i), RequestRecord: r}); err != nil {
				return err
			}
		}
	}
	return bw.Flush()
}

const iterationsHeader = "pass,profiled,iteration,ctx_requests,ctx_tokens,gen_requests,start_ns,duration_ns,warmup,in_window\n"

func (w *cellWorker) writeIterations(out io.Writer) error {
	bw := bufio.NewWriterSize(out, 1<<16)
	bw.WriteString(iterationsHeader)
	var b []byte
	for i, res := range w.passes {
		for _, it := range res.Iterations {
			b = strconv.AppendInt(b[:0], int64(i), 10)
			b = append(b, ',')
			b = strconv.AppendBool(b, w.isProfiled(i))
			for _, v := range []int64{int64(it.Index), int64(it.CtxRequests), int64(it.CtxTokens), int64(it.GenRequests), int64(it.Start), int64(it.Duration)} {
				b = append(b, ',')
				b = strconv.AppendInt(b, v, 10)
			}
			b = append(b, ',')
			b = strconv.AppendBool(b, it.Warmup)
			b = append(b, ',')
			b = strconv.AppendBool(b, it.Profiled)
			b = append(b, '\n')
			bw.Write(b)
		}
	}
	return bw.Flush()
}
