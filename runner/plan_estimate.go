package runner

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/xrun-dev/xrun/engine/cuda"
	"github.com/xrun-dev/xrun/engine/openai"
	"github.com/xrun-dev/xrun/engine/profile"
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
	// Getenv is the environment the run will read its XRUN_* switches
	// from (the KV cache's paging sets how many requests run at once);
	// nil means the defaults.
	Getenv func(string) string
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
	// paging is the KV cache's paging as the run's switches say.
	paging kvPaging
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
	// Notes are caveats of the estimate for the plan's reader.
	Notes []string
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
	// iterations is the simulated pass's engine iterations, the warm-up's
	// included (0: not simulated).
	iterations int
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
		GPUs: o.GPUs, NotEstimated: map[string]int{}, paging: pagingFrom(o.Getenv)}
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
	split, fp8 := 0, 0
	for i := range p.Cells {
		c := &p.Cells[i]
		ce := est.cell(c, p.Spec.Repeats, m)
		est.Cells[i] = ce
		if ce.Time <= 0 {
			est.NotEstimated[ce.Note]++
			continue
		}
		est.Estimated++
		w, _ := cellWorkload(c)
		if builtinEngine(c.Params.Engine) && w.share.Split() {
			split++
		}
		if w.formats.FP8 && (ce.Basis == BasisRoofline || ce.Basis == BasisSimilar) {
			fp8++
		}
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
	if split > 0 {
		est.Notes = append(est.Notes, splitNote(split))
	}
	if fp8 > 0 {
		est.Notes = append(est.Notes, fp8Note(fp8, est.Device))
	}
	var past []string
	for i := range p.Cells {
		c, n := &p.Cells[i], est.Cells[i].iterations
		if spans := c.Params.ProfileSpans(); len(spans) > 0 && n > 0 && spans[0].First >= n+n/10 {
			past = append(past, fmt.Sprintf("%s (window %s, about %d iterations)", c.ID, c.Params.ProfileWindow, n))
		}
	}
	if len(past) > 0 {
		est.Notes = append(est.Notes, windowPastNote(past))
	}
	p.Estimate = est
	return nil
}

// splitNote is the estimate's caveat for n cells split over GPUs (tp,
// ep). Their roofline is one GPU's share of each iteration's work
// (engine.Share), the GPUs running at once, plus their collectives
// (collectiveTime: two all-reduces a layer, the LM head's all-gather, the
// experts' all-reduce under ep), at a latency and bandwidth from one
// NVLink measurement.
func splitNote(n int) string {
	return fmt.Sprintf("%s split over GPUs (tp, ep): each iteration's floor is one GPU's share of its work (its slice of the model), plus its collectives at %.1f µs a call and %.0f GB/s (measured once, two H100s over NVLink; slower over PCIe); on external engines only the share",
		plural(n, "cell"), collectiveLatency*1e6, collectiveBusBW/1e9)
}

// fp8Note is the estimate's caveat for n cells of dtype fp8 estimated
// from their roofline (at the stated efficiency or a similar cell's):
// what their weights and GEMMs count, and that the FP8 ceiling is taken,
// not measured (cuda.KnownCeilings).
func fp8Note(n int, dev profile.Device) string {
	ceiling := "the bf16 GEMM ceiling (xrun knows no FP8 one for this GPU)"
	if dev.PeakFP8FLOPs > 0 {
		ceiling = fmt.Sprintf("the FP8 ceiling, %.0f TFLOP/s (%gx the measured bf16 GEMM, Hopper's ratio; not measured yet)",
			dev.PeakFP8FLOPs/1e12, dev.PeakFP8FLOPs/dev.PeakFLOPs)
	}
	return fmt.Sprintf("%s of dtype fp8: their linear layers' weights count a byte each and their GEMMs run at %s; attention and the LM head at bf16's",
		plural(n, "cell"), ceiling)
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
	w.paging = est.paging
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
		ce = CellEstimate{Basis: BasisRoofline, Efficiency: eff, Pass: seconds(sim.pass/eff + sim.comm),
			Warmup: seconds(sim.warmup/(est.Efficiency*w.derate(sim.warmBatch())) + sim.warmComm)}
		if external {
			ce.Basis = BasisRooflineExternal
		}
	}
	if r := c.Params.RequestRate; r > 0 && c.Params.Dataset.Kind() != GenFile {
		// Under a request rate a pass lasts at least as long as its
		// arrivals: the expected span of n-1 gaps.
		ce.Pass = max(ce.Pass, seconds(float64(c.Params.Dataset.NumRequests-1)/r))
	}
	if spans := c.Params.ProfileSpans(); ce.Profiled == 0 && len(spans) > 0 {
		// xrun's own engine stops the profiled pass after its window.
		share := 1.0
		if !external {
			share = sim.windowShare(spans)
		}
		ce.Profiled = time.Duration(float64(ce.Pass+ce.Warmup) * share * profileOverhead)
	}
	if ce.Startup == 0 {
		ce.Startup = est.Startup
		if ce.Basis == BasisRoofline || ce.Basis == BasisSimilar {
			// The warming of decode batch sizes, at the pass's efficiency.
			if eff := ce.Efficiency; eff > 0 && sim.shapes > 0 {
				ce.Startup += seconds(sim.shapes / eff)
			}
		}
		if external {
			passes := repeats
			if ce.Profiled > 0 {
				passes++
			}
			ce.Startup = est.ExternalStartup * time.Duration(passes)
			if c.Params.Engine == openai.Name {
				ce.Startup = est.ExternalStartup // one server a cell, whatever its passes
			}
		}
	}
	ce.Time = time.Duration(repeats)*(ce.Pass+ce.Warmup) + ce.Profiled + ce.Startup
	ce.iterations = sim.iters + sim.warmIters
	return ce
}

// windowPastNote is the estimate's caveat for cells whose profile window
// starts after their run's last iteration (the simulated schedule's, a
// tenth of margin): their profiled pass would hold no iteration. Listed
// are the first few, as "id (window W, about N iterations)".
func windowPastNote(cells []string) string {
	const shown = 3
	list := strings.Join(cells[:min(len(cells), shown)], ", ")
	if len(cells) > shown {
		list += fmt.Sprintf(" and %d more", len(cells)-shown)
	}
	return fmt.Sprintf("profile_window starts after the last iteration of %s, the warm-up's iterations included: %s; such a profile would hold no iteration (move the window inside the run)",
		plural(len(cells), "cell"), list)
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

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
