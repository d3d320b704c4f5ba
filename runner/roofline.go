package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/profile"
	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/layout"
)

// attachRooflines gives the study's GPU cells their roofline before
// results.json is written: engine/profile computes it from each cell's
// records (iterations.csv, expert_load.csv), once per cell, here where
// results are assembled rather than in the worker, so that xrun report
// computes it the same way for results written before it existed. A cell
// that cannot have one goes without; why is logged at debug level.
func (s *study) attachRooflines() {
	for _, err := range AttachRooflines(s.res, func(id string) string { return layout.CellDir(s.dir, id) }) {
		s.log.Debug().Err(err).Msg("no roofline")
	}
}

// AttachRooflines sets Roofline on every cell of r that ran on a GPU and
// has none yet, from the records in its directory (cellDir(id)). It is
// called where results are assembled (the runner, before it writes
// results.json; xrun report, so that results written before rooflines
// existed show them), never in the worker. Cells that ran on the CPU are
// left alone: their ceilings would be those of the machine assembling the
// results. The errors say, per GPU cell, why it got no roofline; the
// other cells are attached regardless. Results from a host without a GPU
// are left alone at once; a host whose GPUs have no known ceilings gives
// one error.
func AttachRooflines(r *results.Results, cellDir func(id string) string) []error {
	todo := slices.ContainsFunc(r.Cells, func(c results.Cell) bool { return c.Roofline == nil && c.Status == results.StatusOK })
	if !todo || len(r.Environment.GPUs) == 0 {
		return nil
	}
	if _, err := envGPUName(r.Environment); err != nil {
		return []error{fmt.Errorf("no rooflines: %w", err)}
	}
	var errs []error
	for i := range r.Cells {
		c := &r.Cells[i]
		if c.Roofline != nil || c.Status != results.StatusOK {
			continue
		}
		rf, err := cellRoofline(cellDir(c.ID), c, r.Environment)
		if err != nil {
			errs = append(errs, fmt.Errorf("cell %s: no roofline: %w", c.ID, err))
			continue
		}
		c.Roofline = rf
	}
	return errs
}

// cellRoofline is the roofline of a cell whose directory is dir
// (profile.CellRoofline), from its first timed repeat, its record's
// backend and ceilings, and the environment's GPU; nil and no error for a
// cell that did not run on a GPU.
func cellRoofline(dir string, c *results.Cell, env results.Environment) (*results.Roofline, error) {
	rec, err := readRooflineRecord(dir)
	if err != nil {
		return nil, err
	}
	if !ranOnGPU(rec, c, env) {
		return nil, nil
	}
	gpu, err := envGPUName(env)
	if err != nil {
		return nil, err
	}
	in := profile.RooflineCell{GPU: gpu, Backend: rec.Backend, Ceilings: rec.Ceilings}
	in.Model, _ = c.Params["model"].(string)
	// A cell of the model's first layers ran that cut model; results.json
	// has layers only then.
	in.Layers = flatInt(c.Params["layers"])
	// dtype fp8: E4M3 linear layers at FP8's ceiling; kv_cache_dtype fp8:
	// a one-byte KV cache (results.json has kv_cache_dtype only when given).
	in.FP8 = c.Params["dtype"] == "fp8"
	in.KVFP8 = c.Params["kv_cache_dtype"] == "fp8"
	// moe_weights is xrun's own engine's (absent: auto).
	if builtinCell(c.Params) {
		in.MoEWeights, _ = c.Params["moe_weights"].(string)
		if rec.MoEWeights != "" {
			// How the engine kept them, resolved where it ran.
			in.MoEWeights = rec.MoEWeights
		}
	}
	in.Split = cellSplit(c.Params)
	if len(c.Repeats) > 0 {
		in.FirstRepeat = c.Repeats[0]
	}
	rf, err := profile.CellRoofline(dir, in)
	if rf == nil || err != nil {
		return nil, err
	}
	return &results.Roofline{
		FloorS: rf.Seconds, OutputTokS: rf.OutputTokS, MemoryBoundS: rf.MemoryBoundSeconds,
		MeasuredS: rf.MeasuredSeconds, MemoryBoundMeasuredS: rf.MemoryBoundMeasuredSeconds, MemoryBoundIterations: rf.MemoryBoundIterations,
		Iterations: rf.Iterations, Bytes: rf.Work.Bytes, FLOPs: rf.Work.FLOPs,
		Device: rf.Device.Name, PeakBytesPerS: rf.Device.PeakBytesPerSec, PeakFLOPS: rf.Device.PeakFLOPs, PeakSource: rf.Device.PeakSource,
		PeakFP8FLOPS: fp8Rate(rf.Device), Basis: rf.Basis,
	}, nil
}

// fp8Rate is the rate a roofline counted FP8 GEMMs at: for FP8 linear
// layers on a GPU with an FP8 ceiling, else 0 (their FLOPs then count at
// the compute dtype's, as the basis says).
func fp8Rate(d profile.Device) float64 {
	if !d.FP8 {
		return 0
	}
	return d.PeakFP8FLOPs
}

// builtinCell reports whether a cell's flat parameters run xrun's own
// engine (engine absent: auto).
func builtinCell(p map[string]any) bool {
	eng, _ := p["engine"].(string)
	return eng == "" || builtinEngine(eng)
}

