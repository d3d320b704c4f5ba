//go:build cgo && linux

package cuda

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"testing"
)

// BenchmarkGemmPhases splits the own TMA GEMM's time at TinyLlama-1.1B's
// decode projections (M = 256, fp16, the engine's plans and epilogues)
// into its blocks' phases, from gemm_tma_trace.cu's kernels: the wait for
// the kernel before (wait), from there to the first stage's arrival
// (first), the MMAs (mma), the split's reduction and the stores (epi),
// which a split divides into its partial tile's store into shared memory
// (stage), the wait for the cluster's other blocks (peers), the adding up
// and storing of its rows (reduce) and the wait before it may leave
// (last); and
// per launch the spread of the blocks' starts (skew), of their ends (tail)
// and the whole (span). Phases are medians over blocks and launches, in
// us at the SM clock the launches ran at. "chain" launches a layer's four
// GEMMs back to back (each may start under the one before, as in a
// decode step); "alone" waits for the GPU before each. Weights rotate
// among copies that exceed the L2 cache, so they stream from HBM.
//
// What it is for: at M = 256 a launch's MMAs are a quarter to two thirds
// of its time, and which of the other phases holds the rest decides what
// to change in the kernel.
func BenchmarkGemmPhases(b *testing.B) {
	dev := testGPU(b)
	if dev.Info.Major != 9 {
		b.Skip("the TMA GEMM runs on Hopper only")
	}
	const dt, m = F16, 256
	// epi: "" a plain product, "res" the residual add, "glu" SwiGLU (n
	// outputs of a [2n, k] gate_up weight), as the decode step runs them.
	gemms := []struct {
		name string
		n, k int
		epi  string
	}{{"qkv", 2560, 2048, ""}, {"o", 2048, 2048, "res"}, {"gate_up", 5632, 2048, "glu"}, {"down", 2048, 5632, "res"}}
	type bufs struct {
		ws          []Buffer
		x, y, trace Buffer
		blocks      int
		traced      bool // else it runs untraced in the chain, by the engine's path, and reports no phases
		plan        string
	}
	all := make([]bufs, len(gemms))
	do(b, func(t testing.TB, g *GPU) {
		alloc := func(bytes int) Buffer { return devAlloc(t, g, bytes) } // freed when the benchmark ends
		for i, gm := range gemms {
			p, rowsW, wide, ok := g.phasePlan(m, gm.n, gm.k, gm.epi)
			if !ok {
				t.Skip(fmt.Sprintf("%s at M = %d is not on the TMA kernels here", gm.name, m))
			}
			all[i].traced, all[i].plan = tmaTraced[p.cfg.name], p.cfg.name
			wBytes := rowsW * gm.k * dt.Size()
			for c := range min(16, max(2, ceilDiv(4*dev.Info.L2Bytes, wBytes))) {
				w := alloc(wBytes)
				if err := g.RandomFill(g.Stream, dt, w, uint64(100*i+c+1), 0, 0.1); err != nil {
					t.Fatal(err)
				}
				all[i].ws = append(all[i].ws, w)
			}
			all[i].x, all[i].y = alloc(m*gm.k*dt.Size()), alloc(m*gm.n*dt.Size())
			for j, buf := range []Buffer{all[i].x, all[i].y} {
				if err := g.RandomFill(g.Stream, dt, buf, uint64(1000*i+j), 0, 1); err != nil {
					t.Fatal(err)
				}
			}
			grid, err := p.grid(m, gm.n, wide)
			if err != nil {
				t.Fatal(err)
			}
			all[i].blocks = grid.X * grid.Y * grid.Z
			if !all[i].traced {
				continue
			}
			// Zeroed once: the points a launch has not (an unsplit one's
			// reduction) stay 0.
			all[i].trace = alloc(all[i].blocks * phaseRow * 8)
			if err := g.Stream.Zero(all[i].trace); err != nil {
				t.Fatal(err)
			}
		}
	})
	for _, mode := range []string{"chain", "alone"} {
		for gi, gm := range gemms {
			b.Run(fmt.Sprintf("%s/%s/M=%d/N=%d/K=%d", mode, gm.name, m, gm.n, gm.k), func(b *testing.B) {
				if !all[gi].traced {
					b.Skip(fmt.Sprintf("planned onto %s, which gemm_tma_trace.cu has no kernel of: it runs untraced in the others' chains", all[gi].plan))
				}
				var ph gemmPhases
				do(b, func(t testing.TB, g *GPU) {
					defer func(on bool) { g.syncLaunches = on }(g.syncLaunches)
					g.syncLaunches = false
					rows := make([]uint64, all[gi].blocks*phaseRow)
					for r := range b.N + 2 { // two rounds to warm up
						for i, a := range all {
							if mode == "alone" {
								if err := g.Stream.Sync(); err != nil {
									t.Fatal(err)
								}
							}
							if err := g.launchGemmPhase(a.traced, a.y, a.x, a.ws[r%len(a.ws)], m, gemms[i].n, gemms[i].k, gemms[i].epi, a.trace); err != nil {
								t.Fatal(err)
							}
						}
						if err := DownloadSlice(g.Stream, rows, all[gi].trace); err != nil {
							t.Fatal(err)
						}
						if r >= 2 {
							ph.add(rows)
						}
					}
				})
				for _, v := range ph.report() {
					b.ReportMetric(v.v, v.unit)
				}
				b.ReportMetric(float64(all[gi].blocks), "blocks")
			})
		}
	}
}

