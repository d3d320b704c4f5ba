package profile

import (
	"math"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/model"
	"github.com/xrun-dev/xrun/results/layout"
)

// TestHeldWeightBytes checks the weight memory the plan counts from the
// roofline's widths: every weight at ElemBytes without formats; under
// FP8 the linear layers at one byte with a float32 scale per tensor (4 a
// layer on a dense model), the embedding, norms and LM head at two;
// MXFP4 experts at 4.25 bits, the rest untouched; a split rank's slice.
func TestHeldWeightBytes(t *testing.T) {
	llama, _ := engine.LookupModel("llama-3.1-8b")
	oss, _ := engine.LookupModel("gpt-oss-20b")
	qwen, _ := engine.LookupModel("qwen3-30b-a3b")
	held := func(mc engine.ModelConfig, tp, ep int) float64 {
		if tp*ep == 1 {
			return float64(engine.RankShare{}.HeldParams(mc))
		}
		rs, err := engine.Share(mc, tp, ep)
		if err != nil {
			t.Fatal(err)
		}
		return float64(rs.HeldParams(mc))
	}
	bf16 := Device{ElemBytes: 2}
	for _, c := range []struct {
		mc     engine.ModelConfig
		tp, ep int
	}{{llama, 1, 1}, {llama, 2, 1}, {qwen, 1, 1}, {qwen, 2, 2}} {
		n := held(c.mc, c.tp, c.ep)
		if got := HeldWeightBytes(c.mc, Split{TP: c.tp, EP: c.ep}, n, bf16); got != 2*n {
			t.Errorf("%s tp %d ep %d bf16: %g bytes, want %g", c.mc.Name, c.tp, c.ep, got, 2*n)
		}
	}

	n := held(llama, 1, 1)
	h, L := float64(llama.Hidden), float64(llama.Layers)
	linear := L * (float64(llama.AttnWeights()) + 3*h*float64(llama.FFN))
	want := linear + 2*(n-linear) + 4*4*L
	fp8 := bf16.WithFormats(Formats{FP8: true})
	if got := HeldWeightBytes(llama, Split{}, n, fp8); math.Abs(got-want) > 0.5 {
		t.Errorf("llama-3.1-8b fp8: %.0f bytes, want %.0f", got, want)
	}
	// Llama-3.1-8B in FP8: 7.0e9 linear weights at a byte, the embedding
	// and LM head (1.05e9) at two: about 8.5 GiB, not bf16's 15 GiB.
	if g := HeldWeightBytes(llama, Split{}, n, fp8) / (1 << 30); g < 8.4 || g > 8.6 {
		t.Errorf("llama-3.1-8b fp8: %.2f GiB of weights, want about 8.5", g)
	}

	n = held(oss, 1, 1)
	routed := float64(oss.MoELayers()) * float64(oss.Experts) * 3 * float64(oss.Hidden) * float64(oss.FFN)
	want = 2*n - routed*(2-model.MXFP4BitsPerWeight/8)
	if got := HeldWeightBytes(oss, Split{}, n, bf16.WithFormats(Formats{MXFP4Experts: true})); math.Abs(got-want) > 0.5 {
		t.Errorf("gpt-oss-20b mxfp4: %.0f bytes, want %.0f", got, want)
	}
}

// TestWithFormats: on a GPU every format counts; on the CPU backend dtype
// fp8 keeps its float32 weights and FLOPs (engine/cpu keeps the codes'
// float32 values) while its FP8 KV cache and MXFP4 experts are packed.
func TestWithFormats(t *testing.T) {
	h100, _ := GPUDevice("NVIDIA H100 80GB HBM3")
	all := Formats{FP8: true, KVFP8: true, MXFP4Experts: true}
	if d := h100.WithFormats(all); !d.FP8 || d.KVElemBytes != 1 || !d.MXFP4Experts {
		t.Errorf("H100: %+v", d)
	}
	if d := h100.WithFormats(all).WithFormats(Formats{}); d.FP8 || d.KVElemBytes != 0 || d.MXFP4Experts {
		t.Errorf("H100 back to bf16: %+v", d)
	}
	cpu := testDevice.WithFormats(all)
	if cpu.FP8 || cpu.KVElemBytes != 1 || !cpu.MXFP4Experts {
		t.Errorf("cpu: %+v", cpu)
	}
	mc, _ := engine.LookupModel("tiny-llama")
	it := engine.IterationRecord{GenRequests: 4}
	base, got := RankIterationWorkOn(mc, Split{}, it, 100, testDevice), RankIterationWorkOn(mc, Split{}, it, 100, cpu)
	s := shapeOf(mc)
	kv := 4 * s.kvPerToken * (4*100 + 4) // float32 KV cache read and written
	if math.Abs(base.Bytes-got.Bytes-kv*3/4) > 1e-6*base.Bytes || got.FLOPs != base.FLOPs || got.FP8FLOPs != 0 {
		t.Errorf("cpu fp8: %+v against float32 %+v; want only the KV cache at a byte", got, base)
	}
}

// TestCellRooflineMeasuredFP8: a cell's measured ceilings carry no FP8
// rate (the backend measures its compute dtype's GEMM); on a GPU whose
// FP8 ratio xrun knows, FP8 GEMMs run at that ratio of the measured
// GEMM; on one it does not know, at the measured GEMM, and the basis says
// so.
func TestCellRooflineMeasuredFP8(t *testing.T) {
	dir := recordsDir(t, map[string]string{layout.IterationsFile: fixtureIterations})
	for _, c := range []struct {
		gpu      string
		fp8Ratio float64
		note     bool
	}{{"NVIDIA H100 80GB HBM3", 2, false}, {"NVIDIA A100-SXM4-80GB", 0, true}} {
		rc := fixtureCell("tiny-llama")
		rc.GPU, rc.FP8 = c.gpu, true
		rc.Ceilings = &engine.Ceilings{BytesPerSec: 1.5e12, FLOPs: 300e12, Device: c.gpu, DType: "bfloat16", Source: "test"}
		rf, err := CellRoofline(dir, rc)
		if err != nil || rf == nil {
			t.Fatalf("%s: %v, %v", c.gpu, rf, err)
		}
		if got := rf.Device.PeakFP8FLOPs; got != c.fp8Ratio*300e12 {
			t.Errorf("%s: FP8 ceiling %g, want %g", c.gpu, got, c.fp8Ratio*300e12)
		}
		if got := strings.Contains(rf.Basis, "no FP8 ceiling known"); got != c.note {
			t.Errorf("%s: basis %q: note of the missing FP8 ceiling %v, want %v", c.gpu, rf.Basis, got, c.note)
		}
		if got := strings.Contains(rf.Basis, "FP8 linear layers at a byte a weight, their GEMMs at 600 TFLOP/s"); got == c.note {
			t.Errorf("%s: basis %q: the FP8 ceiling named %v, want %v", c.gpu, rf.Basis, got, !c.note)
		}
	}
}
