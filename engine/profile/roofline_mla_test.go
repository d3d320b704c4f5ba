package profile

import (
	"math"
	"testing"

	"github.com/xrun-dev/xrun/engine"
)

// TestRooflineDeepSeek works one DeepSeek-V3 decode step by hand: weights
// of MLA attention, three dense layers and 58 MoE layers of one token's 8
// experts, the shared expert and the router; the latent cache read at the
// token's context; the absorbed form's attention arithmetic.
func TestRooflineDeepSeek(t *testing.T) {
	mc, _ := engine.ZooModel("deepseek-v3")
	const ctx, eb = 1000, 2
	it := engine.IterationRecord{GenRequests: 1}
	// One token reaches 8 experts in each MoE layer.
	w := IterationWorkTouched(mc, it, ctx, eb, 58*8)
	h := 7168.0
	attn := h*1536 + 1536*128*192 + h*576 + 512*128*256 + 128*128*h
	expert := 3 * h * 2048
	weights := 61*attn + 3*3*h*18432 + 58*(8*expert+expert+h*256) + 129280*h
	kv := 61 * 576.0 * (ctx + 1)
	if got, want := w.Bytes, eb*(weights+kv); math.Abs(got-want) > 1e-9*want {
		t.Errorf("bytes %.6g, want %.6g", got, want)
	}
	att := 2 * 61 * 128 * (2*512 + 64.0) * ctx
	if got, want := w.FLOPs, 2*weights+att; math.Abs(got-want) > 1e-9*want {
		t.Errorf("FLOPs %.6g, want %.6g", got, want)
	}
	// A prefill chunk attends in the plain form, 2·heads·(nope+rope+v) per
	// position: 200 tokens attend to 100 positions on average, 100 to 50;
	// the GEMMs add 2 FLOPs per used weight for each of the 100 more.
	p := IterationWorkTouched(mc, engine.IterationRecord{CtxRequests: 1, CtxTokens: 100}, 0, eb, 58*256)
	q := IterationWorkTouched(mc, engine.IterationRecord{CtxRequests: 1, CtxTokens: 200}, 0, eb, 58*256)
	gemms := 100 * 2 * (61*attn + 3*3*h*18432 + 58*(8*expert+expert+h*256))
	want := 2 * 61 * 128 * (128 + 64 + 128.0) * (200*100 - 100*50)
	if got := q.FLOPs - p.FLOPs - gemms; math.Abs(got-want) > 1e-6*want {
		t.Errorf("prefill attention FLOPs %.6g, want %.6g", got, want)
	}
}
