package profile

import (
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/layout"
)

// rooflineFixture is testdata/roofline as results.json would list it: an
// H200 host, two requests of 4 tokens in and 2 out per repeat (one warm-up
// request), cells that ran on the GPU (dense, MoE with and without
// expert_load.csv, one whose records are gone) and one on the CPU.
func rooflineFixture() *results.Results {
	r := &results.Results{Environment: results.Environment{GPUs: []results.GPU{{Index: 0, Name: "NVIDIA H200"}}}}
	reps := []results.Metrics{
		{"num_requests": 2, "total_input_tokens": 8, "total_output_tokens": 4, "system_output_throughput_tok_s": 1e6},
		{"num_requests": 2, "total_input_tokens": 8, "total_output_tokens": 4, "system_output_throughput_tok_s": 2e6},
		{"num_requests": 2, "total_input_tokens": 8, "total_output_tokens": 4, "system_output_throughput_tok_s": 3e6},
	}
	for _, c := range []struct{ id, model string }{
		{"dense-gpu", "tiny-llama"}, {"moe-gpu", "tiny-moe"}, {"moe-noload", "tiny-moe"}, {"cpu", "tiny-llama"}, {"broken", "tiny-llama"},
	} {
		r.Cells = append(r.Cells, results.Cell{ID: c.id, Status: results.StatusOK, Repeats: reps,
			Params: results.Params{"model": c.model, "engine": "auto", "dtype": "float16"}})
	}
	r.Cells = append(r.Cells, results.Cell{ID: "failed", Status: results.StatusFailed, Params: results.Params{"model": "tiny-llama"}})
	return r
}

func fixtureCellDir(id string) string { return filepath.Join("testdata", "roofline", "cells", id) }

func rooflineOf(t *testing.T, r *results.Results, id string) *results.Roofline {
	t.Helper()
	for i := range r.Cells {
		if r.Cells[i].ID == id {
			return r.Cells[i].Roofline
		}
	}
	t.Fatalf("no cell %s", id)
	return nil
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
	r := rooflineFixture()
	AttachRooflines(r, fixtureCellDir)
	const bw, flops = 4.3e12, 790e12

	dense := rooflineOf(t, r, "dense-gpu")
	if dense == nil {
		t.Fatal("dense-gpu: no roofline")
	}
	wantBytes, wantFLOPs := 239616.0+240640, 1515520.0+480256
	floor := wantBytes / bw
	if !near(dense.Bytes, wantBytes) || !near(dense.FLOPs, wantFLOPs) || !near(dense.FloorS, floor) ||
		!near(dense.MemoryBoundS, floor) || !near(dense.OutputTokS, 4/floor) || dense.Iterations != 2 {
		t.Errorf("dense: %+v\nwant bytes %g, FLOPs %g, floor %g s (all memory bound), %g tok/s, 2 iterations", *dense, wantBytes, wantFLOPs, floor, 4/floor)
	}
	if dense.PeakBytesPerS != bw || dense.PeakFLOPS != flops || dense.Device != "NVIDIA H200" || !strings.Contains(dense.PeakSource, "measured") {
		t.Errorf("dense: ceilings %g B/s, %g FLOP/s of %q (%q)", dense.PeakBytesPerS, dense.PeakFLOPS, dense.Device, dense.PeakSource)
	}

	moe := rooflineOf(t, r, "moe-gpu")
	if moe == nil {
		t.Fatal("moe-gpu: no roofline")
	}
	wantBytes, wantFLOPs = 3481600.0+1714176, 8962048.0+3033088
	floor = wantBytes / bw
	if !near(moe.Bytes, wantBytes) || !near(moe.FLOPs, wantFLOPs) || !near(moe.FloorS, floor) || !strings.Contains(moe.Basis, "experts reached from expert_load.csv") {
		t.Errorf("moe: %+v\nwant bytes %g, FLOPs %g, floor %g s", *moe, wantBytes, wantFLOPs, floor)
	}

	// The same iterations against ceilings that put the prefill on the
	// compute side: 1 MB/s and 4 MFLOP/s. Iteration 2 takes
	// 1,515,520/4e6 = 0.37888 s (compute bound), iteration 3
	// 240,640/1e6 = 0.24064 s (memory bound).
	iters, err := readTimedIterations(filepath.Join(fixtureCellDir("dense-gpu"), layout.IterationsFile))
	if err != nil {
		t.Fatal(err)
	}
	mc, _ := engine.ZooModel("tiny-llama")
	f := RunFloor(mc, iters, nil, 5, Device{PeakBytesPerSec: 1e6, PeakFLOPs: 4e6, ElemBytes: 2})
	if !near(f.Seconds, 0.37888+0.24064) || !near(f.MemoryBoundSeconds, 0.24064) || f.Iterations != 2 {
		t.Errorf("slow device: floor %g s, %g s memory bound, %d iterations; want 0.61952, 0.24064, 2", f.Seconds, f.MemoryBoundSeconds, f.Iterations)
	}

	// The experts counted from expert_load.csv, warm-up included (the
	// floor asks only for the timed ones).
	touched, err := readTouchedExperts(filepath.Join(fixtureCellDir("moe-gpu"), layout.ExpertLoadFile), 2, 8)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[int]int{0: 8, 1: 4, 2: 14, 3: 5}; !mapsEqual(touched, want) {
		t.Errorf("touched experts %v; want %v", touched, want)
	}
}

