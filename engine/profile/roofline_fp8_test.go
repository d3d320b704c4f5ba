package profile

import (
	"math"
	"testing"

	"github.com/xrun-dev/xrun/engine"
)

// TestRooflineFP8 checks the roofline of dtype fp8 and kv_cache_dtype fp8:
// the linear layers' weights at one byte, the LM head (and the router of
// MoE models) at two, the KV cache at KVElemBytes, and the linear layers'
// FLOPs at the FP8 ceiling, the rest at bf16's; and that an H100's FP8
// ceiling is twice its bf16 one.
func TestRooflineFP8(t *testing.T) {
	h100, ok := GPUDevice("NVIDIA H100 80GB HBM3")
	if !ok || h100.PeakFP8FLOPs != 2*h100.PeakFLOPs {
		t.Fatalf("H100 ceilings %+v: want an FP8 ceiling twice bf16's", h100)
	}
	it := engine.IterationRecord{CtxTokens: 256, CtxRequests: 2, GenRequests: 62}
	const gen = 300.0
	for _, c := range []struct {
		model   string
		fp8, kv bool
	}{
		{"llama-3.1-8b", true, false},
		{"llama-3.1-8b", true, true},
		{"llama-3.1-8b", false, true},
		{"tiny-moe", true, false},
	} {
		mc, err := engine.LookupModel(c.model)
		if err != nil {
			t.Fatal(err)
		}
		s := shapeOf(mc)
		dev := h100
		dev.FP8 = c.fp8
		if c.kv {
			dev.KVElemBytes = 1
		}
		base := IterationWork(mc, it, gen, 2)
		got := s.work(it, gen, precisionOf(dev), -1)
		tokens := float64(it.CtxTokens + it.GenRequests)
		routers := 0.0
		if mc.MoE() {
			routers = s.layers * s.router
		}
		kvBytes := 2 * s.kvPerToken * (float64(it.GenRequests)*gen + tokens)
		// The weights' share of base's bytes (experts reached estimated alike).
		linear := base.Bytes - kvBytes - 2*(s.head+routers)
		want := Work{Bytes: base.Bytes, FLOPs: base.FLOPs}
		if c.fp8 {
			want.Bytes -= linear / 2
			want.FP8FLOPs = 2*tokens*s.layers*s.attn + 2*tokens*(s.layers*s.expert) - 2*tokens*routers
			if mc.MoE() {
				want.FP8FLOPs = 2*tokens*s.layers*(s.attn+s.topK*s.expert+s.router) - 2*tokens*routers
			}
		}
		if c.kv {
			want.Bytes -= kvBytes / 2
		}
		if !nearFP8(got.Bytes, want.Bytes) || !nearFP8(got.FLOPs, want.FLOPs) || !nearFP8(got.FP8FLOPs, want.FP8FLOPs) {
			t.Errorf("%s fp8 %v kv %v: work %+v, want %+v", c.model, c.fp8, c.kv, got, want)
		}
		sec, _ := dev.Time(got)
		comp := (got.FLOPs-got.FP8FLOPs)/dev.PeakFLOPs + got.FP8FLOPs/dev.PeakFP8FLOPs
		if !nearFP8(sec, math.Max(got.Bytes/dev.PeakBytesPerSec, comp)) {
			t.Errorf("%s: time %g, want the longer of %g (bytes) and %g (FLOPs)", c.model, sec, got.Bytes/dev.PeakBytesPerSec, comp)
		}
		if c.fp8 {
			if b, _ := h100.Time(base); !(sec < b) {
				t.Errorf("%s: FP8's floor %g is not below bf16's %g", c.model, sec, b)
			}
		}
	}
}

func nearFP8(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b)) }
