package profile

import (
	"maps"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/results/layout"
)

// Records as a cell's worker writes them: pass 0 and 1 timed (iterations
// 0 and 1 warm-up), pass 2 profiled. Every pass serves two requests of 4
// tokens in and 2 out (one warm-up request first). expert_load.csv is a
// tiny-moe cell's.
const (
	fixtureIterations = iterationsHeader + `0,false,0,1,4,0,0,1000,true,false
0,false,1,0,0,1,1000,1000,true,false
0,false,2,2,8,0,2000,1000,false,false
0,false,3,0,0,2,3000,1000,false,false
1,false,0,1,4,0,0,1000,true,false
1,false,1,0,0,1,1000,1000,true,false
1,false,2,2,8,0,2000,1000,false,false
1,false,3,0,0,2,3000,1000,false,false
2,true,0,1,4,0,0,1000,true,true
2,true,1,0,0,1,1000,1000,true,true
2,true,2,2,8,0,2000,1000,false,true
2,true,3,0,0,2,3000,1000,false,true
`
	fixtureExpertLoad = `iteration,warmup,layer,max_over_mean,expert_0,expert_1,expert_2,expert_3,expert_4,expert_5,expert_6,expert_7
0,true,0,2,2,0,1,1,0,2,0,2
0,true,1,2,0,4,0,0,2,0,2,0
1,true,0,2,0,1,0,0,0,0,1,0
1,true,1,2,0,0,0,1,0,1,0,0
2,false,0,2,3,2,0,4,1,2,0,4
2,false,1,1,2,2,2,2,2,2,2,2
3,false,0,4,0,2,0,0,1,0,1,0
3,false,1,4,0,0,0,2,0,0,2,0
`
)

// recordsDir is a cell directory holding files (name -> content).
func recordsDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// fixtureCell is a cell of model that ran on an H200, as the runner
// describes it: the first repeat's two requests of 4 tokens in and 2 out.
func fixtureCell(model string) RooflineCell {
	return RooflineCell{Model: model, GPU: "NVIDIA H200", Backend: "cuda/cublaslt",
		FirstRepeat: map[string]float64{"num_requests": 2, "total_input_tokens": 8, "total_output_tokens": 4, "system_output_throughput_tok_s": 1e6}}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Max(math.Abs(a), math.Abs(b)) }

