package runner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/golden"
)

// planned loads a spec and estimates it.
func planned(t *testing.T, path string, o EstimateOptions) *Plan {
	t.Helper()
	spec, err := LoadSpec(path, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := spec.Plan.EstimateTime(o); err != nil {
		t.Fatal(err)
	}
	return spec.Plan
}

// cellEstimate is the estimate of the plan's cell whose id starts with prefix.
func cellEstimate(t *testing.T, p *Plan, prefix string) CellEstimate {
	t.Helper()
	for i := range p.Cells {
		if strings.HasPrefix(p.Cells[i].ID, prefix) {
			return p.Estimate.Cells[i]
		}
	}
	t.Fatalf("no cell %s*", prefix)
	return CellEstimate{}
}

// Estimates from a results directory, rendered: the default (roofline)
// estimates of the same specs are TestPlanGolden's.
func TestPlanEstimateGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec string
		o    EstimateOptions
	}{
		// Measured on an H100, estimated for one: times as measured.
		{"estimate-results", "testdata/plan/estimate.yaml", EstimateOptions{Results: "testdata/plan/estimate-results"}},
		// The same measurements scaled to an H200 by the cells' rooflines,
		// on two GPUs.
		{"estimate-results-h200", "testdata/plan/estimate.yaml", EstimateOptions{GPU: "H200", GPUs: 2, Results: "testdata/plan/estimate-results"}},
		// The nightly, from 7 of its cells measured on an H100.
		{"experiments-nightly-h100", "../experiments/nightly.yaml", EstimateOptions{Results: "testdata/plan/nightly-h100"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := planned(t, tc.spec, tc.o)
			var text, js bytes.Buffer
			if err := p.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			if err := p.WriteJSON(&js); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, "plan/"+tc.name+".txt.golden", text.Bytes())
			golden.Check(t, "plan/"+tc.name+".json.golden", js.Bytes())
		})
	}
}

// Which measurement each cell of testdata/plan/estimate.yaml is estimated
// from, with testdata/plan/estimate-results (measured on an H100).
func TestEstimateFromResults(t *testing.T) {
	p := planned(t, "testdata/plan/estimate.yaml", EstimateOptions{Results: "testdata/plan/estimate-results"})
	for _, tc := range []struct {
		cell, basis, from string
	}{
		// Its own id: the median total latency (3025 ms).
		{"llama-3.1-8b_bs16_gemm-auto", BasisMeasured, "llama-3.1-8b_bs16_gemm-auto_noprof_cuda_norm-f1572fb2"},
		// The same parameters under another study's id.
		{"llama-3.1-8b_bs1_gemm-disable", BasisMeasured, "another-study-slug-45db6bc8"},
		// One parameter away from two measured cells: the slower
		// efficiency of the two, moved to the own GEMMs.
		{"llama-3.1-8b_bs16_gemm-disable", BasisSimilar, "llama-3.1-8b_bs16_gemm-auto_noprof_cuda_norm-f1572fb2"},
		// Its worker's record: passes and start-up as recorded.
		{"qwen3-30b-a3b_bs16", BasisMeasured, "qwen3-30b-a3b_bs16_gemm-auto_prof5-10_cuda_norm-0d330c04"},
		// Its measurement failed: the nearest measured cell instead.
		{"qwen3-30b-a3b_bs1_", BasisSimilar, ""},
		// No measured cell of its engine.
		{"llama-3.1-8b_bs32_noprof_trtllm", BasisRooflineExternal, ""},
		// A dataset file: no roofline, but measured on this very GPU kind.
		{"tiny-llama_bs2", BasisMeasured, "tiny-llama_bs2_gemm-auto_noprof_cuda_two-f3256029"},
		// Measured, but on the cpu engine: never estimated.
		{"tiny-dense", BasisNone, ""},
		{"mixtral-8x7b", BasisNone, ""},
	} {
		ce := cellEstimate(t, p, tc.cell)
		if ce.Basis != tc.basis || tc.from != "" && ce.From != tc.from {
			t.Errorf("%s: basis %s from %q, want %s from %q", tc.cell, ce.Basis, ce.From, tc.basis, tc.from)
		}
	}

	ms := func(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }
	if ce := cellEstimate(t, p, "llama-3.1-8b_bs16_gemm-auto"); ce.Pass != ms(3025) || ce.Startup != engineStartup ||
		ce.Time != 4*(ce.Pass+ce.Warmup)+engineStartup {
		t.Errorf("measured cell: %+v; want a 3025 ms pass, 4 repeats and the start-up", ce)
	}
	// The record: the last timed pass (2.8 s, warm-up included), the first
	// session's start-up (3 s), the profiled pass (3.5 s).
	if ce := cellEstimate(t, p, "qwen3-30b-a3b_bs16"); ce.Pass+ce.Warmup != 2800*time.Millisecond ||
		ce.Startup != 3*time.Second || ce.Profiled != 3500*time.Millisecond {
		t.Errorf("recorded cell: pass %v + warm-up %v, start-up %v, profiled %v; want 2.8s, 3s, 3.5s", ce.Pass, ce.Warmup, ce.Startup, ce.Profiled)
	}
	// The similar cell reaches its neighbour's efficiency, halved on the
	// own GEMMs at batch 16.
	auto := cellEstimate(t, p, "llama-3.1-8b_bs16_gemm-auto")
	dis := cellEstimate(t, p, "llama-3.1-8b_bs16_gemm-disable")
	if math.Abs(dis.Efficiency-auto.Efficiency*ownGEMMDerate) > 1e-9 || math.Abs(dis.Pass.Seconds()-2*auto.Pass.Seconds()) > 1e-6 {
		t.Errorf("similar cell: efficiency %g, pass %v; want half of %g and twice %v", dis.Efficiency, dis.Pass, auto.Efficiency, auto.Pass)
	}
	if r := p.Estimate.Results; r == nil || r.Unused != "" || r.Study != "estimate" || r.GPU != "NVIDIA H100 80GB HBM3" {
		t.Errorf("results: %+v", r)
	}
}

