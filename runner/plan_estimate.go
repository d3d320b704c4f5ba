package runner

import (
	"cmp"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/cuda"
	"github.com/xrun-dev/xrun/engine/profile"
	"github.com/xrun-dev/xrun/results"
)

// How long a study will take, before it runs: xrun plan estimates each
// cell's time on a GPU and the study's total, so that a nightly can be
// sized to its night. A cell takes its repeats, each a warm-up and a timed
// pass, the profiled pass when it has a profile window, and its engine's
// start-up. The passes come, best first, from:
//
//   - the same cell measured in a results directory (--results): its
//     recorded passes (cells/<id>/cell.json, as the time limit reads them),
//     else its median total latency in results.json;
//   - the most similar cell measured there (paramDistance, as the time limit
//     picks neighbours): its efficiency against the roofline, applied to
//     this cell's roofline;
//   - the roofline (engine/profile's IterationWork over a coarse schedule,
//     workload.serve) at a stated efficiency.
//
// Measurements from another GPU are scaled by the two GPUs' rooflines. Only
// GPU cells are estimated: the cpu engine's speed depends on the machine
// the plan does not know.

const (
	// DefaultEfficiency is the share of the roofline xrun's CUDA engine is
	// taken to reach: with cuBLASLt GEMMs it reached 46-49 % on an H200
	// (bench/results/gemm-plugin-h200, TinyLlama-1.1B, batch 1 to 256) and
	// 56-57 % on an H100 (bench/results/hf-engine-h100, batch 1 to 64); MoE
	// models 59-85 % on an H200 (bench/NOTES.md, v5); cells of
	// experiments/nightly.yaml on an H100 53-83 %, Llama-3.1-8B and the MoE
	// models at the top (testdata/plan/nightly-h100). Erring long is the
	// safer side for sizing a night.
	DefaultEfficiency = 0.5
	// ownGEMMDerate scales the efficiency of dense models' cells on the
	// engine's own GEMM kernels (gemm_plugin disable) from batch
	// ownGEMMMinBatch on: they reached 18-38 % of the roofline there, against
	// cuBLASLt's 46-49 % (bench/results/gemm-plugin-h200). MoE decode runs
	// its own kernels under both settings (bench/NOTES.md, v5), and at batch
	// 1 and 2 the own kernels are as fast or faster.
	ownGEMMDerate   = 0.5
	ownGEMMMinBatch = 4
	// engineStartup is a cell's time besides its passes on xrun's own
	// engine: the worker's start, CUDA context, kernels loaded from the
	// kernel cache, weights filled on the device, the dataset read. Whole
	// cells of experiments/nightly.yaml on an H100 took 1-3 s more than
	// their passes (2026-11-25: llama-3.1-8b, gpt-oss-20b, qwen3-30b-a3b);
	// rounded up for what the run adds around its workers. Once per cell:
	// the worker keeps its engine for all passes.
	engineStartup = 5 * time.Second
	// coldKernelCache is the first worker's extra time on a machine whose
	// kernel cache is cold: it compiles the kernels (64 s on that H100).
	// Counted once per study, as the plan cannot know the cache.
	coldKernelCache = 65 * time.Second
	// externalStartup is an external engine's start-up, paid in every pass
	// (each pass runs the tool afresh: Python's start, imports, the model
	// loaded). A guess, not a measurement; trtllm-build's engine builds
	// are not counted (they are cached across runs).
	externalStartup = 30 * time.Second
	// gpuReserved is GPU memory the engine takes besides weights and KV
	// cache (CUDA context, activations, workspaces), for how many
	// requests the KV cache holds.
	gpuReserved = 2 << 30
)

// DefaultEstimateGPU is the GPU xrun plan estimates for unless told.
const DefaultEstimateGPU = "H100"

// estimateGPUs are the GPUs the plan can estimate for: those with known
// ceilings (cuda.KnownCeilings) and their memory as NVML reports it
// (results.json's environment in bench/results/hf-engine-h100 and
// gemm-plugin-h200).
var estimateGPUs = []struct {
	kind   string
	memory float64
}{
	{"H100", 85017493504},
	{"H200", 150109880320},
}