func mapsEqual(a, b map[int]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestAttachRooflines records what every kind of cell gets (golden): GPU
// cells a roofline, the MoE cell without expert_load.csv one with the
// experts estimated, the CPU cell and the failed one none, the cell whose
// records are gone an error and none.
func TestAttachRooflines(t *testing.T) {
	r := rooflineFixture()
	errs := AttachRooflines(r, fixtureCellDir)
	if len(errs) != 1 || !errors.Is(errs[0], fs.ErrNotExist) || !strings.Contains(errs[0].Error(), "cell broken: no roofline") {
		t.Errorf("errors %v; want one for cell broken (no iterations.csv)", errs)
	}
	// As results.json holds them: rounded, the fraction computed.
	data, err := results.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "roofline.results.json", data)

	// A second call looks again only at the ok cells still without one.
	var asked []string
	AttachRooflines(r, func(id string) string {
		asked = append(asked, id)
		return fixtureCellDir(id)
	})
	if strings.Join(asked, " ") != "cpu broken" {
		t.Errorf("second attach read the cells %q; want cpu broken", asked)
	}
	// Read back, the fraction is the median measured throughput (2e6)
	// over the roofline's.
	back, err := results.Parse(data, "results.json")
	if err != nil {
		t.Fatal(err)
	}
	rf := rooflineOf(t, back, "dense-gpu")
	if want := 2e6 / rf.OutputTokS; math.Abs(rf.Fraction-want) > 1e-5*want {
		t.Errorf("fraction %g; want %g", rf.Fraction, want)
	}
}

// TestAttachRooflinesHost: results from a host without a GPU are left
// alone at once; on a GPU without known ceilings each GPU cell needs the
// ones its record keeps, and these fixtures keep none.
func TestAttachRooflinesHost(t *testing.T) {
	r := rooflineFixture()
	r.Environment.GPUs = nil
	if errs := AttachRooflines(r, func(string) string { t.Error("read a cell"); return "" }); errs != nil {
		t.Errorf("no GPU: %v", errs)
	}
	r.Environment.GPUs = []results.GPU{{Name: "NVIDIA A10"}}
	errs := AttachRooflines(r, fixtureCellDir)
	if len(errs) != 4 {
		t.Errorf("A10: %d errors, want one per GPU cell (4): %v", len(errs), errs)
	}
	for _, err := range errs {
		if !strings.Contains(err.Error(), "no measured ceilings for NVIDIA A10, and the cell's record has none") {
			t.Errorf("A10: %v", err)
		}
	}
}