// A measurement on one GPU predicts another by the cell's two rooflines.
func TestEstimateScalesAcrossGPUs(t *testing.T) {
	h100 := planned(t, "testdata/plan/estimate.yaml", EstimateOptions{Results: "testdata/plan/estimate-results"})
	h200 := planned(t, "testdata/plan/estimate.yaml", EstimateOptions{GPU: "nvidia h200", Results: "testdata/plan/estimate-results"})
	roof100 := planned(t, "testdata/plan/estimate.yaml", EstimateOptions{})
	roof200 := planned(t, "testdata/plan/estimate.yaml", EstimateOptions{GPU: "h200"})
	const id = "llama-3.1-8b_bs16_gemm-auto"
	a, b := cellEstimate(t, h100, id), cellEstimate(t, h200, id)
	ra, rb := cellEstimate(t, roof100, id), cellEstimate(t, roof200, id)
	want := a.Pass.Seconds() * (rb.Pass + rb.Warmup).Seconds() / (ra.Pass + ra.Warmup).Seconds()
	if b.Basis != BasisMeasured || math.Abs(b.Pass.Seconds()-want) > 1e-6 || b.Pass >= a.Pass {
		t.Errorf("H200 from H100 measurements: %v (%s), want %.4fs, less than the H100's %v", b.Pass, b.Basis, want, a.Pass)
	}
	// A dataset file has no roofline to scale by: no estimate off the GPU
	// it was measured on.
	if ce := cellEstimate(t, h200, "tiny-llama_bs2"); ce.Basis != BasisNone {
		t.Errorf("dataset-file cell on another GPU: %+v, want no estimate", ce)
	}
	if h200.Estimate.GPU != "H200" || roof200.Estimate.GPU != "H200" {
		t.Errorf("GPU names: %q, %q; want H200", h200.Estimate.GPU, roof200.Estimate.GPU)
	}
}

