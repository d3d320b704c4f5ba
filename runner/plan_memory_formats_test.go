package runner

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xrun-dev/xrun/engine/profile"
)

// memoryText checks p's memory against an H100 and returns the plan's
// memory section as written and with its whitespace collapsed.
func memoryText(t *testing.T, p *Plan) (raw, flat string) {
	t.Helper()
	if err := p.CheckMemory(MemoryOptions{GPU: "H100"}); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	bw := bufio.NewWriter(&b)
	p.Memory.writeText(bw, p.Cells)
	bw.Flush()
	return b.String(), strings.Join(strings.Fields(b.String()), " ")
}

// TestMemoryFP8: a dtype fp8 cell of Llama-3.1-8B holds its weights as
// engine/profile counts them (linear layers at a byte, their scales, the
// embedding and LM head at two: about 8.5 GiB, not bf16's 15.0), plus the
// FP8 GEMMs' quantized input among its workspaces, so more requests fit
// beside them; kv_cache_dtype fp8 halves the KV cache. The plan says so
// once, for the cells it concerns.
func TestMemoryFP8(t *testing.T) {
	s := mustParse(t, `params: {model: llama-3.1-8b, engine: auto, batch_size: 2048, dataset: {num_requests: 3000, input_mean: 1000, output_mean: 1000, input_stdev: 0, output_stdev: 0}}
matrix:
  include:
    - {dtype: bfloat16}
    - {dtype: fp8}
    - {dtype: bfloat16, kv_cache_dtype: fp8}
`)
	const total = 85017493504
	var m [3]CellMemory
	for i := range s.Plan.Cells {
		m[i] = s.Plan.Cells[i].memory(total, kvPaging{})
	}
	bf16, fp8, kv := m[0], m[1], m[2]
	mc := s.Plan.Cells[1].Model
	held := heldWeights(mc)
	want := profile.HeldWeightBytes(*mc, profile.Split{}, held, profile.Device{ElemBytes: 2}.WithFormats(profile.Formats{FP8: true}))
	if fp8.Weights != want || bf16.Weights != 2*held {
		t.Errorf("weights: fp8 %.0f (want %.0f), bf16 %.0f (want %.0f)", fp8.Weights, want, bf16.Weights, 2*held)
	}
	if g := gib(fp8.Weights); g < 8.4 || g > 8.6 {
		t.Errorf("fp8 weights %.2f GiB, want about 8.5", g)
	}
	// The quantized input of 8192 tokens, as wide as the MLP's down
	// projection's input (14336), and a scale per row.
	if d, want := fp8.Workspace-bf16.Workspace, 8192*(14336.0+4); d != want {
		t.Errorf("fp8 workspace %.0f bytes more than bf16's, want %.0f", d, want)
	}
	if !(fp8.InFlight > bf16.InFlight) {
		t.Errorf("in flight: fp8 %d, bf16 %d; want more under fp8", fp8.InFlight, bf16.InFlight)
	}
	if kv.KVMin*2 != bf16.KVMin || kv.KVBatch*2 != bf16.KVBatch || kv.Weights != bf16.Weights {
		t.Errorf("kv fp8: KV %.0f/%.0f, bf16 %.0f/%.0f; want half, weights unchanged", kv.KVMin, kv.KVBatch, bf16.KVMin, bf16.KVBatch)
	}
	raw, text := memoryText(t, s.Plan)
	for _, w := range []string{"1 cell of dtype fp8 hold the linear layers' weights", "1 cell of kv_cache_dtype fp8 hold the KV cache at a byte"} {
		if !strings.Contains(text, w) {
			t.Errorf("memory section lacks %q:\n%s", w, raw)
		}
	}
	if strings.Contains(text, "mxfp4") {
		t.Errorf("memory section mentions MXFP4 with no such cell:\n%s", raw)
	}

	// A plan without narrower formats says nothing of them.
	plain := mustParse(t, "params: {model: llama-3.1-8b, engine: cuda, dtype: bfloat16}\n")
	if err := plain.Plan.CheckMemory(MemoryOptions{GPU: "H100"}); err != nil {
		t.Fatal(err)
	}
	if n := formatsNote(plain.Plan.Memory, plain.Plan.Cells); n != "" {
		t.Errorf("bf16 plan: formats note %q", n)
	}
	if !(fp8.Need < bf16.Need) {
		t.Errorf("need: fp8 %.4g GiB, bf16 %.4g GiB", gib(fp8.Need), gib(bf16.Need))
	}
}

