package runner

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/golden"
	"github.com/xrun-dev/xrun/results/layout"
)

// TestResumeKeepsPriorRoofline: a resumed study whose finished cells'
// iterations.csv are gone (bench/gpu.sh's resume carries only what --resume
// reads) keeps the roofline the previous results.json gave a cell whose
// record is the very measurement that file shows, and no other.
func TestResumeKeepsPriorRoofline(t *testing.T) {
	spec, err := ParseSpec("rf.yaml", []byte(`schema_version: 1
name: rf
params:
  model: tiny-llama
  engine: cpu
  dataset: {num_requests: 2, input_mean: 4, output_mean: 2}
matrix:
  batch_size: [1, 2, 4]
repeats: 1
`), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s := &study{spec: spec, dir: dir, log: zerolog.Nop(), progress: noProgress{}, o: Options{CacheDir: dir, Resume: true}}
	sel, _ := selectCells(spec.Plan, nil)
	if err := s.buildPlan(sel); err != nil {
		t.Fatal(err)
	}
	if len(s.cells) != 3 {
		t.Fatalf("%d cells, want 3", len(s.cells))
	}
	// Full precision in the records, as workers write them; results.json
	// rounds to 6 significant digits.
	full := []results.Metrics{{"system_output_throughput_tok_s": 1217.83749123}}
	other := []results.Metrics{{"system_output_throughput_tok_s": 1100}}
	rf := func(tokS float64) *results.Roofline {
		return &results.Roofline{FloorS: 1, OutputTokS: tokS, Iterations: 10, Bytes: 1e9, Device: "NVIDIA H200",
			PeakBytesPerS: 4.3e12, PeakFLOPS: 790e12, PeakSource: "test"}
	}
	old := &results.Results{Name: "rf", Cells: []results.Cell{
		{ID: s.cells[0].cell.ID, Status: results.StatusOK, Repeats: full, Roofline: rf(2074)},  // kept: same repeats
		{ID: s.cells[1].cell.ID, Status: results.StatusOK, Repeats: other, Roofline: rf(4130)}, // measured again since
		{ID: s.cells[2].cell.ID, Status: results.StatusOK, Repeats: full, Roofline: rf(8142)},  // no record now
	}}
	if err := results.WriteDir(dir, old); err != nil {
		t.Fatal(err)
	}
	for _, rc := range s.cells[:2] {
		rc.record = &cellRecord{Cell: results.Cell{Status: results.StatusOK, Repeats: full}}
	}
	s.initResults(context.Background())
	s.write()
	if s.lastErr != nil {
		t.Fatal(s.lastErr)
	}
	got, err := results.ReadFile(filepath.Join(dir, layout.JSONFile))
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{2074, 0, 0}
	for i, c := range got.Cells {
		var have float64
		if c.Roofline != nil {
			have = c.Roofline.OutputTokS
		}
		if have != want[i] {
			t.Errorf("cell %s (%s): roofline output %v tok/s, want %v", c.ID, c.Status, have, want[i])
		}
	}
	if f := got.Cells[0].Roofline; f == nil || f.Fraction != 0.587194 {
		t.Errorf("kept roofline %+v: want its fraction recomputed from the kept repeats (1217.84 / 2074 = 0.587194)", f)
	}
}

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

func fixtureCellDir(id string) string {
	return layout.CellDir(filepath.Join("testdata", "roofline"), id)
}

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

// TestAttachRooflines records what every kind of cell gets (golden): GPU
// cells a roofline, the MoE cell without expert_load.csv one with the
// experts estimated, the CPU cell and the failed one none, the cell whose
// records are gone an error and none. engine/profile's TestRooflineByHand
// checks the floors themselves.
func TestAttachRooflines(t *testing.T) {
	r := rooflineFixture()
	errs := AttachRooflines(r, fixtureCellDir)
	if len(errs) != 1 || !errors.Is(errs[0], fs.ErrNotExist) || !strings.Contains(errs[0].Error(), "cell broken: no roofline") {
		t.Errorf("errors %v; want one for cell broken (no iterations.csv)", errs)
	}
	// Each of the profile's figures lands in its field: the dense cell's
	// work by hand (see TestRooflineByHand there), all memory bound on
	// the H200's 4.3 TB/s.
	dense := rooflineOf(t, r, "dense-gpu")
	const bytes, flops, bw = 239616.0 + 240640, 1515520.0 + 480256, 4.3e12
	if dense == nil || dense.Bytes != bytes || dense.FLOPs != flops || math.Abs(dense.FloorS-bytes/bw) > 1e-18 || dense.MemoryBoundS != dense.FloorS ||
		dense.OutputTokS != 4/dense.FloorS || dense.Iterations != 2 || dense.Device != "NVIDIA H200" || dense.PeakBytesPerS != bw ||
		dense.PeakFLOPS != 790e12 || !strings.Contains(dense.PeakSource, "measured") || dense.Basis != "iterations.csv (first repeat, warm-up left out)" {
		t.Errorf("dense-gpu: %+v", dense)
	}
	// As results.json holds them: rounded, the fraction computed.
	data, err := results.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "roofline.results.json", data)

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
// ones its record keeps, and these fixtures keep none; GPUs of two kinds
// give one error and no roofline.
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
	r.Environment.GPUs = []results.GPU{{Name: "NVIDIA H200"}, {Index: 1, Name: "NVIDIA H100 80GB HBM3"}}
	errs = AttachRooflines(r, func(string) string { t.Error("read a cell"); return "" })
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "no rooflines: the host has GPUs of several kinds") {
		t.Errorf("two kinds of GPU: %v; want one error", errs)
	}
}