// The roofline estimate: passes at the stated efficiency, derated on the
// own GEMMs from batch 4, start-up per cell on xrun's engine and per pass
// on external ones, the profiled pass as a pass and a fifth.
func TestEstimateRoofline(t *testing.T) {
	p := planned(t, "testdata/plan/estimate.yaml", EstimateOptions{})
	half := planned(t, "testdata/plan/estimate.yaml", EstimateOptions{Efficiency: 0.25})
	for _, id := range []string{"llama-3.1-8b_bs1_gemm-auto", "llama-3.1-8b_bs16_gemm-disable", "qwen3-30b-a3b_bs16"} {
		a, b := cellEstimate(t, p, id), cellEstimate(t, half, id)
		if a.Basis != BasisRoofline || math.Abs(b.Pass.Seconds()-2*a.Pass.Seconds()) > 1e-6 || math.Abs(b.Warmup.Seconds()-2*a.Warmup.Seconds()) > 1e-6 {
			t.Errorf("%s: at half the efficiency %v + %v, want twice %v + %v", id, b.Pass, b.Warmup, a.Pass, a.Warmup)
		}
	}
	// At batch 1 the own GEMMs are not derated; at 16 they are.
	if a, d := cellEstimate(t, p, "llama-3.1-8b_bs1_gemm-auto"), cellEstimate(t, p, "llama-3.1-8b_bs1_gemm-disable"); a.Time != d.Time {
		t.Errorf("batch 1: auto %v, disable %v; want equal", a.Time, d.Time)
	}
	a, d := cellEstimate(t, p, "llama-3.1-8b_bs16_gemm-auto"), cellEstimate(t, p, "llama-3.1-8b_bs16_gemm-disable")
	if d.Efficiency != DefaultEfficiency*ownGEMMDerate || math.Abs(d.Pass.Seconds()-2*a.Pass.Seconds()) > 1e-6 {
		t.Errorf("batch 16: disable at %g, pass %v; want %g and twice auto's %v", d.Efficiency, d.Pass, DefaultEfficiency*ownGEMMDerate, a.Pass)
	}
	// Its 2 warm-up requests run at batch 2: not derated.
	if math.Abs(d.Warmup.Seconds()-a.Warmup.Seconds()) > 1e-9 {
		t.Errorf("batch 16 warm-up: disable %v, auto %v; want equal", d.Warmup, a.Warmup)
	}
	q := cellEstimate(t, p, "qwen3-30b-a3b_bs16")
	// Its profiled pass stops after iteration 10 of 320: the warm-up's 2
	// requests in one wave (1 prefill and 63 decode iterations), then 4
	// waves of 16.
	if q.Profiled != time.Duration(float64(q.Pass+q.Warmup)*11/320*profileOverhead) || q.Time != 4*(q.Pass+q.Warmup)+q.Profiled+q.Startup {
		t.Errorf("profiled cell: %+v", q)
	}
	// Its start-up adds the warming of its decode batch sizes (1, 2, 4, 8
	// and 16: a one-token prefill and 3 decodes each), at its efficiency.
	var qc *Cell
	for i := range p.Cells {
		if strings.HasPrefix(p.Cells[i].ID, "qwen3-30b-a3b_bs16") {
			qc = &p.Cells[i]
		}
	}
	w, _ := cellWorkload(qc)
	sim, _ := w.simulate(p.Estimate.Device, p.Estimate.Memory)
	if warm := q.Startup - engineStartup; sim.shapes <= 0 || warm != seconds(sim.shapes/q.Efficiency) || warm > q.Pass/10 {
		t.Errorf("profiled cell's start-up %v: %v of warming, want %v (and little next to its pass, %v)", q.Startup, warm, seconds(sim.shapes/q.Efficiency), q.Pass)
	}
	ext := cellEstimate(t, p, "llama-3.1-8b_bs32_noprof_trtllm")
	if ext.Startup != 4*externalStartup || ext.Time != 4*(ext.Pass+ext.Warmup)+ext.Startup {
		t.Errorf("external cell: %+v; want start-up in each of 4 passes", ext)
	}
	e := p.Estimate
	if e.NotEstimated[cellEstimate(t, p, "tiny-dense").Note] != 1 || len(e.NotEstimated) != 3 || e.Estimated != 7 {
		t.Errorf("counts: %d estimated, not %v", e.Estimated, e.NotEstimated)
	}
	// The study: GPU time counts the tp 2 cell twice, the cold kernel cache
	// once.
	var total time.Duration
	for i := range p.Cells {
		total += e.Cells[i].Time * time.Duration(p.Cells[i].Params.GPUsPerCell)
	}
	if e.Total != total+coldKernelCache || e.ColdStart != coldKernelCache {
		t.Errorf("total %v, want %v + %v", e.Total, total, coldKernelCache)
	}
}