// TestRooflineByHand checks the floor of the fixture's timed iterations
// (iteration 2: two prompts of 4 tokens, 8 prefill tokens; iteration 3:
// two decoding requests; each request attends to 4 + 2/2 = 5 positions on
// average) against sums done by hand from the models' shapes.
//
// tiny-llama (hidden 64, 2 layers, 4 heads, 2 KV heads, head dim 16, FFN
// 160, vocab 512), per layer: attention weights 64*16*(4+2*2) + 4*16*64 =
// 12,288; MLP 3*64*160 = 30,720; LM head 512*64 = 32,768; K and V 2*2*2*16
// = 128 elements per position; attention 4*2*4*16 = 512 FLOP per position.
// Weights read per iteration: 2*(2*12,288 + 2*30,720 + 32,768) = 237,568
// bytes (fp16).
//
//	iteration 2: bytes 237,568 + 2*128*8 = 239,616
//	             FLOPs 2*8*2*(12,288+30,720) + 2*2*32,768 + 512*8*(4/2) = 1,515,520
//	iteration 3: bytes 237,568 + 2*128*(2*5 + 2) = 240,640
//	             FLOPs 2*2*2*43,008 + 2*2*32,768 + 512*2*5 = 480,256
//
// tiny-moe (hidden 128, 2 layers, 4 heads, 2 KV heads, head dim 32, 8
// experts of FFN 256, top 2, vocab 2048): attention 49,152; one expert
// 3*128*256 = 98,304; router 128*8 = 1,024; LM head 262,144; K and V 256
// elements per position; attention 1,024 FLOP per position. expert_load.csv
// has 6 + 8 = 14 experts with tokens in iteration 2 and 3 + 2 = 5 in
// iteration 3.
//
//	iteration 2: bytes 2*(2*49,152 + 14*98,304 + 2*1,024 + 262,144) + 2*256*8 = 3,481,600
//	             FLOPs 2*8*2*(49,152 + 2*98,304 + 1,024) + 2*2*262,144 + 1,024*8*2 = 8,962,048
//	iteration 3: bytes 2*(2*49,152 + 5*98,304 + 2*1,024 + 262,144) + 2*256*12 = 1,714,176
//	             FLOPs 2*2*2*246,784 + 2*2*262,144 + 1,024*2*5 = 3,033,088
//
// On an H200 (4.3 TB/s, 790 TFLOP/s) every one of them is memory bound.
func TestRooflineByHand(t *testing.T) {
	const bw, flops = 4.3e12, 790e12
	denseDir := recordsDir(t, map[string]string{layout.IterationsFile: fixtureIterations})
	dense, err := CellRoofline(denseDir, fixtureCell("tiny-llama"))
	if err != nil || dense == nil {
		t.Fatalf("dense: %v, %v; want a roofline", dense, err)
	}
	wantBytes, wantFLOPs := 239616.0+240640, 1515520.0+480256
	floor := wantBytes / bw
	if !near(dense.Work.Bytes, wantBytes) || !near(dense.Work.FLOPs, wantFLOPs) || !near(dense.Seconds, floor) ||
		!near(dense.MemoryBoundSeconds, floor) || !near(dense.OutputTokS, 4/floor) || dense.Iterations != 2 {
		t.Errorf("dense: %+v\nwant bytes %g, FLOPs %g, floor %g s (all memory bound), %g tok/s, 2 iterations", *dense, wantBytes, wantFLOPs, floor, 4/floor)
	}
	if d := dense.Device; d.PeakBytesPerSec != bw || d.PeakFLOPs != flops || d.Name != "NVIDIA H200" || !strings.Contains(d.PeakSource, "measured") {
		t.Errorf("dense: ceilings %g B/s, %g FLOP/s of %q (%q)", d.PeakBytesPerSec, d.PeakFLOPs, d.Name, d.PeakSource)
	}
	if want := "iterations.csv (first repeat, warm-up left out)"; dense.Basis != want {
		t.Errorf("dense: basis %q, want %q", dense.Basis, want)
	}

	moeDir := recordsDir(t, map[string]string{layout.IterationsFile: fixtureIterations, layout.ExpertLoadFile: fixtureExpertLoad})
	moe, err := CellRoofline(moeDir, fixtureCell("tiny-moe"))
	if err != nil || moe == nil {
		t.Fatalf("moe: %v, %v; want a roofline", moe, err)
	}
	wantBytes, wantFLOPs = 3481600.0+1714176, 8962048.0+3033088
	floor = wantBytes / bw
	if !near(moe.Work.Bytes, wantBytes) || !near(moe.Work.FLOPs, wantFLOPs) || !near(moe.Seconds, floor) || !strings.Contains(moe.Basis, "experts reached from expert_load.csv") {
		t.Errorf("moe: %+v\nwant bytes %g, FLOPs %g, floor %g s", *moe, wantBytes, wantFLOPs, floor)
	}
	// Without expert_load.csv the experts reached are estimated, and the
	// basis says so.
	noload, err := CellRoofline(denseDir, fixtureCell("tiny-moe"))
	if err != nil || noload == nil || !strings.Contains(noload.Basis, "experts reached estimated (no expert_load.csv)") || noload.Work.Bytes == moe.Work.Bytes {
		t.Errorf("moe without expert_load.csv: %+v, %v; want an estimate that says so", noload, err)
	}

	// The same iterations against ceilings that put the prefill on the
	// compute side: 1 MB/s and 4 MFLOP/s. Iteration 2 takes
	// 1,515,520/4e6 = 0.37888 s (compute bound), iteration 3
	// 240,640/1e6 = 0.24064 s (memory bound).
	iters, err := readTimedIterations(filepath.Join(denseDir, layout.IterationsFile))
	if err != nil {
		t.Fatal(err)
	}
	mc, _ := engine.ZooModel("tiny-llama")
	f := RunFloor(mc, iters, nil, 5, Device{PeakBytesPerSec: 1e6, PeakFLOPs: 4e6, ElemBytes: 2})
	if !near(f.Seconds, 0.37888+0.24064) || !near(f.MemoryBoundSeconds, 0.24064) || f.Iterations != 2 {
		t.Errorf("slow device: floor %g s, %g s memory bound, %d iterations; want 0.61952, 0.24064, 2", f.Seconds, f.MemoryBoundSeconds, f.Iterations)
	}
	// Their recorded spans (duration_ns, 1 us each) summed beside the
	// floor, the memory-bound one's apart.
	if !near(f.MeasuredSeconds, 2e-6) || !near(f.MemoryBoundMeasuredSeconds, 1e-6) || f.MemoryBoundIterations != 1 {
		t.Errorf("slow device: measured %g s, %g s of it in %d memory-bound iterations; want 2e-06, 1e-06, 1",
			f.MeasuredSeconds, f.MemoryBoundMeasuredSeconds, f.MemoryBoundIterations)
	}

	// The experts counted from expert_load.csv, warm-up included (the
	// floor asks only for the timed ones).
	touched, err := readTouchedExperts(filepath.Join(moeDir, layout.ExpertLoadFile), 2, 8)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[int]int{0: 8, 1: 4, 2: 14, 3: 5}; !maps.Equal(touched, want) {
		t.Errorf("touched experts %v; want %v", touched, want)
	}
}