// EstimateOptions say what a plan's estimate is for.
type EstimateOptions struct {
	// GPU is "H100", "H200" or a GPU's name as NVML reports it ("NVIDIA H100
	// 80GB HBM3"); "" means DefaultEstimateGPU.
	GPU string
	// Efficiency is the share of the roofline the engine is taken to
	// reach, in (0, 1]; 0 means DefaultEfficiency.
	Efficiency float64
	// GPUs is how many GPUs the run would use (cells run one per GPU in
	// parallel); 0 means 1.
	GPUs int
	// Results is a results directory whose measurements predict the cells;
	// "" for none.
	Results string
}

// Bases of a cell's estimate.
const (
	BasisMeasured         = "measured"          // the same cell, in --results
	BasisSimilar          = "similar"           // the most similar cell in --results, scaled by the roofline
	BasisRoofline         = "roofline"          // the roofline at the stated efficiency
	BasisRooflineExternal = "roofline-external" // the same, for an external engine
	BasisNone             = "none"              // no estimate; Note says why
)

// Estimate is how long a plan's cells are expected to take on a GPU.
type Estimate struct {
	GPU    string // the kind estimated for, "H100"
	Device profile.Device
	Memory float64 // bytes
	// Efficiency is the share of the roofline taken for a cell with nothing
	// measured; OwnGEMMEfficiency that of dense models on the engine's own
	// GEMMs from batch ownGEMMMinBatch on.
	Efficiency        float64
	OwnGEMMEfficiency float64
	Startup           time.Duration
	ExternalStartup   time.Duration
	// ColdStart is added once to the study when it runs cells on xrun's
	// engine: the kernels compiled on a cold kernel cache.
	ColdStart       time.Duration
	ProfileOverhead float64
	GPUs            int
	// Results describes the results directory read, nil without one.
	Results *EstimateResults
	// Cells are the plan's cells' estimates, in its order.
	Cells []CellEstimate
	// Total is the GPU time of the estimated cells (a cell on g GPUs
	// counts g times); Wall the time they take on GPUs GPUs, longest first
	// (as the run orders them); Longest the longest cell.
	Total, Wall, Longest time.Duration
	Estimated            int
	// NotEstimated counts the cells without an estimate, by reason.
	NotEstimated map[string]int
}

// EstimateResults is the results directory an estimate read.
type EstimateResults struct {
	Dir   string
	Study string
	GPU   string // the GPU it ran on, as NVML named it
	// Unused says why its measurements were not used; "" when they were.
	Unused string
}

// CellEstimate is one cell's expected run time: Repeats x (Warmup + Pass)
// + Profiled + Startup.
type CellEstimate struct {
	Time     time.Duration // 0 when there is no estimate
	Pass     time.Duration // one timed pass
	Warmup   time.Duration // one pass's warm-up
	Profiled time.Duration // the profiled pass (warm-up included); 0 without one
	Startup  time.Duration // all of the cell's engine start-ups
	Basis    string
	// From is the measured cell of an estimate from a similar one, and
	// Distance in how many parameters the two differ.
	From     string
	Distance int
	// Efficiency is the share of the roofline the estimate assumes (for
	// BasisMeasured, the one measured); 0 when no roofline was computed.
	Efficiency float64
	// Note says why a cell has no estimate.
	Note string
}

