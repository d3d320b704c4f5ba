package profile

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/model"
)

// TestDiagnoseFormats: a profiled pass's diagnosis counts its weights and
// KV cache as the cell's roofline does (RunFloor over the same
// iterations): FP8 linear layers at a byte with their FLOPs at the FP8
// ceiling, MXFP4 experts at 4.25 bits, the CPU's FP8 KV cache at a byte;
// and a compute-bound FP8 pass is measured against the blend of the FP8
// and bf16 ceilings. DiagnoseSummary (an external engine's) counts alike.
func TestDiagnoseFormats(t *testing.T) {
	h100, _ := GPUDevice("NVIDIA H100 80GB HBM3")
	ms := time.Millisecond
	pass := func(it engine.IterationRecord, d time.Duration) *engine.Result {
		it.Duration, it.Profiled = d, true
		return &engine.Result{Backend: "cuda", Iterations: []engine.IterationRecord{it},
			Requests: []engine.RequestRecord{{InputTokens: 1000, OutputTokens: 200}},
			Ops:      []model.OpRecord{{Name: "nvjet_qqtst_128x256", Start: 0, Duration: d - ms/10}}}
	}
	decode := engine.IterationRecord{GenRequests: 64}
	prefill := engine.IterationRecord{CtxRequests: 8, CtxTokens: 8192}
	for _, c := range []struct {
		model string
		dev   Device
		f     Formats
		it    engine.IterationRecord
	}{
		{"llama-3.1-8b", h100, Formats{FP8: true}, decode},
		{"llama-3.1-8b", h100, Formats{FP8: true}, prefill},
		{"gpt-oss-20b", h100, Formats{MXFP4Experts: true}, decode},
		{"tiny-llama", testDevice, Formats{FP8: true, KVFP8: true}, decode},
	} {
		mc, err := engine.LookupModel(c.model)
		if err != nil {
			t.Fatal(err)
		}
		res := pass(c.it, 20*ms)
		dev := c.dev.WithFormats(c.f)
		plain, got := Diagnose(res, mc, c.dev), Diagnose(res, mc, dev)
		want := RunFloor(mc, []engine.IterationRecord{c.it}, nil, 1100, dev).Work
		if !nearFP8(got.Work.Bytes, want.Bytes) || !nearFP8(got.Work.FLOPs, want.FLOPs) || !nearFP8(got.Work.FP8FLOPs, want.FP8FLOPs) {
			t.Errorf("%s %+v: diagnosis work %+v, roofline %+v", c.model, c.f, got.Work, want)
		}
		if !(got.Work.Bytes < plain.Work.Bytes) {
			t.Errorf("%s %+v: %g bytes, no fewer than without formats (%g)", c.model, c.f, got.Work.Bytes, plain.Work.Bytes)
		}
		sum := DiagnoseSummary(Summarize(res.Ops), res, mc, dev)
		if !nearFP8(sum.Work.Bytes, want.Bytes) || !nearFP8(sum.Work.FP8FLOPs, want.FP8FLOPs) {
			t.Errorf("%s %+v: summary diagnosis work %+v, roofline %+v", c.model, c.f, sum.Work, want)
		}
	}

	// Llama-3.1-8B's prefill in FP8 is compute bound: its ceiling is the
	// FP8 and bf16 rates blended by its FLOPs, its floor Device.Time's.
	mc, _ := engine.LookupModel("llama-3.1-8b")
	dev := h100.WithFormats(Formats{FP8: true})
	d := Diagnose(pass(prefill, 20*ms), mc, dev)
	i := slices.IndexFunc(d.Findings, func(f Finding) bool { return f.Pattern == PatternComputeBound })
	if i < 0 {
		t.Fatalf("no compute-bound finding:\n%s", strings.Join(d.Lines(), "\n"))
	}
	w, f := d.Work, d.Findings[i]
	peak := w.FLOPs / ((w.FLOPs-w.FP8FLOPs)/h100.PeakFLOPs + w.FP8FLOPs/h100.PeakFP8FLOPs)
	floor, _ := dev.Time(w)
	if !nearFP8(f.Figures["peak_flop_per_s"], peak) || !(peak > h100.PeakFLOPs && peak < h100.PeakFP8FLOPs) ||
		!nearFP8(f.Figures["roofline_fraction"], floor/0.02) || !nearFP8(f.Figures["ridge_point_flop_per_byte"], peak/h100.PeakBytesPerSec) {
		t.Errorf("figures %v; want the ceiling %g between bf16's and FP8's, floor %g s", f.Figures, peak, floor)
	}
	if !strings.Contains(f.Text, "of the FLOPs in FP8 at 1.60 PFLOP/s, the rest at 798 TFLOP/s") {
		t.Errorf("finding %q does not say how its ceiling blends", f.Text)
	}
	// Without FP8 the ceiling is bf16's alone, as before.
	d = Diagnose(pass(prefill, 20*ms), mc, h100)
	if i := slices.IndexFunc(d.Findings, func(f Finding) bool { return f.Pattern == PatternComputeBound }); i < 0 ||
		d.Findings[i].Figures["peak_flop_per_s"] != h100.PeakFLOPs || strings.Contains(d.Findings[i].Text, "FP8") {
		t.Errorf("bf16 prefill:\n%s", strings.Join(d.Lines(), "\n"))
	}
}