// The coarse schedule's roofline floor equals, within 2 %, the floor the
// committed results computed from every recorded iteration
// (engine/profile's CellRoofline): the estimate's only model of the
// engine's schedule.
func TestEstimateScheduleMatchesRecords(t *testing.T) {
	n := 0
	for _, dir := range []string{"../bench/results/gemm-plugin-h200", "../bench/results/hf-engine-h100", "testdata/plan/nightly-h100"} {
		res, _, err := results.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		dev, _, mem, ok := estimateDevice(res.Environment.GPUs[0].Name)
		if !ok {
			t.Fatalf("%s: no ceilings for %s", dir, res.Environment.GPUs[0].Name)
		}
		for i := range res.Cells {
			c := &res.Cells[i]
			if c.Roofline == nil {
				continue
			}
			if c.Params["model"] == "gpt-oss-20b" {
				// Recorded before GPT-OSS's sliding window was modelled
				// (issue 21): those floors count every cached position on
				// every layer, the estimate now half of them.
				continue
			}
			w, ok := flatWorkload(c.Params)
			if !ok {
				t.Fatalf("%s: no workload", c.ID)
			}
			sim, why := w.simulate(dev, mem)
			if why != "" || math.Abs(sim.pass/c.Roofline.FloorS-1) > 0.02 {
				t.Errorf("%s %s: simulated floor %.3fs (%s), recorded %.3fs", dir, c.ID, sim.pass, why, c.Roofline.FloorS)
			}
			n++
		}
	}
	if n < 20 {
		t.Errorf("compared %d cells, want the committed results' 20 or more", n)
	}
}

// The default efficiency errs long, never far: on the H100, cells of
// experiments/nightly.yaml (xrun's CUDA engine, dense and MoE, both GEMM
// paths; testdata/plan/nightly-h100) took from 0.55 to 1 times the timed
// pass their roofline estimate gives.
func TestEstimateAgainstMeasured(t *testing.T) {
	res, _, err := results.Load("testdata/plan/nightly-h100")
	if err != nil {
		t.Fatal(err)
	}
	dev, _, mem, _ := estimateDevice(res.Environment.GPUs[0].Name)
	for i := range res.Cells {
		c := &res.Cells[i]
		w, ok := flatWorkload(c.Params)
		if !ok {
			t.Fatalf("%s: no workload", c.ID)
		}
		sim, _ := w.simulate(dev, mem)
		est := sim.pass / (DefaultEfficiency * w.derate(sim.slots))
		measured := medianMetric(c, "total_latency_ms") / 1000
		if r := measured / est; r < 0.55 || r > 1.0 {
			t.Errorf("%s: measured %.2fs, estimated %.2fs (x%.2f)", c.ID, measured, est, r)
		}
	}
	if len(res.Cells) != 7 {
		t.Errorf("%d measured cells, want 7", len(res.Cells))
	}
}

// experiments/nightly.yaml fits a night: on one H100 its estimate stays
// within an hour, and it stays a broad sweep — so that an edit blowing the
// budget, or one meeting it by dropping what the nightly is for, fails.
func TestNightlyFitsAnHour(t *testing.T) {
	p := planned(t, "../experiments/nightly.yaml", EstimateOptions{GPU: "H100"})
	e := p.Estimate
	if e.Wall > time.Hour || e.Estimated+e.NotEstimated[cellEstimate(t, p, "tiny-moe").Note] != len(p.Cells) {
		t.Fatalf("nightly: %v on one H100 (%d of %d cells estimated); want an hour at most", e.Wall, e.Estimated, len(p.Cells))
	}
	t.Logf("nightly: %v on one H100, %d cells", e.Wall, len(p.Cells))
	if p.Spec.Repeats < results.TestableRepeats() {
		t.Errorf("repeats %d: compare needs %d", p.Spec.Repeats, results.TestableRepeats())
	}
	seen := map[string]map[string]bool{}
	see := func(k, v string) {
		if seen[k] == nil {
			seen[k] = map[string]bool{}
		}
		seen[k][v] = true
	}
	for i := range p.Cells {
		c := &p.Cells[i]
		if c.Params.Engine == "cpu" {
			see("cpu", "yes")
			continue
		}
		see("family", c.Model.Family)
		see("moe", formatValue(c.Model.MoE()))
		see("gemm_plugin", c.Params.GemmPlugin)
		see("batch_size", formatValue(c.Params.BatchSize))
		see("profiled", formatValue(len(c.Params.ProfileSpans()) > 0))
		see("shape", formatValue(c.Params.Dataset.InputMean > c.Params.Dataset.OutputMean)+formatValue(c.Params.Dataset.InputMean < c.Params.Dataset.OutputMean))
		if c.applies(pRoutingMode) {
			see("routing_mode", c.Params.RoutingMode)
		}
	}
	// Every zoo family that fits an H100 in 16 bits (Mixtral-8x7B's 93 GB
	// do not), on the GPU; the DeepSeek-V3 architecture once the CUDA
	// backend has MLA kernels.
	var fits []string
	for _, name := range engine.ModelNames() {
		mc, _ := engine.ZooModel(name)
		if mc.Params() > 1e9 && float64(mc.Params())*2+memContext < e.Memory && !slices.Contains(fits, mc.Family) && !engine.NeedsMLA(mc) {
			fits = append(fits, mc.Family)
		}
	}
	for k, min := range map[string]int{"family": len(fits), "moe": 2, "gemm_plugin": 2, "batch_size": 3, "profiled": 2, "shape": 3, "routing_mode": 2, "cpu": 1} {
		if len(seen[k]) < min {
			t.Errorf("the nightly covers %d values of %s (%v), want %d", len(seen[k]), k, seen[k], min)
		}
	}
}