// EstimateTime estimates the plan's cells and sets p.Estimate. Options
// that are out of range, a GPU without known ceilings and a results
// directory that cannot be read are errors of the user's input.
func (p *Plan) EstimateTime(o EstimateOptions) error {
	if o.GPU == "" {
		o.GPU = DefaultEstimateGPU
	}
	if o.Efficiency == 0 {
		o.Efficiency = DefaultEfficiency
	}
	if o.GPUs == 0 {
		o.GPUs = 1
	}
	switch {
	case !(o.Efficiency > 0 && o.Efficiency <= 1):
		return &OptionError{"--efficiency", fmt.Sprintf("%g: expected a share of the roofline in (0, 1], e.g. %g", o.Efficiency, DefaultEfficiency)}
	case o.GPUs < 1:
		return &OptionError{"--gpus", fmt.Sprintf("%d: expected a number of GPUs >= 1", o.GPUs)}
	}
	est := &Estimate{Efficiency: o.Efficiency, OwnGEMMEfficiency: o.Efficiency * ownGEMMDerate,
		Startup: engineStartup, ExternalStartup: externalStartup, ProfileOverhead: profileOverhead,
		GPUs: o.GPUs, NotEstimated: map[string]int{}}
	var ok bool
	if est.Device, est.GPU, est.Memory, ok = estimateDevice(o.GPU); !ok {
		kinds := make([]string, len(estimateGPUs))
		for i, g := range estimateGPUs {
			kinds[i] = g.kind
		}
		return &OptionError{"--gpu", fmt.Sprintf("%q: no known ceilings for it; expected one of %s, or a GPU name containing one", o.GPU, strings.Join(kinds, ", "))}
	}
	var m *measurements
	if o.Results != "" {
		var err error
		if m, err = readMeasurements(o.Results, est); err != nil {
			return err
		}
		est.Results = &m.info
	}
	est.Cells = make([]CellEstimate, len(p.Cells))
	var times []time.Duration
	var gpus []int
	for i := range p.Cells {
		c := &p.Cells[i]
		ce := est.cell(c, p.Spec.Repeats, m)
		est.Cells[i] = ce
		if ce.Time <= 0 {
			est.NotEstimated[ce.Note]++
			continue
		}
		est.Estimated++
		if builtinEngine(c.Params.Engine) {
			est.ColdStart = coldKernelCache
		}
		g := max(c.Params.GPUsPerCell, 1)
		est.Total += ce.Time * time.Duration(g)
		est.Longest = max(est.Longest, ce.Time)
		times, gpus = append(times, ce.Time), append(gpus, g)
	}
	est.Total += est.ColdStart
	est.Wall = lptWall(times, gpus, o.GPUs) + est.ColdStart
	p.Estimate = est
	return nil
}

// estimateDevice finds the ceilings and memory of the GPU named (in any
// case: "h200" is an H200).
func estimateDevice(name string) (profile.Device, string, float64, bool) {
	for _, g := range estimateGPUs {
		if strings.EqualFold(name, g.kind) {
			name = g.kind
		}
	}
	if _, _, ok := cuda.KnownCeilings(name); !ok {
		name = strings.ToUpper(name)
	}
	dev, ok := profile.GPUDevice(name)
	if !ok {
		return dev, "", 0, false
	}
	_, kind, _ := cuda.KnownCeilings(name)
	for _, g := range estimateGPUs {
		if g.kind == kind {
			return dev, kind, g.memory, true
		}
	}
	return dev, "", 0, false
}