// tmaTraced: the configurations gemm_tma_trace.cu has kernels of (the
// engine's 16-bit decode plans at M = 256: the 128-row tiles, and the
// narrow ones qkv and o take by default).
var tmaTraced = map[string]bool{"wg2": true, "wg2m": true, "wg2w": true, "wg2f": true, "wg1s": true, "wg1n": true, "wg1m": true}

// phasePlan is the engine's TMA plan for an m x n output under epilogue
// epi (Gemm's, or GemmEpilogue's: under "glu" W has 2n rows), W's rows,
// and the output columns of one block's tile; ok as tmaPlanFor's.
func (g *GPU) phasePlan(m, n, k int, epi string) (p tmaPlan, rowsW, wide int, ok bool) {
	rowsW, _ = epiDims(n, 0, epi == "glu")
	p, ok = g.tmaPlanFor(m, rowsW, k, false)
	if epi != "" {
		p = p.epiPlan() // as GemmEpilogue runs it
	}
	_, wide = epiDims(n, p.cfg.bn, epi == "glu")
	return p, rowsW, wide, ok
}

// launchGemmPhase queues one of BenchmarkGemmPhases' GEMMs on the stream:
// traced (launchGemmTrace), or as the engine runs it (Gemm, GemmEpilogue)
// where its plan has no traced kernel.
func (g *GPU) launchGemmPhase(traced bool, y, x, w Buffer, m, n, k int, epi string, trace Buffer) error {
	if traced {
		return g.launchGemmTrace(g.Stream, y, x, w, m, n, k, epi, trace)
	}
	if epi == "" {
		return g.Gemm(g.Stream, F16, y, x, w, m, n, k)
	}
	ok, err := g.GemmEpilogue(g.Stream, F16, y, x, w, m, n, k, GemvFusion{GLU: epi == "glu", Residual: epi == "res"})
	if err == nil && !ok {
		err = fmt.Errorf("M=%d N=%d K=%d (%s) is not on the TMA kernels", m, n, k, epi)
	}
	return err
}