func TestEstimateOptionErrors(t *testing.T) {
	spec, err := LoadSpec("testdata/plan/estimate.yaml", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		o    EstimateOptions
		want string
	}{
		{EstimateOptions{Efficiency: 1.5}, "--efficiency: 1.5: expected a share of the roofline in (0, 1], e.g. 0.5"},
		{EstimateOptions{Efficiency: -1}, "--efficiency: -1: expected"},
		{EstimateOptions{GPUs: -2}, "--gpus: -2: expected a number of GPUs >= 1"},
		{EstimateOptions{GPU: "A100"}, `--gpu: "A100": no known ceilings for it; expected one of H100, H200, or a GPU name containing one`},
		{EstimateOptions{Results: "testdata/plan/does-not-exist"}, "testdata/plan/does-not-exist: cannot read"},
		{EstimateOptions{Results: "testdata/plan"}, "is a directory without results.json"},
	} {
		err := spec.Plan.EstimateTime(tc.o)
		var bi interface{ BadInput() bool }
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.As(err, &bi) || !bi.BadInput() {
			t.Errorf("%+v: %v; want a bad-input error containing %q", tc.o, err, tc.want)
		}
	}
	if spec.Plan.Estimate != nil {
		t.Error("a refused estimate was kept")
	}
}

// Results measured without a GPU, or on one without known ceilings, say
// so and predict nothing.
func TestEstimateUnusableResults(t *testing.T) {
	for _, tc := range []struct {
		gpus []results.GPU
		want string
	}{
		{nil, "they were measured without a GPU"},
		{[]results.GPU{{Name: "NVIDIA A100-SXM4-80GB"}}, "NVIDIA A100-SXM4-80GB has no known ceilings to scale its times by"},
	} {
		dir := t.TempDir()
		res, _, err := results.Load("testdata/plan/estimate-results")
		if err != nil {
			t.Fatal(err)
		}
		res.Environment.GPUs = tc.gpus
		if err := results.WriteFile(filepath.Join(dir, "results.json"), res); err != nil {
			t.Fatal(err)
		}
		p := planned(t, "testdata/plan/estimate.yaml", EstimateOptions{Results: dir})
		if r := p.Estimate.Results; r == nil || r.Unused != tc.want {
			t.Errorf("results on %v: %+v, want unused: %s", tc.gpus, r, tc.want)
		}
		for i := range p.Cells {
			if b := p.Estimate.Cells[i].Basis; b == BasisMeasured || b == BasisSimilar {
				t.Errorf("%s: estimated from unusable results (%s)", p.Cells[i].ID, b)
			}
		}
		var text bytes.Buffer
		p.WriteText(&text)
		if !strings.Contains(text.String(), ": not used, "+tc.want) {
			t.Errorf("the plan does not say the results went unused:\n%s", text.String())
		}
	}
}

