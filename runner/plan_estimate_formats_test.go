package runner

import (
	"math"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/profile"
	"github.com/xrun-dev/xrun/results"
)

// TestEstimateFP8: a dtype fp8 cell's roofline reads its linear layers'
// weights at a byte and runs their FLOPs at the FP8 ceiling, as the cell
// roofline does: a memory-bound decode pass shrinks by its bytes' ratio, a
// compute-bound prefill by its FLOPs' blend of the two ceilings; and the
// plan says what it took for FP8.
func TestEstimateFP8(t *testing.T) {
	s := mustParse(t, `params: {model: llama-3.1-8b, engine: cuda, batch_size: 1, max_num_tokens: 8192, warmup: 0, dataset: {num_requests: 1, input_stdev: 0, output_stdev: 0}}
matrix:
  include:
    - {dtype: bfloat16, dataset.input_mean: 1, dataset.output_mean: 1001}
    - {dtype: fp8, dataset.input_mean: 1, dataset.output_mean: 1001}
    - {dtype: bfloat16, dataset.input_mean: 8192, dataset.output_mean: 1}
    - {dtype: fp8, dataset.input_mean: 8192, dataset.output_mean: 1}
`)
	p := s.Plan
	if err := p.EstimateTime(EstimateOptions{GPU: "H100"}); err != nil {
		t.Fatal(err)
	}
	dev, _ := profile.GPUDevice("NVIDIA H100 80GB HBM3")
	fp8Dev := dev.WithFormats(profile.Formats{FP8: true})
	mc := p.Cells[0].Model
	ratio := func(it engine.IterationRecord, gen float64) float64 {
		a, _ := fp8Dev.Time(profile.RankIterationWorkOn(*mc, profile.Split{}, it, gen, fp8Dev))
		b, _ := dev.Time(profile.RankIterationWorkOn(*mc, profile.Split{}, it, gen, dev))
		return a / b
	}
	e := p.Estimate
	decode := e.Cells[1].Pass.Seconds() / e.Cells[0].Pass.Seconds()
	if want := ratio(engine.IterationRecord{GenRequests: 1}, 1+1001.0/2); math.Abs(decode-want) > 0.002 || decode > 0.6 {
		t.Errorf("decode pass fp8 / bf16 = %.4f, want %.4f (the bytes' ratio)", decode, want)
	}
	prefill := e.Cells[3].Pass.Seconds() / e.Cells[2].Pass.Seconds()
	if want := ratio(engine.IterationRecord{CtxTokens: 8192, CtxRequests: 1}, 0); math.Abs(prefill-want) > 1e-3 || !(want > 0.5 && want < 1) {
		t.Errorf("prefill pass fp8 / bf16 = %.4f, want %.4f (between the ceilings)", prefill, want)
	}
	note := strings.Join(e.Notes, "\n")
	if !strings.Contains(note, "2 cells of dtype fp8") || !strings.Contains(note, "the FP8 ceiling, 1596 TFLOP/s") {
		t.Errorf("notes %q: want the FP8 caveat for 2 cells", e.Notes)
	}
	if n := fp8Note(1, profile.Device{PeakFLOPs: 300e12}); !strings.Contains(n, "the bf16 GEMM ceiling (xrun knows no FP8 one") {
		t.Errorf("no FP8 ceiling: %q", n)
	}
}

// TestFlatWorkloadFormats: a measured cell's formats come from its
// parameters in results.json as its roofline read them, so that --results
// scales its times by a roofline of the same bytes; an external engine's
// dtype is its tool's.
func TestFlatWorkloadFormats(t *testing.T) {
	base := results.Params{"model": "gpt-oss-20b", "batch_size": 8, "max_num_tokens": 8192, "dataset.generator": GenNorm,
		"dataset.num_requests": 16, "dataset.input_mean": 128, "dataset.output_mean": 128}
	for _, c := range []struct {
		set  results.Params
		want profile.Formats
	}{
		{results.Params{"engine": "cuda"}, profile.Formats{}},
		{results.Params{"engine": "cuda", "moe_weights": "mxfp4"}, profile.Formats{MXFP4Experts: true}},
		{results.Params{"engine": "auto", "moe_weights": "auto"}, profile.Formats{}},
		{results.Params{"model": "llama-3.1-8b", "engine": "cuda", "dtype": "fp8"}, profile.Formats{FP8: true}},
		{results.Params{"model": "llama-3.1-8b", "engine": "auto", "kv_cache_dtype": "fp8"}, profile.Formats{KVFP8: true}},
		{results.Params{"model": "llama-3.1-8b", "engine": "command", "dtype": "fp8"}, profile.Formats{}},
	} {
		p := results.Params{}
		for k, v := range base {
			p[k] = v
		}
		for k, v := range c.set {
			p[k] = v
		}
		w, ok := flatWorkload(p)
		if !ok || w.formats != c.want {
			t.Errorf("%v: formats %+v (ok %v), want %+v", c.set, w.formats, ok, c.want)
		}
	}
}