// TestCellRooflineRecordedCeilings: on a GPU xrun knows no ceilings for,
// the ones the CUDA backend measured and the cell's record keeps make the
// roofline, and on a known GPU too (they were measured on request).
func TestCellRooflineRecordedCeilings(t *testing.T) {
	dir := t.TempDir()
	src := fixtureCellDir("dense-gpu")
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const source = "measured by xrun on this GPU (GPU-1234) on 2026-11-21: device-to-device copy and float16 GEMM"
	rec := `{"backend": "cuda/cublaslt", "ceilings": {"bytes_per_s": 1.6e12, "flop_per_s": 290e12, "device": "NVIDIA A100-SXM4-80GB", "dtype": "float16", "source": "` + source + `"}}`
	if err := os.WriteFile(filepath.Join(dir, layout.CellFile), []byte(rec), 0o644); err != nil {
		t.Fatal(err)
	}
	r := rooflineFixture()
	c := r.Cells[0] // dense-gpu
	a100 := results.Environment{GPUs: []results.GPU{{Name: "NVIDIA A100-SXM4-80GB"}}}
	rf, err := CellRoofline(dir, &c, a100)
	if err != nil {
		t.Fatal(err)
	}
	if rf.PeakBytesPerS != 1.6e12 || rf.PeakFLOPS != 290e12 || rf.PeakSource != source || rf.Device != "NVIDIA A100-SXM4-80GB" {
		t.Errorf("A100 roofline %+v: want the recorded ceilings", rf)
	}
	// The fixture's iterations are memory bound: the floor scales with
	// the bandwidth. (The fixture's own record has no ceilings: an H200
	// cell uses the known ones.)
	h200, err := CellRoofline(fixtureCellDir("dense-gpu"), &c, r.Environment)
	if err != nil {
		t.Fatal(err)
	}
	if h200.PeakBytesPerS != 4.3e12 {
		t.Errorf("H200: %g B/s, want the known 4.3e12", h200.PeakBytesPerS)
	}
	// Ceilings measured on a known GPU (XRUN_MEASURE_CEILINGS=1) are the
	// ones asked for: they win over the table, as in the diagnosis.
	forced, err := CellRoofline(dir, &c, r.Environment)
	if err != nil || forced.PeakBytesPerS != 1.6e12 || forced.Device != "NVIDIA H200" {
		t.Errorf("H200 with measured ceilings recorded: %+v, %v; want those, under the environment's name", forced, err)
	}
	if got, want := rf.FloorS/h200.FloorS, 4.3/1.6; math.Abs(got-want) > 1e-6*want {
		t.Errorf("floor A100 / H200 = %g, want %g (bandwidth bound)", got, want)
	}
}

func TestCellRooflineSkipsAndRefuses(t *testing.T) {
	r := rooflineFixture()
	cell := r.Cells[0] // dense-gpu
	for _, tc := range []struct {
		name string
		env  results.Environment
		edit func(c *results.Cell)
		want string // "" = no roofline and no error
	}{
		{"no GPU listed", results.Environment{}, nil, "names no GPU"},
		{"unknown GPU", results.Environment{GPUs: []results.GPU{{Name: "NVIDIA A10"}}}, nil, "no measured ceilings for NVIDIA A10"},
		{"GPUs of two kinds", results.Environment{GPUs: []results.GPU{{Name: "NVIDIA H200"}, {Index: 1, Name: "NVIDIA H100 80GB HBM3"}}}, nil, "several kinds"},
		{"unknown model", r.Environment, func(c *results.Cell) { c.Params = results.Params{"model": "no-such-model"} }, "no-such-model"},
		{"no repeats", r.Environment, func(c *results.Cell) { c.Repeats = nil }, "no timed repeat"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cell
			c.Params = results.Params{"model": "tiny-llama"}
			if tc.edit != nil {
				tc.edit(&c)
			}
			rf, err := CellRoofline(fixtureCellDir("dense-gpu"), &c, tc.env)
			if rf != nil || err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, %v; want an error containing %q", rf, err, tc.want)
			}
		})
	}
	// Without cell.json the engine parameter decides: cpu never has one.
	c := cell
	c.Params = results.Params{"model": "tiny-llama", "engine": "cpu"}
	if rf, err := CellRoofline(t.TempDir(), &c, r.Environment); rf != nil || err != nil {
		t.Errorf("engine cpu: %v, %v; want neither", rf, err)
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