func TestLPTWall(t *testing.T) {
	s := func(n ...int) []time.Duration {
		out := make([]time.Duration, len(n))
		for i, x := range n {
			out[i] = time.Duration(x) * time.Second
		}
		return out
	}
	for _, tc := range []struct {
		times []time.Duration
		gpus  []int
		n     int
		want  time.Duration
	}{
		{nil, nil, 1, 0},
		{s(3, 5, 2), []int{1, 1, 1}, 1, 10 * time.Second},
		// Longest first: 5 | 3+2 on two GPUs.
		{s(3, 5, 2), []int{1, 1, 1}, 2, 5 * time.Second},
		{s(4, 4, 4, 4), []int{1, 1, 1, 1}, 3, 8 * time.Second},
		// A two-GPU cell takes both: 6, then 3 and 2 side by side.
		{s(3, 6, 2), []int{1, 2, 1}, 2, 9 * time.Second},
		// More GPUs than the run has: it takes them all.
		{s(6), []int{4}, 2, 6 * time.Second},
	} {
		if got := lptWall(tc.times, tc.gpus, tc.n); got != tc.want {
			t.Errorf("lptWall(%v, %v, %d) = %v, want %v", tc.times, tc.gpus, tc.n, got, tc.want)
		}
	}
}

func TestFmtEstimate(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "-", 400 * time.Millisecond: "0s", 45 * time.Second: "45s", 59600 * time.Millisecond: "1m00s",
		12*time.Minute + 5*time.Second: "12m05s", 62 * time.Minute: "1h02m", 26*time.Hour + 29*time.Minute + 40*time.Second: "26h30m",
	} {
		if got := fmtEstimate(d); got != want {
			t.Errorf("fmtEstimate(%v) = %q, want %q", d, got, want)
		}
	}
}

// The JSON plan's estimate: additive fields only, every cell with one.
func TestEstimateJSON(t *testing.T) {
	p := planned(t, "testdata/plan/estimate.yaml", EstimateOptions{})
	var b bytes.Buffer
	if err := p.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Estimate struct {
			GPU    string  `json:"gpu"`
			TotalS float64 `json:"total_s"`
			WallS  float64 `json:"wall_s"`
		} `json:"estimate"`
		Cells []struct {
			ID       string `json:"id"`
			Estimate *struct {
				Seconds float64 `json:"seconds"`
				Basis   string  `json:"basis"`
			} `json:"estimate"`
		} `json:"cells"`
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Estimate.GPU != "H100" || got.Estimate.TotalS != secs(p.Estimate.Total) || got.Estimate.WallS != secs(p.Estimate.Wall) {
		t.Errorf("estimate %+v", got.Estimate)
	}
	for i, c := range got.Cells {
		if c.Estimate == nil || c.Estimate.Basis != p.Estimate.Cells[i].Basis || c.Estimate.Seconds != secs(p.Estimate.Cells[i].Time) {
			t.Errorf("cell %s: estimate %+v", c.ID, c.Estimate)
		}
	}
	// Without an estimate the JSON is as before.
	spec, _ := LoadSpec("testdata/plan/estimate.yaml", LoadOptions{})
	b.Reset()
	spec.Plan.WriteJSON(&b)
	if strings.Contains(b.String(), `"estimate": {`) {
		t.Error("a plan without an estimate wrote one")
	}
}

// TestRoofPass: the roofline's estimate of one repeat is there for a cell
// of xrun's engine (longer for a longer dataset, on any GPU name, known or
// not) and not for one on the cpu engine.
func TestRoofPass(t *testing.T) {
	spec, err := ParseSpec("roof.yaml", []byte(`schema_version: 1
name: roof
params:
  model: tiny-llama
  dataset: {num_requests: 64, input_mean: 32}
matrix:
  engine: [cuda, cpu]
  dataset.output_mean: [16, 64]
`), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	roof := map[string]float64{}
	for i := range spec.Plan.Cells {
		c := &spec.Plan.Cells[i]
		for _, gpu := range []string{"NVIDIA H200", "Some GPU"} {
			r := roofPass(c, gpu)
			roof[fmt.Sprint(c.Params.Engine, c.Params.Dataset.OutputMean)] = r
			if (r > 0) != (c.Params.Engine == "cuda") {
				t.Errorf("%s on %s: roofPass %g", c.ID, gpu, r)
			}
		}
	}
	if !(roof["cuda64"] > roof["cuda16"]) {
		t.Errorf("roofPass: 64 outputs %g, 16 outputs %g: want the longer dataset longer", roof["cuda64"], roof["cuda16"])
	}
}