// flatFormats are the weight and KV-cache formats of a cell of xrun's own
// engine on a GPU from its flat parameters (results.json's, a worker's),
// as its roofline counts them: moe_weights resolved as the CUDA backend
// resolves it (engine.ResolveMoEWeights; a value it refuses never ran).
func flatFormats(p map[string]any, mc engine.ModelConfig) profile.Formats {
	dtype, _ := p["dtype"].(string)
	mw, _ := p["moe_weights"].(string)
	mx, _ := engine.ResolveMoEWeights("cuda", mc, dtype, mw)
	return profile.Formats{FP8: dtype == "fp8", KVFP8: p["kv_cache_dtype"] == "fp8", MXFP4Experts: mx}
}

// passFormats are the formats a worker's profiled pass ran with, for its
// diagnosis: the cell's engine configuration on xrun's own engine, and
// how the engine says it kept the experts (engine.ExpertsReporter:
// moe_weights as its backend resolved it). An external engine's are its
// tool's, unknown here.
func passFormats(p map[string]any, cfg engine.Config, e engine.Engine) profile.Formats {
	if !builtinCell(p) {
		return profile.Formats{}
	}
	f := profile.Formats{FP8: cfg.Dtype == "fp8", KVFP8: cfg.KVCacheDtype == "fp8"}
	if r, ok := e.(engine.ExpertsReporter); ok {
		f.MXFP4Experts = r.MoEWeights() == "mxfp4"
	}
	return f
}

// cellSplit is how a cell's flat parameters (results.json's, a worker's)
// split its work over GPUs, for its roofline and diagnosis: on xrun's own
// engine a rank's slice of the model (tp, ep), on an external engine,
// whose layout xrun does not know, the work evenly over tp x pp GPUs.
// Absent parameters are 1 (results.json has tp and ep only when given).
func cellSplit(p map[string]any) profile.Split {
	tp, ep, pp := max(flatInt(p["tp"]), 1), max(flatInt(p["ep"]), 1), max(flatInt(p["pp"]), 1)
	if eng, _ := p["engine"].(string); eng != "" && !builtinEngine(eng) {
		return profile.Split{GPUs: tp * pp}
	}
	return profile.Split{TP: tp, EP: ep}
}

// rooflineRecord is what the roofline reads of a cell's record
// (cellRecord, cell.json): its backend, the ceilings the CUDA backend
// measured and how it kept a MoE model's experts. Only these are decoded,
// so that nothing else in the record (one an older xrun wrote, say) can
// cost a cell its roofline.
type rooflineRecord struct {
	Backend    string           `json:"backend"`
	Ceilings   *engine.Ceilings `json:"ceilings"`
	MoEWeights string           `json:"moe_weights"`
}

// readRooflineRecord reads dir's cell.json; a cell without one (results
// copied without their cells/) reads as an empty record.
func readRooflineRecord(dir string) (rooflineRecord, error) {
	var rec rooflineRecord
	path := filepath.Join(dir, layout.CellFile)
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return rec, nil
	case err != nil:
		return rec, err
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		return rec, fmt.Errorf("%s: %w", path, err)
	}
	return rec, nil
}

// ranOnGPU says whether a cell ran on a GPU backend: its record's backend
// ("cuda/cublaslt"), else its engine parameter, "auto" meaning the GPU
// when the environment lists one (as the runner resolves it).
func ranOnGPU(rec rooflineRecord, c *results.Cell, env results.Environment) bool {
	switch {
	case c.Params["engine"] == "cpu":
		return false
	case rec.Backend != "":
		return !strings.HasPrefix(rec.Backend, "cpu")
	case c.Params["engine"] == "cuda":
		return true
	}
	return len(env.GPUs) > 0
}

// envGPUName is the name of the environment's GPU; the runner gives a
// cell one GPU of the host, so the GPUs must be of one kind.
func envGPUName(env results.Environment) (string, error) {
	var names []string
	for _, g := range env.GPUs {
		if !slices.Contains(names, g.Name) {
			names = append(names, g.Name)
		}
	}
	switch len(names) {
	case 0:
		return "", errors.New("results.json names no GPU (environment.gpus is empty)")
	case 1:
		return names[0], nil
	}
	return "", fmt.Errorf("the host has GPUs of several kinds (%s) and results.json does not say which ran the cell", strings.Join(names, ", "))
}

// keptRooflines are the rooflines old (the results.json a resumed run
// found) gave the cells whose records this run keeps: needed for a cell
// whose iterations.csv is gone, as when the finished cells' data
// files stayed behind on the machine that measured them (bench/gpu.sh's
// resume carries only what --resume needs) — without it the rewritten results
// would drop the roofline of every cell an earlier run finished. Only an
// entry with the record's very repeats counts: anything else describes
// another measurement.
func keptRooflines(old *results.Results, cells []*runCell) map[string]*results.Roofline {
	prior := map[string]*results.Roofline{}
	byID := map[string]*results.Cell{}
	for i := range old.Cells {
		byID[old.Cells[i].ID] = &old.Cells[i]
	}
	for _, rc := range cells {
		if rc.record == nil || rc.record.Status != results.StatusOK {
			continue
		}
		oc := byID[rc.cell.ID]
		if oc == nil || oc.Roofline == nil || oc.Status != results.StatusOK || !results.SameRepeats(oc.Repeats, rc.record.Repeats) {
			continue
		}
		prior[rc.cell.ID] = oc.Roofline
	}
	return prior
}

// flatInt is an integer parameter as results.json's flat parameters hold
// it (a JSON number read back as float64, or an int when built in
// memory); 0 when absent.
func flatInt(v any) int {
	switch x := v.(type) {
	case int:
		return x
	case int64:
		return int(x)
	case float64:
		return int(x)
	}
	return 0
}