// launchGemmTrace queues the traced TMA GEMM as the engine would plan and
// launch it (Gemm's TMA path, or GemmEpilogue's under epi "res" / "glu"),
// its blocks' timelines into trace (u64 [blocks][phaseRow]).
func (g *GPU) launchGemmTrace(s *Stream, y, x, w Buffer, m, n, k int, epi string, trace Buffer) error {
	p, rowsW, wide, ok := g.phasePlan(m, n, k, epi)
	if !ok {
		return fmt.Errorf("M=%d N=%d K=%d is not on the TMA kernels", m, rowsW, k)
	}
	if p.blocks > 0 {
		return fmt.Errorf("M=%d N=%d K=%d: the traced kernels have no persistent form (XRUN_CUDA_GEMM_PERSIST)", m, rowsW, k)
	}
	name := "gemm_tma_trace_" + p.cfg.name + "_f16"
	if epi != "" {
		name = "gemm_tma_trace_" + epi + "_" + p.cfg.name + "_f16"
	}
	return g.launchTMA(s, p, tmaLaunch{module: "gemm_tma_trace", name: name, y: y, x: x, w: w, es: 2, m: m, n: n, k: k,
		rowsW: rowsW, wide: wide, trace: &trace})
}

// gemmPhases gathers traced launches: per block the cycles of each phase,
// per launch the global-timer spreads, and the clock that converts them.
type gemmPhases struct {
	wait, first, mma, epi []float64 // cycles, one per block
	stage, peers, reduce  []float64 // cycles, one per block of a split
	last                  []float64
	skew, tail, span      []float64 // ns, one per launch
	sms                   []float64 // multiprocessors a launch ran on
	cycles, ns            float64   // block totals, for cycles per ns
}

// phaseRow is gemm_tma.cuh's TMA_T_ROW: the u64s of one block's trace.
const phaseRow = 16

// add takes one launch's trace rows (gemm_tma.cuh's TMA_T_*: clocks at
// entry, waited, first stage, MMAs done, end; global timer at entry and
// end; the multiprocessor; under a split, clocks at its partial tile
// staged, the cluster's barrier passed and its rows stored, else 0).
func (p *gemmPhases) add(rows []uint64) {
	var starts, ends []float64
	sms := map[uint64]bool{}
	for r := 0; r+phaseRow <= len(rows); r += phaseRow {
		c := rows[r : r+phaseRow]
		d := func(a, b int) float64 { return float64(int64(c[b] - c[a])) }
		p.wait = append(p.wait, d(0, 1))
		p.first = append(p.first, d(1, 2))
		p.mma = append(p.mma, d(2, 3))
		p.epi = append(p.epi, d(3, 4))
		if c[8] != 0 {
			p.stage = append(p.stage, d(3, 8))
			p.peers = append(p.peers, d(8, 9))
			p.reduce = append(p.reduce, d(9, 10))
			p.last = append(p.last, d(10, 4))
		}
		p.cycles += d(0, 4)
		p.ns += float64(int64(c[6] - c[5]))
		starts, ends = append(starts, float64(c[5])), append(ends, float64(c[6]))
		sms[c[7]] = true
	}
	if len(starts) == 0 {
		return
	}
	s0, s1 := slices.Min(starts), slices.Max(starts)
	e0, e1 := slices.Min(ends), slices.Max(ends)
	p.skew, p.tail, p.span = append(p.skew, s1-s0), append(p.tail, e1-e0), append(p.span, e1-s0)
	p.sms = append(p.sms, float64(len(sms)))
}

// phaseValue is one reported figure and its unit (a benchmark metric's).
type phaseValue struct {
	v    float64
	unit string
}

