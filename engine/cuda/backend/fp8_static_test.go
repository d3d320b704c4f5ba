//go:build cgo && linux

package backend

import (
	"fmt"
	"math"
	"os"
	"testing"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/model"
)

// Static FP8 input scales calibrated at load (CalibrateFP8) and the
// quantization fused into the norms and SwiGLU that produce the GEMMs'
// inputs (XRUN_CUDA_FP8_FUSE, fusion.go), on whole models.

// newFP8Backend is a backend whose cuBLASLt takes its heuristic's
// algorithm (two backends then run the same GEMMs), with the fused FP8
// quantization on or off, and the other switches as the environment sets
// them (XRUN_CUDA_GRAPHS=0 and the like narrow a failure down).
func newFP8Backend(t testing.TB, gemm string, fuse bool) *Backend {
	t.Helper()
	sw := engine.ParseSwitches(os.Getenv)
	sw.CUDALtTune = false
	sw.CUDAFP8Fuse = fuse
	be, err := New(model.BackendOptions{Gemm: gemm, Dtype: "bfloat16", Switches: &sw})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := be.Close(); err != nil {
			t.Error(err)
		}
	})
	if b, ok := asBackend(be); ok {
		return b
	}
	t.Fatalf("backend %T", be)
	return nil
}

// checkAllStatic: after calibration every Matrix FP8 weight's input has a
// static per-tensor scale.
func checkAllStatic(t testing.TB, b *Backend) {
	t.Helper()
	n := 0
	for _, w := range b.fp8.weights {
		if w.q == nil {
			continue
		}
		n++
		if !w.q.fusable() {
			t.Errorf("%s: input not static per tensor after calibration (static %d bytes, per token %v)", w.name, w.q.static.Bytes, w.q.perToken)
		}
	}
	if n == 0 {
		t.Error("no FP8 Matrix weights")
	}
	if !b.fp8.anyStatic || b.fp8.calibrating || b.fp8.cells.Bytes != 0 {
		t.Errorf("after calibration: anyStatic %v, calibrating %v, %d bytes of cells", b.fp8.anyStatic, b.fp8.calibrating, b.fp8.cells.Bytes)
	}
}

// TestCUDAFP8StaticMatchesCPU runs tiny-llama and tiny-dense with FP8
// GEMMs whose input scales are calibrated at load (FP8ActStatic) on the
// CPU (the reference, calibrated the same way) and on the GPU (bf16
// activations, both GEMM paths, the fused quantization on) through the
// scripted batches, and compares every logit row within the FP8 bound.
// The GPU's scales come from amaxes of bf16 activations, the CPU's of
// float32 ones: they may differ in the last bits, which fp8ModelTol
// covers as it covers the activations' own rounding.
func TestCUDAFP8StaticMatchesCPU(t *testing.T) {
	needGPU(t)
	opt := model.Options{FP8: true, FP8Activations: model.FP8ActStatic}
	for _, name := range []string{"tiny-llama", "tiny-dense"} {
		cfg := zooConfig(t, name)
		sc, want := cpuReference(t, cfg, opt)
		for _, gemm := range []string{"auto", "disable"} {
			t.Run(fmt.Sprintf("%s/%s", name, gemm), func(t *testing.T) {
				be := newFP8Backend(t, gemm, true)
				m := newModelOpt(t, be, cfg, opt)
				checkAllStatic(t, be)
				var agree, rows int
				for i, s := range sc {
					got := runStep(t, m, s)
					relErr(t, fmt.Sprintf("iteration %d (%d sequences)", i, len(s)), got, want[i], fp8ModelTol)
					V := cfg.Vocab
					for r := range len(s) {
						rows++
						if refArgmax(got[r*V:(r+1)*V]) == refArgmax(want[i][r*V:(r+1)*V]) {
							agree++
						}
					}
				}
				t.Logf("greedy agreement with the CPU's calibrated FP8 run: %d of %d rows", agree, rows)
				if agree*2 < rows {
					t.Errorf("greedy tokens agree with the CPU's FP8 run on only %d of %d rows", agree, rows)
				}
			})
		}
	}
}