// cell estimates one cell.
func (est *Estimate) cell(c *Cell, repeats int, m *measurements) CellEstimate {
	none := func(note string) CellEstimate { return CellEstimate{Basis: BasisNone, Note: note} }
	if c.Params.Engine == "cpu" {
		return none("on the cpu engine: its speed depends on the machine (estimates are for GPU cells)")
	}
	external := !builtinEngine(c.Params.Engine)
	w, why := cellWorkload(c)
	sim := simulation{}
	if why == "" {
		sim, why = w.simulate(est.Device, est.Memory)
	}
	var ce CellEstimate
	switch {
	case m != nil && m.same(c, sim, est, &ce):
	case why == "" && m != nil && m.similar(c, w, sim, est, &ce):
	case why != "":
		return none(why)
	default:
		eff := est.Efficiency * w.derate(sim.slots)
		ce = CellEstimate{Basis: BasisRoofline, Efficiency: eff, Pass: seconds(sim.pass / eff),
			Warmup: seconds(sim.warmup / (est.Efficiency * w.derate(sim.warmBatch())))}
		if external {
			ce.Basis = BasisRooflineExternal
		}
	}
	if ce.Profiled == 0 && len(c.Params.ProfileSpans()) > 0 {
		ce.Profiled = time.Duration(float64(ce.Pass+ce.Warmup) * profileOverhead)
	}
	if ce.Startup == 0 {
		ce.Startup = est.Startup
		if external {
			passes := repeats
			if ce.Profiled > 0 {
				passes++
			}
			ce.Startup = est.ExternalStartup * time.Duration(passes)
		}
	}
	ce.Time = time.Duration(repeats)*(ce.Pass+ce.Warmup) + ce.Profiled + ce.Startup
	return ce
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// workload is what the roofline needs of a cell: the model, the engine's
// limits and the requests' sizes.
type workload struct {
	engine     string
	mc         engine.ModelConfig
	elemBytes  int
	batch      int
	maxTokens  int
	warmup     int
	kvFraction float64
	ownGEMM    bool // gemm_plugin disable on xrun's own engine
	// requests, input and output are the dataset's count and lengths (the
	// mean, or the unif midpoint); maxLen the longest request.
	requests, input, output, maxLen int
	// split is how many GPUs share a pass's work (tp x pp).
	split int
}

// cellWorkload is a plan cell's workload; why says why there is none.
func cellWorkload(c *Cell) (workload, string) {
	p := &c.Params
	w := workload{engine: p.Engine, mc: *c.Model, elemBytes: 2, batch: p.BatchSize, maxTokens: p.MaxNumTokens,
		warmup: p.Warmup, kvFraction: p.KVCacheFreeGPUMemFraction, split: max(p.TP*p.PP, 1),
		ownGEMM: builtinEngine(p.Engine) && p.GemmPlugin == "disable"}
	if p.Dtype == "float32" {
		w.elemBytes = 4
	}
	if w.kvFraction == 0 || c.na&(1<<pKVFraction) != 0 {
		w.kvFraction = 0.9
	}
	d := &p.Dataset
	switch d.Kind() {
	case GenNorm:
		w.requests, w.input, w.output = d.NumRequests, d.InputMean, d.OutputMean
		w.maxLen = d.InputMean + d.OutputMean
	case GenUnif:
		w.requests, w.input, w.output = d.NumRequests, (d.InputMin+d.InputMax)/2, (d.OutputMin+d.OutputMax)/2
		w.maxLen = d.InputMax + d.OutputMax
	default:
		return w, "with a dataset file: its requests' lengths are read at run time"
	}
	return w, ""
}

// flatWorkload is the workload of a measured cell from its parameters in
// results.json; ok is false when they do not say enough (a model
// directory, a dataset file).
func flatWorkload(p results.Params) (workload, bool) {
	str := func(k string) string {
		if v, ok := p[k].(string); ok {
			return v
		}
		if d, ok := params[paramIndex[k]].def.(string); ok {
			return d
		}
		return ""
	}
	num := func(k string) float64 {
		switch v := p[k].(type) {
		case int:
			return float64(v)
		case int64:
			return float64(v)
		case float64:
			return v
		}
		switch d := params[paramIndex[k]].def.(type) {
		case int:
			return float64(d)
		case float64:
			return d
		}
		return 0
	}
	mc, ok := engine.ZooModel(str("model"))
	if !ok {
		return workload{}, false
	}
	eng := str("engine")
	w := workload{engine: eng, mc: mc, elemBytes: 2, batch: int(num("batch_size")), maxTokens: int(num("max_num_tokens")),
		warmup: int(num("warmup")), kvFraction: num("kv_cache_free_gpu_mem_fraction"),
		split:   max(int(num("tp")*num("pp")), 1),
		ownGEMM: builtinEngine(eng) && str("gemm_plugin") == "disable"}
	if str("dtype") == "float32" {
		w.elemBytes = 4
	}
	n := int(num("dataset.num_requests"))
	switch str("dataset.generator") {
	case GenNorm:
		in, out := int(num("dataset.input_mean")), int(num("dataset.output_mean"))
		w.requests, w.input, w.output, w.maxLen = n, in, out, in+out
	case GenUnif:
		inLo, inHi, outLo, outHi := int(num("dataset.input_min")), int(num("dataset.input_max")), int(num("dataset.output_min")), int(num("dataset.output_max"))
		w.requests, w.input, w.output, w.maxLen = n, (inLo+inHi)/2, (outLo+outHi)/2, inHi+outHi
	default:
		return workload{}, false
	}
	return w, w.requests > 0 && w.input > 0 && w.output > 0 && w.batch > 0 && w.maxTokens > 0
}

// derate is the factor on the efficiency for the workload's GEMM path, at
// a batch of that many requests in flight.
func (w workload) derate(batch int) float64 {
	if w.ownGEMM && !w.mc.MoE() && batch >= ownGEMMMinBatch {
		return ownGEMMDerate
	}
	return 1
}

// simulation is a cell's roofline: the floor, in seconds, of one timed
// pass and of its warm-up, on the GPU simulated.
type simulation struct {
	pass, warmup float64
	// slots are the requests in flight at most; the warm-up has
	// min(slots, warmup) of them.
	slots, warm int
}

func (s simulation) warmBatch() int { return min(s.slots, s.warm) }

// simulate runs the workload's schedule on dev, which has memory bytes;
// why says why it cannot run there.
func (w workload) simulate(dev profile.Device, memory float64) (simulation, string) {
	weights := float64(w.mc.Params()) * float64(w.elemBytes) / float64(w.split)
	if weights+gpuReserved > memory {
		return simulation{}, fmt.Sprintf("too large for the GPU: %s's weights take %.1f GB, it has %.1f GB",
			w.mc.Name, weights/1e9, memory/1e9)
	}
	// As the engine (and TensorRT-LLM's capacity scheduler): no more
	// requests in flight than the KV cache holds whole, one slot kept.
	kvPerToken := 2 * float64(w.mc.Layers*w.mc.KVHeads*w.mc.HeadDim*w.elemBytes) / float64(w.split)
	fit := int(math.Floor(w.kvFraction*(memory-weights-gpuReserved)/(kvPerToken*float64(w.maxLen)))) - 1
	if fit < 1 {
		return simulation{}, fmt.Sprintf("too large for the GPU: its KV cache cannot hold one request of %d tokens beside %s's weights", w.maxLen, w.mc.Name)
	}
	s := simulation{slots: min(w.batch, w.requests, fit), warm: w.warmup}
	s.pass = w.serve(dev, w.requests, s.slots) / float64(w.split)
	s.warmup = w.serve(dev, w.warmup, s.slots) / float64(w.split)
	return s, ""
}

// serve is the roofline floor of n requests served slots at a time, in
// waves: with every request of the same lengths, those admitted together
// prefill together (in chunks of max_num_tokens), then decode together
// and leave together.
func (w workload) serve(dev profile.Device, n, slots int) float64 {
	if n <= 0 || slots <= 0 {
		return 0
	}
	t := float64(n/slots) * w.wave(dev, slots)
	if r := n % slots; r > 0 {
		t += w.wave(dev, r)
	}
	return t
}

// wave is the floor of k requests admitted together.
func (w workload) wave(dev profile.Device, k int) float64 {
	iter := func(it engine.IterationRecord, genContext float64) float64 {
		sec, _ := dev.Time(profile.IterationWork(w.mc, it, genContext, w.elemBytes))
		return sec
	}
	chunk := func(tokens int) engine.IterationRecord {
		reqs := min(max((tokens+w.input-1)/w.input, 1), k)
		return engine.IterationRecord{CtxTokens: tokens, CtxRequests: reqs}
	}
	prompt := k * w.input
	t := float64(prompt/w.maxTokens) * iter(chunk(w.maxTokens), 0)
	if r := prompt % w.maxTokens; r > 0 {
		t += iter(chunk(r), 0)
	}
	// The prefill gives each request its first token; each decode
	// iteration one more, over a cache of the prompt and half the output
	// on average.
	if w.output > 1 {
		t += float64(w.output-1) * iter(engine.IterationRecord{GenRequests: k}, float64(w.input)+float64(w.output)/2)
	}
	return t
}

// measurements are the cells of a results directory, as estimates use
// them.
type measurements struct {
	info  EstimateResults
	dir   string
	cells []measured
	// dev is the GPU the results ran on (kind H100, ...), to scale their
	// times to the GPU estimated for.
	dev    profile.Device
	kind   string
	memory float64
}

type measured struct {
	cell *results.Cell
	// timed is the median total latency of its timed passes.
	timed time.Duration
	w     workload
	sim   simulation // on the results' GPU; zero when w is unknown
	known bool       // w and sim are
}

// readMeasurements reads a results directory for est.
func readMeasurements(dir string, est *Estimate) (*measurements, error) {
	res, path, err := results.Load(dir)
	if err != nil {
		return nil, err
	}
	m := &measurements{dir: filepath.Dir(path), info: EstimateResults{Dir: dir, Study: res.Name}}
	if len(res.Environment.GPUs) == 0 {
		m.info.Unused = "they were measured without a GPU"
		return m, nil
	}
	m.info.GPU = res.Environment.GPUs[0].Name
	var ok bool
	if m.dev, m.kind, m.memory, ok = estimateDevice(m.info.GPU); !ok {
		m.info.Unused = fmt.Sprintf("%s has no known ceilings to scale its times by", m.info.GPU)
		return m, nil
	}
	for i := range res.Cells {
		c := &res.Cells[i]
		lat := medianMetric(c, "total_latency_ms")
		if c.Status != results.StatusOK || lat <= 0 || c.Params["engine"] == "cpu" {
			continue
		}
		mc := measured{cell: c, timed: time.Duration(lat * float64(time.Millisecond))}
		if w, ok := flatWorkload(c.Params); ok {
			if sim, why := w.simulate(m.dev, m.memory); why == "" && sim.pass > 0 {
				mc.w, mc.sim, mc.known = w, sim, true
			}
		}
		m.cells = append(m.cells, mc)
	}
	return m, nil
}

// medianMetric is a cell's median of metric k over its repeats; 0 when
// none has it.
func medianMetric(c *results.Cell, k string) float64 {
	if s, ok := c.Summary[k]; ok && s.N > 0 {
		return s.Median
	}
	var v []float64
	for _, r := range c.Repeats {
		if x, ok := r[k]; ok {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// same estimates c from its own measurement, when the results hold it
// (the same id, or the same parameters under another id).
func (m *measurements) same(c *Cell, sim simulation, est *Estimate, ce *CellEstimate) bool {
	if m.info.Unused != "" {
		return false
	}
	flat := results.Params(c.Flat())
	var mc *measured
	for i := range m.cells {
		x := &m.cells[i]
		if x.cell.ID == c.ID {
			mc = x
			break
		}
		if mc == nil && paramDistance(flat, x.cell.Params) == 0 && sameWork(flat, x.cell.Params) {
			mc = x
		}
	}
	if mc == nil {
		return false
	}
	// Times scale from the results' GPU to est's by the two rooflines of
	// this cell; on the same kind of GPU they stand as measured.
	ratio := 1.0
	if m.kind != est.GPU {
		if !mc.known || sim.pass <= 0 {
			return false
		}
		ratio = (sim.pass + sim.warmup) / (mc.sim.pass + mc.sim.warmup)
	}
	*ce = CellEstimate{Basis: BasisMeasured, From: mc.cell.ID}
	ce.Pass = scale(mc.timed, ratio)
	if mc.known {
		// The warm-up at the efficiency the timed pass reached, moved to
		// the warm-up's batch.
		ce.Warmup = scale(mc.timed, ratio*mc.sim.warmup/mc.sim.pass*mc.w.derate(mc.sim.slots)/mc.w.derate(mc.sim.warmBatch()))
		ce.Efficiency = mc.sim.pass / mc.timed.Seconds()
	}
	if pr := mc.cell.Profile; pr != nil && pr.PassMetrics["total_latency_ms"] > 0 {
		ce.Profiled = scale(time.Duration(pr.PassMetrics["total_latency_ms"]*float64(time.Millisecond)), ratio) + ce.Warmup
	}
	// The worker's own record, when the directory has it, says how long its
	// passes took, warm-up included, and how long it took to start.
	rec, err := readCellRecord(m.dir, mc.cell.ID)
	if err != nil || rec == nil {
		return true
	}
	rc := &runCell{cell: &Cell{ID: mc.cell.ID}, wc: &workerCell{Params: mc.cell.Params}}
	if p, ok := paceOf(rc, rec); ok {
		whole := scale(p.pass, ratio)
		ce.Warmup = min(ce.Warmup, whole)
		ce.Pass = whole - ce.Warmup
		if p.setup > 0 {
			ce.Startup = p.setup
		}
	}
	for _, q := range rec.Passes {
		if q.Profiled && q.Finished.After(q.Started) {
			ce.Profiled = scale(q.Finished.Sub(q.Started), ratio)
		}
	}
	return true
}

// similar estimates c from the measured cell most like it: that cell's
// efficiency against the roofline, applied to c's (the slowest of the
// nearest, as estimateFirst picks, erring long). Only a cell of the same
// engine counts.
func (m *measurements) similar(c *Cell, w workload, sim simulation, est *Estimate, ce *CellEstimate) bool {
	if m.info.Unused != "" || sim.pass <= 0 {
		return false
	}
	flat := results.Params(c.Flat())
	best, eff, from := -1, 0.0, ""
	for i := range m.cells {
		x := &m.cells[i]
		if !x.known || !sameEngine(w.engine, x.w.engine) {
			continue
		}
		d := paramDistance(flat, x.cell.Params)
		// The measured share of the roofline, without its GEMM path's
		// derating (c's is applied below).
		e := x.sim.pass / x.timed.Seconds() / x.w.derate(x.sim.slots)
		if best < 0 || d < best || d == best && e < eff {
			best, eff, from = d, e, x.cell.ID
		}
	}
	if best < 0 {
		return false
	}
	pass, warm := min(eff*w.derate(sim.slots), 1), min(eff*w.derate(sim.warmBatch()), 1)
	*ce = CellEstimate{Basis: BasisSimilar, From: from, Distance: best, Efficiency: pass,
		Pass: seconds(sim.pass / pass), Warmup: seconds(sim.warmup / warm)}
	return true
}

// sameEngine reports whether cells of engines a and b measure the same
// engine: auto is taken to be cuda, as on a GPU.
func sameEngine(a, b string) bool {
	norm := func(e string) string {
		if e == "auto" {
			return "cuda"
		}
		return e
	}
	return norm(a) == norm(b)
}

// sameWork reports whether a and b agree on the parameters paramDistance
// leaves out.
func sameWork(a, b results.Params) bool {
	for _, k := range workParams {
		if formatValue(a[k]) != formatValue(b[k]) {
			return false
		}
	}
	return true
}

func scale(d time.Duration, f float64) time.Duration { return time.Duration(float64(d) * f) }

// lptWall is how long cells of these times, each on gpus[i] GPUs, take on
// n GPUs started longest first, each on the GPUs free soonest.
func lptWall(times []time.Duration, gpus []int, n int) time.Duration {
	order := make([]int, len(times))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(times[b], times[a]) })
	free := make([]time.Duration, n)
	for _, i := range order {
		slices.Sort(free)
		g := min(gpus[i], n)
		end := free[g-1] + times[i]
		for j := range g {
			free[j] = end
		}
	}
	return slices.Max(free)
}