// TestMemoryPaged: where the lengths spread, the plan counts the requests
// in flight as the engine's default paged cache holds them (blocks at the
// mean length, engine.PagingPays), not fixed slots of the longest
// request; where they do not, or where fixed slots hold the batch, it
// keeps the slots.
func TestMemoryPaged(t *testing.T) {
	s := mustParse(t, `params: {engine: auto, dtype: fp8, kv_cache_dtype: fp8, batch_size: 2048, max_num_tokens: 8192, model: llama-3.1-8b}
matrix:
  include:
    - {dataset.num_requests: 1500, dataset.input_mean: 512, dataset.input_stdev: 256, dataset.output_mean: 512, dataset.output_stdev: 256}
    - {dataset.num_requests: 6000, dataset.input_mean: 128, dataset.input_stdev: 0, dataset.output_mean: 128, dataset.output_stdev: 0}
    - {dataset.num_requests: 1500, dataset.input_mean: 2000, dataset.input_stdev: 0, dataset.output_mean: 2000, dataset.output_stdev: 0}
`)
	const total = 85017493504 // an H100's
	for i, want := range []struct {
		paged bool
		lo    int
		hi    int
	}{
		// 31,600-odd blocks of 32 at 1,024 positions a request (the
		// engine held 1,500 of them, all it was given, on an H100; the
		// fixed slots of 4,096 positions 357).
		{true, 900, 1100},
		{false, 2048, 2048},
		// Lengths alike: paging holds no more than the 250 slots.
		{false, 250, 250},
	} {
		m := s.Plan.Cells[i].memory(total, kvPaging{})
		if m.Paged != want.paged || m.InFlight < want.lo || m.InFlight > want.hi {
			t.Errorf("cell %d (%s): in flight %d, paged %t; want %d..%d, paged %t", i, s.Plan.Cells[i].ID, m.InFlight, m.Paged, want.lo, want.hi, want.paged)
		}
	}
	raw, text := memoryText(t, s.Plan)
	if want := s.Plan.Cells[0].ID + " "; !strings.Contains(text, want) || !strings.Contains(text, "of 2,048 (paged)") || !strings.Contains(text, "(paged): counted as the CUDA backend's paged cache holds them") {
		t.Errorf("the plan does not mark the paged cell:\n%s", raw)
	}
}