// TestFP8FuseOnOff runs the same models, calibrated, with the fused
// quantization on and off (XRUN_CUDA_FP8_FUSE) through the scripted
// batches. The fused kernels write the codes the unfused pair does, bit for
// bit (TestFP8Fused* in engine/cuda), and both read the same static scale,
// so the own GEMM's logits must be identical and cuBLASLt's (the
// heuristic's algorithm on both) within a tiny bound, the greedy tokens
// the same. Every iteration must also have queued fewer ops fused: one per
// layer for the first norm (in front of QKV), two more on a dense layer
// (the second norm in front of gate_up, SwiGLU in front of down); a MoE
// layer's second norm feeds the bf16 router and runs on its own.
func TestFP8FuseOnOff(t *testing.T) {
	needGPU(t)
	opt := model.Options{FP8: true, FP8Activations: model.FP8ActStatic}
	for _, name := range []string{"tiny-llama", "tiny-dense", "tiny-moe"} {
		cfg := zooConfig(t, name)
		fewer := 0
		for i := range cfg.Layers {
			fewer++
			if !cfg.MoELayer(i) {
				fewer += 2
			}
		}
		for _, gemm := range []string{"auto", "disable"} {
			t.Run(fmt.Sprintf("%s/%s", name, gemm), func(t *testing.T) {
				on, off := newFP8Backend(t, gemm, true), newFP8Backend(t, gemm, false)
				mOn, mOff := newModelOpt(t, on, cfg, opt), newModelOpt(t, off, cfg, opt)
				checkAllStatic(t, on)
				checkAllStatic(t, off)
				V := cfg.Vocab
				for i, s := range script(cfg.Vocab) {
					a := runStep(t, mOn, s)
					opsOn := on.ops
					b := runStep(t, mOff, s)
					if d := off.ops - opsOn; d != fewer {
						t.Errorf("iteration %d: %d ops fused, %d unfused: %d fewer, want %d", i, opsOn, off.ops, d, fewer)
					}
					what := fmt.Sprintf("iteration %d (%d sequences) fused vs unfused", i, len(s))
					if gemm == "disable" {
						if k := firstDiff(a, b); k >= 0 {
							t.Errorf("%s: logit %d is %g fused, %g unfused; the own GEMM's must be identical", what, k, a[k], b[k])
						}
					} else {
						relErr(t, what, a, b, 1e-3)
					}
					for r := range len(s) {
						ta, tb := refArgmax(a[r*V:(r+1)*V]), refArgmax(b[r*V:(r+1)*V])
						if ta != tb && !nearTie(b[r*V:(r+1)*V]) {
							t.Errorf("%s: row %d picks %d fused, %d unfused", what, r, ta, tb)
						}
					}
				}
			})
		}
	}
}

// firstDiff is the first index where a and b differ bit for bit, -1 if
// none.
func firstDiff(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// TestFP8FuseSwitch: the switch reaches the backend, and the norm and
// SwiGLU are held back only where a static FP8 GEMM may take them.
func TestFP8FuseSwitch(t *testing.T) {
	needGPU(t)
	sw := engine.DefaultSwitches()
	if !sw.CUDAFP8Fuse {
		t.Fatal("XRUN_CUDA_FP8_FUSE is off by default")
	}
	cfg := zooConfig(t, "tiny-dense")
	for _, c := range []struct {
		act  model.FP8Activations
		fuse bool
		want bool
	}{
		{model.FP8ActStatic, true, true},
		{model.FP8ActStatic, false, false},
		{model.FP8ActDynamic, true, false}, // no static scale: nothing to fuse into
	} {
		be := newFP8Backend(t, "auto", c.fuse)
		newModelOpt(t, be, cfg, model.Options{FP8: true, FP8Activations: c.act})
		if got := be.fp8Fusing(); got != c.want {
			t.Errorf("activations %v, fuse %v: fp8Fusing %v, want %v", c.act, c.fuse, got, c.want)
		}
	}
}