// TestCellRooflineCeilings: on a GPU xrun knows no ceilings for, the ones
// the CUDA backend measured and the cell's record keeps make the
// roofline, and on a known GPU too (they were measured on request); a GPU
// with neither gets none.
func TestCellRooflineCeilings(t *testing.T) {
	dir := recordsDir(t, map[string]string{layout.IterationsFile: fixtureIterations})
	const source = "measured by xrun on this GPU (GPU-1234) on 2026-11-21: device-to-device copy and float16 GEMM"
	measured := &engine.Ceilings{BytesPerSec: 1.6e12, FLOPs: 290e12, Device: "NVIDIA A100-SXM4-80GB", DType: "float16", Source: source}
	c := fixtureCell("tiny-llama")
	c.GPU, c.Ceilings = "NVIDIA A100-SXM4-80GB", measured
	a100, err := CellRoofline(dir, c)
	if err != nil {
		t.Fatal(err)
	}
	if d := a100.Device; d.PeakBytesPerSec != 1.6e12 || d.PeakFLOPs != 290e12 || d.PeakSource != source || d.Name != "NVIDIA A100-SXM4-80GB" {
		t.Errorf("A100 roofline %+v: want the recorded ceilings", d)
	}
	// The fixture's iterations are memory bound: the floor scales with
	// the bandwidth.
	h200, err := CellRoofline(dir, fixtureCell("tiny-llama"))
	if err != nil {
		t.Fatal(err)
	}
	if h200.Device.PeakBytesPerSec != 4.3e12 {
		t.Errorf("H200: %g B/s, want the known 4.3e12", h200.Device.PeakBytesPerSec)
	}
	if got, want := a100.Seconds/h200.Seconds, 4.3/1.6; math.Abs(got-want) > 1e-6*want {
		t.Errorf("floor A100 / H200 = %g, want %g (bandwidth bound)", got, want)
	}
	// Ceilings measured on a known GPU (XRUN_MEASURE_CEILINGS=1) are the
	// ones asked for: they win over the table, as in the diagnosis, under
	// the GPU's name.
	c.GPU = "NVIDIA H200"
	forced, err := CellRoofline(dir, c)
	if err != nil || forced.Device.PeakBytesPerSec != 1.6e12 || forced.Device.Name != "NVIDIA H200" {
		t.Errorf("H200 with measured ceilings recorded: %+v, %v; want those, under the GPU's name", forced, err)
	}
	// Half-measured ceilings are none.
	c.GPU, c.Ceilings = "NVIDIA A10", &engine.Ceilings{BytesPerSec: 1e12}
	if rf, err := CellRoofline(dir, c); rf != nil || err == nil || !strings.Contains(err.Error(), "no measured ceilings for NVIDIA A10, and the cell's record has none") {
		t.Errorf("A10: %v, %v; want no ceilings", rf, err)
	}
}