// TestCellRooflineRecordedCeilings: the ceilings the CUDA backend
// measured, which the cell's record keeps, make the roofline on a GPU xrun
// knows none for, and on a known GPU too (they were measured on request).
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
	rf, err := cellRoofline(dir, &c, a100)
	if err != nil {
		t.Fatal(err)
	}
	if rf.PeakBytesPerS != 1.6e12 || rf.PeakFLOPS != 290e12 || rf.PeakSource != source || rf.Device != "NVIDIA A100-SXM4-80GB" {
		t.Errorf("A100 roofline %+v: want the recorded ceilings", rf)
	}
	// The fixture's own record has no ceilings: an H200 cell uses the
	// known ones, and the floor scales with the bandwidth.
	h200, err := cellRoofline(fixtureCellDir("dense-gpu"), &c, r.Environment)
	if err != nil {
		t.Fatal(err)
	}
	if h200.PeakBytesPerS != 4.3e12 {
		t.Errorf("H200: %g B/s, want the known 4.3e12", h200.PeakBytesPerS)
	}
	// Ceilings measured on a known GPU (XRUN_MEASURE_CEILINGS=1) are the
	// ones asked for: they win over the table, as in the diagnosis.
	forced, err := cellRoofline(dir, &c, r.Environment)
	if err != nil || forced.PeakBytesPerS != 1.6e12 || forced.Device != "NVIDIA H200" {
		t.Errorf("H200 with measured ceilings recorded: %+v, %v; want those, under the environment's name", forced, err)
	}
	if got, want := rf.FloorS/h200.FloorS, 4.3/1.6; math.Abs(got-want) > 1e-6*want {
		t.Errorf("floor A100 / H200 = %g, want %g (bandwidth bound)", got, want)
	}
	// An FP8 model's roofline keeps the rate its FP8 GEMMs were counted
	// at (twice the H200's measured bf16 GEMM); a float16 one none.
	if h200.PeakFP8FLOPS != 0 {
		t.Errorf("float16 cell: FP8 rate %g, want none", h200.PeakFP8FLOPS)
	}
	f8 := c
	f8.Params = maps.Clone(c.Params)
	f8.Params["dtype"] = "fp8"
	fp8, err := cellRoofline(fixtureCellDir("dense-gpu"), &f8, r.Environment)
	if err != nil || fp8.PeakFP8FLOPS != 2*h200.PeakFLOPS {
		t.Errorf("fp8 cell: %+v, %v; want the FP8 rate %g", fp8, err, 2*h200.PeakFLOPS)
	}
}

func TestCellRooflineSkipsAndRefuses(t *testing.T) {
	r := rooflineFixture()
	cell := r.Cells[0] // dense-gpu
	for _, tc := range []struct {
		name string
		env  results.Environment
		edit func(c *results.Cell)
		want string
	}{
		{"no GPU listed", results.Environment{}, nil, "names no GPU"},
		{"unknown GPU", results.Environment{GPUs: []results.GPU{{Name: "NVIDIA A10"}}}, nil, "no measured ceilings for NVIDIA A10"},
		{"GPUs of two kinds", results.Environment{GPUs: []results.GPU{{Name: "NVIDIA H200"}, {Index: 1, Name: "NVIDIA H100 80GB HBM3"}}}, nil, "several kinds"},
		{"no model", r.Environment, func(c *results.Cell) { c.Params = results.Params{} }, "no model parameter"},
		{"unknown model", r.Environment, func(c *results.Cell) { c.Params = results.Params{"model": "no-such-model"} }, "no-such-model"},
		{"no repeats", r.Environment, func(c *results.Cell) { c.Repeats = nil }, "no timed repeat"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cell
			c.Params = results.Params{"model": "tiny-llama"}
			if tc.edit != nil {
				tc.edit(&c)
			}
			rf, err := cellRoofline(fixtureCellDir("dense-gpu"), &c, tc.env)
			if rf != nil || err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, %v; want an error containing %q", rf, err, tc.want)
			}
		})
	}
	// Without cell.json the engine parameter decides: cpu never has one,
	// cuda always, auto where the environment lists a GPU.
	for _, tc := range []struct {
		engine string
		env    results.Environment
		ran    bool
	}{
		{"cpu", r.Environment, false}, {"cuda", results.Environment{}, true}, {"auto", r.Environment, true}, {"auto", results.Environment{}, false},
	} {
		c := cell
		c.Params = results.Params{"model": "tiny-llama", "engine": tc.engine}
		if got := ranOnGPU(rooflineRecord{}, &c, tc.env); got != tc.ran {
			t.Errorf("engine %s, %d GPUs, no record: ran on a GPU %v, want %v", tc.engine, len(tc.env.GPUs), got, tc.ran)
		}
	}
	c := cell
	c.Params = results.Params{"model": "tiny-llama", "engine": "cpu"}
	if rf, err := cellRoofline(t.TempDir(), &c, r.Environment); rf != nil || err != nil {
		t.Errorf("engine cpu: %v, %v; want neither", rf, err)
	}
	// The record's backend wins over the engine parameter.
	c.Params["engine"] = "auto"
	if rf, err := cellRoofline(fixtureCellDir("cpu"), &c, r.Environment); rf != nil || err != nil {
		t.Errorf("record of the cpu backend: %v, %v; want neither", rf, err)
	}
}

