package profile

import (
	"math"
	"testing"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/results/layout"
)

// TestRooflineMXFP4 checks the roofline of moe_weights mxfp4: the routed
// experts reached count 4.25 bits a weight instead of two bytes, nothing
// else moves (FLOPs included: the GEMMs run in bf16); dense models and
// DeepSeek-V3's shared experts and dense layers are untouched.
func TestRooflineMXFP4(t *testing.T) {
	h100, ok := GPUDevice("NVIDIA H100 80GB HBM3")
	if !ok {
		t.Fatal("no H100 ceilings")
	}
	for _, c := range []struct {
		model   string
		it      engine.IterationRecord
		touched float64
	}{
		{"gpt-oss-20b", engine.IterationRecord{GenRequests: 64}, 24 * 30},
		{"gpt-oss-20b", engine.IterationRecord{CtxTokens: 2048, CtxRequests: 4}, -1},
		{"qwen3-30b-a3b", engine.IterationRecord{GenRequests: 8}, 48 * 40},
		{"moonlight-16b-a3b", engine.IterationRecord{GenRequests: 8}, 26 * 40},
		{"llama-3.1-8b", engine.IterationRecord{GenRequests: 8}, -1},
	} {
		mc, err := engine.LookupModel(c.model)
		if err != nil {
			t.Fatal(err)
		}
		s := shapeOf(mc)
		dev := h100
		base := s.work(c.it, 500, precisionOf(dev), c.touched)
		dev.MXFP4Experts = true
		got := s.work(c.it, 500, precisionOf(dev), c.touched)
		routed := 0.0
		if mc.MoE() {
			n := c.touched
			if n < 0 {
				tokens := float64(c.it.CtxTokens + c.it.GenRequests)
				n = float64(mc.MoELayers()) * s.experts * (1 - math.Pow(1-s.topK/s.experts, tokens))
			}
			routed = n * s.expert
		}
		want := base.Bytes - routed*(2-4.25/8)
		if math.Abs(got.Bytes-want) > 1e-9*want || got.FLOPs != base.FLOPs || got.FP8FLOPs != base.FP8FLOPs {
			t.Errorf("%s %+v: bytes %.6g FLOPs %.6g, want %.6g and %.6g", c.model, c.it, got.Bytes, got.FLOPs, want, base.FLOPs)
		}
		if mc.MoE() && !(got.Bytes < base.Bytes) {
			t.Errorf("%s: MXFP4 experts read no fewer bytes", c.model)
		}
		// The plan's estimate counts them alike.
		it := c.it
		if e := RankIterationWorkOn(mc, Split{}, it, 500, dev); c.touched < 0 && math.Abs(e.Bytes-got.Bytes) > 1e-9*got.Bytes {
			t.Errorf("%s: estimate %.6g bytes, roofline %.6g", c.model, e.Bytes, got.Bytes)
		}
		if e, r := RankIterationWorkOn(mc, Split{}, it, 500, h100), RankIterationWork(mc, Split{}, it, 500, 2); e != r {
			t.Errorf("%s: bf16 estimate %+v, RankIterationWork %+v", c.model, e, r)
		}
	}
}

// TestCellRooflineMXFP4: a cell of moe_weights mxfp4 counts the experts
// its tokens reached (expert_load.csv: 14 + 5 of tiny-moe's, 98,304
// weights each) at 4.25 bits instead of two bytes; auto and bf16 keep two
// bytes (auto is bf16 on CUDA while its MXFP4 kernels are unverified).
func TestCellRooflineMXFP4(t *testing.T) {
	dir := recordsDir(t, map[string]string{layout.IterationsFile: fixtureIterations, layout.ExpertLoadFile: fixtureExpertLoad})
	var bytes [3]float64
	for i, mw := range []string{"auto", "bf16", "mxfp4"} {
		c := fixtureCell("tiny-moe")
		c.MoEWeights = mw
		rf, err := CellRoofline(dir, c)
		if err != nil || rf == nil {
			t.Fatalf("%s: %v, %v", mw, rf, err)
		}
		bytes[i] = rf.Work.Bytes
	}
	want := 3481600.0 + 1714176
	if !near(bytes[0], want) || !near(bytes[1], want) {
		t.Errorf("auto %g, bf16 %g bytes, want %g", bytes[0], bytes[1], want)
	}
	if w := want - 19*98304*(2-4.25/8); !near(bytes[2], w) {
		t.Errorf("mxfp4: %g bytes, want %g", bytes[2], w)
	}
}