// TestMemoryPagingSwitches: the plan counts requests in flight as the run's
// switches will hold them. XRUN_CUDA_KV_PAGED=0 (or XRUN_KV_PAGED=0) keeps
// fixed slots of the longest request even where lengths spread; `1` pages
// where auto would not (lengths alike); and the time estimate follows.
func TestMemoryPagingSwitches(t *testing.T) {
	spec := `params: {engine: auto, dtype: fp8, kv_cache_dtype: fp8, batch_size: 2048, max_num_tokens: 8192, model: llama-3.1-8b}
matrix:
  include:
    - {dataset.num_requests: 1500, dataset.input_mean: 512, dataset.input_stdev: 256, dataset.output_mean: 512, dataset.output_stdev: 256}
    - {dataset.num_requests: 1500, dataset.input_mean: 2000, dataset.input_stdev: 0, dataset.output_mean: 2000, dataset.output_stdev: 0}
`
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	type got struct {
		paged    [2]bool
		inFlight [2]int
		time0    time.Duration
	}
	plan := func(getenv func(string) string) got {
		s := mustParse(t, spec)
		if err := s.Plan.EstimateTime(EstimateOptions{GPU: "H100", Getenv: getenv}); err != nil {
			t.Fatal(err)
		}
		if err := s.Plan.CheckMemory(MemoryOptions{GPU: "H100", Getenv: getenv}); err != nil {
			t.Fatal(err)
		}
		var g got
		for i := range 2 {
			g.paged[i], g.inFlight[i] = s.Plan.Memory.Cells[i].Paged, s.Plan.Memory.Cells[i].InFlight
		}
		g.time0 = s.Plan.Estimate.Cells[0].Time
		return g
	}
	def := plan(nil)
	if !def.paged[0] || def.paged[1] {
		t.Fatalf("defaults: paged %v, want the spread cell only", def.paged)
	}
	for _, getenv := range []func(string) string{env("XRUN_CUDA_KV_PAGED", "0"), env("XRUN_KV_PAGED", "0")} {
		off := plan(getenv)
		if off.paged[0] || off.paged[1] || off.inFlight[0] >= def.inFlight[0] {
			t.Errorf("paging off: paged %v, %d in flight at the spread cell; want fixed slots, fewer than the default's %d", off.paged, off.inFlight[0], def.inFlight[0])
		}
		if off.time0 <= def.time0 {
			t.Errorf("paging off: the spread cell's estimate %v, want longer than the default's %v (fewer requests at once)", off.time0, def.time0)
		}
	}
	on := plan(env("XRUN_CUDA_KV_PAGED", "1"))
	if !on.paged[0] || !on.paged[1] || on.inFlight[1] < def.inFlight[1]*9/10 {
		t.Errorf("XRUN_CUDA_KV_PAGED=1: paged %v, %d in flight alike (fixed %d); want every cell paged, about as many", on.paged, on.inFlight[1], def.inFlight[1])
	}
	// 4,000 positions a request: 125 blocks of 32, 16 of 256 (4,096).
	if big := plan(env("XRUN_CUDA_KV_PAGED", "1", "XRUN_KV_BLOCK", "256")); big.inFlight[1] >= on.inFlight[1] {
		t.Errorf("blocks of 256: %d in flight at 2000/2000, want fewer than blocks of 32's %d (each request rounds up to its blocks)", big.inFlight[1], on.inFlight[1])
	}
}

// TestMeasuredPaging: cells read from --results are simulated with the KV
// paging their run's recorded switches set, not the defaults.
func TestMeasuredPaging(t *testing.T) {
	raw, err := os.ReadFile("testdata/plan/estimate-results/results.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		switches map[string]string
		mode     string
		block    int
	}{
		{nil, "auto", 32},
		{map[string]string{"XRUN_CUDA_KV_PAGED": "1", "XRUN_KV_BLOCK": "64"}, "1", 64},
		{map[string]string{"XRUN_KV_PAGED": "0"}, "0", 32},
	} {
		var doc map[string]any
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		if c.switches != nil {
			doc["environment"].(map[string]any)["switches"] = c.switches
		}
		dir := t.TempDir()
		b, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "results.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		est := &Estimate{}
		est.Device, est.GPU, est.Memory, _ = estimateDevice("H100")
		m, err := readMeasurements(dir, est)
		if err != nil {
			t.Fatal(err)
		}
		known := 0
		for _, mc := range m.cells {
			if !mc.known {
				continue
			}
			known++
			if mc.w.paging.mode != c.mode || mc.w.paging.block != c.block {
				t.Errorf("switches %v: cell %s simulated with paging %+v, want mode %s, blocks of %d", c.switches, mc.cell.ID, mc.w.paging, c.mode, c.block)
			}
		}
		if known == 0 {
			t.Fatalf("switches %v: no measured cell had a known workload", c.switches)
		}
	}
}