func TestCellRooflineRefuses(t *testing.T) {
	dir := recordsDir(t, map[string]string{layout.IterationsFile: fixtureIterations})
	warmOnly := recordsDir(t, map[string]string{layout.IterationsFile: iterationsHeader + "0,false,0,1,4,0,0,1000,true,false\n"})
	for _, tc := range []struct {
		name string
		dir  string
		edit func(c *RooflineCell)
		want string // "" = no roofline and no error
	}{
		{"unknown GPU", dir, func(c *RooflineCell) { c.GPU = "NVIDIA A10" }, "no measured ceilings for NVIDIA A10"},
		{"no model", dir, func(c *RooflineCell) { c.Model = "" }, "no model parameter"},
		{"unknown model", dir, func(c *RooflineCell) { c.Model = "no-such-model" }, "no-such-model"},
		{"no repeats", dir, func(c *RooflineCell) { c.FirstRepeat = nil }, "no timed repeat"},
		{"repeat without tokens", dir, func(c *RooflineCell) { c.FirstRepeat = map[string]float64{"num_requests": 2} }, "lacks num_requests or total_output_tokens"},
		{"records gone", t.TempDir(), nil, "no such file"},
		{"warm-up only", warmOnly, nil, "no timed iteration in pass 0"},
		{"benchmark program", warmOnly, func(c *RooflineCell) { c.Backend = "command/bench" }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fixtureCell("tiny-llama")
			if tc.edit != nil {
				tc.edit(&c)
			}
			rf, err := CellRoofline(tc.dir, c)
			if tc.want == "" {
				if rf != nil || err != nil {
					t.Errorf("got %v, %v; want neither", rf, err)
				}
				return
			}
			if rf != nil || err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, %v; want an error containing %q", rf, err, tc.want)
			}
		})
	}
}

func TestParseRooflineCSVErrors(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"empty", "", "empty"},
		{"no column", "pass,iteration\n", "header has no profiled column"},
		{"bad number", iterationsHeader + "0,false,x,1,4,0,0,1,false,false\n", "f.csv:2: iteration: \"x\"; expected a non-negative integer"},
		{"bad bool", iterationsHeader + "0,no,1,1,4,0,0,1,false,false\n", "f.csv:2: profiled: \"no\"; expected true or false"},
		{"short row", iterationsHeader + "0,false,1\n", "f.csv:2: ctx_requests: missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseTimedIterations("f.csv", strings.NewReader(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v; want %q", err, tc.want)
			}
		})
	}
	const head = "iteration,warmup,layer,max_over_mean,expert_0,expert_1\n"
	for _, tc := range []struct{ name, in, want string }{
		{"expert count", "iteration,warmup,layer,max_over_mean,expert_0\n", "1 expert columns; the model has 2 experts"},
		{"layer", head + "0,false,2,1,1,1\n", "f.csv:2: layer: 2; the model has 2 layers"},
		{"count", head + "0,false,0,1,1,-1\n", "f.csv:2: expert_1: \"-1\""},
		{"fields", head + "0,false,0,1,1\n", "f.csv:2: 5 fields; expected 6"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseTouchedExperts("f.csv", strings.NewReader(tc.in), 2, 2)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v; want %q", err, tc.want)
			}
		})
	}
}

const iterationsHeader = "pass,profiled,iteration,ctx_requests,ctx_tokens,gen_requests,start_ns,duration_ns,warmup,in_window\n"

func FuzzParseTimedIterations(f *testing.F) {
	f.Add(iterationsHeader + "0,false,3,0,0,2,3000,1000,false,false\n")
	f.Add("pass,profiled\n0,true\n")
	f.Fuzz(func(t *testing.T, in string) {
		iters, err := parseTimedIterations("f.csv", strings.NewReader(in))
		if err != nil && !strings.Contains(err.Error(), "f.csv") {
			t.Errorf("error without the file name: %v", err)
		}
		for _, it := range iters {
			if it.CtxRequests < 0 || it.CtxTokens < 0 || it.GenRequests < 0 {
				t.Errorf("negative count in %+v", it)
			}
		}
	})
}

func FuzzParseTouchedExperts(f *testing.F) {
	f.Add("iteration,warmup,layer,max_over_mean,expert_0,expert_1\n0,false,1,1,2,0\n")
	f.Add("iteration,layer,expert_0\n")
	f.Fuzz(func(t *testing.T, in string) {
		m, err := parseTouchedExperts("f.csv", strings.NewReader(in), 2, 2)
		if err != nil {
			if !strings.Contains(err.Error(), "f.csv") {
				t.Errorf("error without the file name: %v", err)
			}
			return
		}
		for it, n := range m {
			if rows := strings.Count(in, "\n") + 1; n < 0 || n > 2*rows {
				t.Errorf("iteration %d: %d experts", it, n)
			}
		}
	})
}