// TestRooflineRecord: the roofline reads backend and ceilings from
// cell.json as the worker writes it (cellRecord), and names the file when
// it cannot.
func TestRooflineRecord(t *testing.T) {
	dir := t.TempDir()
	c := &engine.Ceilings{BytesPerSec: 1.6e12, FLOPs: 290e12, Device: "NVIDIA A100-SXM4-80GB", DType: "float16", Source: "measured"}
	b, err := json.Marshal(&cellRecord{Cell: results.Cell{ID: "a", Status: results.StatusOK}, Backend: "cuda/cublaslt", Ceilings: c})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, layout.CellFile)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	rec, err := readRooflineRecord(dir)
	if err != nil || rec.Backend != "cuda/cublaslt" || rec.Ceilings == nil || *rec.Ceilings != *c {
		t.Errorf("read %+v, %v; want the record's backend and ceilings", rec, err)
	}
	if err := os.WriteFile(path, []byte(`{"backend": 1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readRooflineRecord(dir); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("bad record: %v; want an error naming %s", err, path)
	}
	if rec, err := readRooflineRecord(t.TempDir()); err != nil || rec != (rooflineRecord{}) {
		t.Errorf("no record: %+v, %v; want an empty one", rec, err)
	}
}

// TestAttachRooflinesSplit: a split cell's roofline is one GPU's share of
// its work (engine/profile's TestRooflineSplitByHand has the sums): the
// dense fixture at tp 2 on xrun's engine has half the floor and twice the
// throughput at it, so % of roofline (the fraction) halves; a trtllm cell
// at tp 2 x pp 2 divides the work evenly over 4 GPUs; tp and ep absent
// (results.json has them only when given) are 1.
func TestAttachRooflinesSplit(t *testing.T) {
	r := rooflineFixture()
	r.Cells = r.Cells[:1]
	base := r.Cells[0]
	for _, c := range []struct {
		id     string
		params results.Params
	}{
		{"tp2", results.Params{"engine": "cuda", "tp": 2.0}},
		{"tp2-ep2", results.Params{"engine": "cuda", "tp": 2.0, "ep": 2.0}},
		{"trtllm-tp2-pp2", results.Params{"engine": "trtllm", "tp": 2.0, "pp": 2.0}},
	} {
		cell := base
		cell.ID, cell.Params = c.id, results.Params{"model": "tiny-llama", "dtype": "float16"}
		for k, v := range c.params {
			cell.Params[k] = v
		}
		r.Cells = append(r.Cells, cell)
	}
	dir := func(string) string { return fixtureCellDir("dense-gpu") }
	if errs := AttachRooflines(r, dir); len(errs) != 0 {
		t.Fatal(errs)
	}
	whole := rooflineOf(t, r, "dense-gpu")
	for id, n := range map[string]float64{"tp2": 2, "tp2-ep2": 2, "trtllm-tp2-pp2": 4} {
		rf := rooflineOf(t, r, id)
		if rf == nil || math.Abs(rf.FloorS*n-whole.FloorS) > 1e-9*whole.FloorS || math.Abs(rf.OutputTokS-n*whole.OutputTokS) > 1e-6*rf.OutputTokS ||
			math.Abs(rf.Bytes*n-whole.Bytes) > 1e-6*whole.Bytes || !strings.Contains(rf.Basis, "per GPU") {
			t.Errorf("%s: %+v, want 1/%g of %+v", id, rf, n, whole)
		}
	}
	if b := rooflineOf(t, r, "trtllm-tp2-pp2").Basis; !strings.Contains(b, "divided evenly over 4 GPUs") {
		t.Errorf("trtllm basis %q", b)
	}
	if s := cellSplit(map[string]any{"engine": "cuda"}); s.TP != 1 || s.EP != 1 || s.GPUs != 0 {
		t.Errorf("no tp or ep: %+v", s)
	}
}