// report is the phases' medians in us (cycles at the clock the blocks ran
// at: their cycles over their global-timer time).
func (p *gemmPhases) report() []phaseValue {
	med := func(v []float64) float64 {
		if len(v) == 0 {
			return 0
		}
		s := slices.Clone(v)
		slices.Sort(s)
		return s[len(s)/2]
	}
	perNs := 1.0
	if p.ns > 0 {
		perNs = p.cycles / p.ns
	}
	cyc := func(v []float64) float64 { return med(v) / perNs / 1e3 }
	v := []phaseValue{
		{cyc(p.wait), "wait-us"}, {cyc(p.first), "first-us"}, {cyc(p.mma), "mma-us"}, {cyc(p.epi), "epi-us"},
		{med(p.skew) / 1e3, "skew-us"}, {med(p.tail) / 1e3, "tail-us"}, {med(p.span) / 1e3, "span-us"},
		{med(p.sms), "SMs"}, {perNs, "GHz"},
	}
	if len(p.stage) > 0 {
		v = append(v, phaseValue{cyc(p.stage), "stage-us"}, phaseValue{cyc(p.peers), "peers-us"},
			phaseValue{cyc(p.reduce), "reduce-us"}, phaseValue{cyc(p.last), "last-us"})
	}
	return v
}

// TestGemmPhasesReport checks the phase arithmetic on two made-up blocks
// of one split launch at 2 GHz (no GPU), and that the rows are as long as
// the kernels write them.
func TestGemmPhasesReport(t *testing.T) {
	// Clocks: entry, waited, first, MMAs, end; global timer at entry and
	// end (ns); multiprocessor.
	rows := []uint64{
		1000, 3000, 5000, 15000, 17000, 100, 8100, 3, 15200, 16000, 16800, 0, 0, 0, 0, 0,
		0, 4000, 6000, 16000, 20000, 1100, 11100, 4, 16400, 17400, 19600, 0, 0, 0, 0, 0,
	}
	var p gemmPhases
	p.add(rows)
	got := map[string]float64{}
	for _, v := range p.report() {
		got[v.unit] = v.v
	}
	want := map[string]float64{
		"GHz": 2, "wait-us": 2, "first-us": 1, "mma-us": 5, "epi-us": 2,
		"skew-us": 1, "tail-us": 3, "span-us": 11, "SMs": 2,
		"stage-us": 0.2, "peers-us": 0.5, "reduce-us": 1.1, "last-us": 0.2,
	}
	for k, w := range want {
		if d := got[k] - w; d > 1e-9 || d < -1e-9 {
			t.Errorf("%s = %g, want %g", k, got[k], w)
		}
	}
	m := regexp.MustCompile(`#define TMA_T_ROW (\d+)`).FindStringSubmatch(kernelHeaders()["gemm_tma.cuh"])
	if m == nil || m[1] != strconv.Itoa(phaseRow) {
		t.Errorf("gemm_tma.cuh's TMA_T_ROW is %v, phaseRow %d", m, phaseRow)
	}
}

// TestPhasePlansTraced: BenchmarkGemmPhases' GEMMs at M = 256 but qkv
// plan onto configurations that have traced kernels, so that it measures
// them rather than skipping (on an H100's multiprocessor count); qkv's
// alternating 64 x 96 tile (kpWide) has none (gemm_tma.cuh's traced
// kernels have no alternating form) and runs untraced in the chain.
func TestPhasePlansTraced(t *testing.T) {
	if p := planGemmTMA(256, 2560, 2048, h100Device(nil), false, "auto", 0); p.cfg.name != "p1m" || tmaTraced["p1m"] {
		t.Errorf("qkv at M = 256 plans onto %s (traced %v), want p1m untraced", p.cfg.name, tmaTraced[p.cfg.name])
	}
	for _, s := range [][2]int{{2048, 2048}, {11264, 2048}, {2048, 5632}} {
		// o, gate_up and down under their epilogues (tmaPlan.epiPlan).
		if p := planGemmTMA(256, s[0], s[1], h100Device(nil), false, "auto", 0); !tmaTraced[p.cfg.name] && !tmaTraced[p.epiPlan().cfg.name] {
			t.Errorf("M=256 N=%d K=%d plans onto %s, which gemm_tma_trace.cu has no kernel of", s[0], s[1], p.cfg.name)
		}
	}
}
