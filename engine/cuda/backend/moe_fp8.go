//go:build cgo && linux

package backend

import (
	"fmt"
	"sync"

	"github.com/xrun-dev/xrun/engine/cuda"
	"github.com/xrun-dev/xrun/engine/model"
)

// FP8 experts (dtype fp8 on a MoE model; model.FP8GEMMs): an Experts
// stack's codes are the tensor's buf and its scales, one float32 a row
// [E][N], its q.scales (q.nw = E·N); MoE on such weights runs
// cuda.MoEFP8, as the CPU backend's moeFP8 computes it (TestMoEFP8 and
// TestFP8MoEMatchesCPU check it on a GPU).

// quantizeExpertsFP8 replaces an Experts stack [E][N][K] by E4M3 codes
// with a scale per expert, amax/448, repeated for its rows (the CPU
// backend's QuantizeFP8): of the float32 values a Random weight was
// generated from, else of its fp16/bf16 values.
func (b *Backend) quantizeExpertsFP8(t *tensor) (model.Tensor, error) {
	E, N, K := t.shape[0], t.shape[1], t.shape[2]
	if K%16 != 0 {
		return nil, fmt.Errorf("%s: FP8 experts of rows of %d values: want a multiple of 16", t.name, K)
	}
	es := b.dt.Size()
	err := b.quantizeInPlace(t, E*N*K, E*N, func(g *cuda.GPU, codes cuda.Buffer, q *fp8Weight) error {
		for e := range E {
			expert, scales := codes.Slice(e*N*K, N*K), q.scales.Slice(4*e*N, 4*N)
			var err error
			if t.rnd != nil {
				err = g.FP8QuantizeRandomRows(g.Stream, expert, N*K, int64(e*N*K), t.rnd.seed, t.rnd.scale, b.fp8.amax, scales, N)
			} else {
				// Per tensor into the expert's first row scale; copied to
				// the others below.
				err = g.FP8Quantize(g.Stream, b.dt, expert, t.buf.Slice(e*N*K*es, N*K*es), N, K, cuda.FP8Quant{}, b.fp8.amax, scales.Slice(0, 4))
			}
			if err != nil {
				return err
			}
		}
		if t.rnd == nil {
			return b.spreadExpertScales(g, q.scales, E, N)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// spreadExpertScales copies each expert's scale (its first row's) to its
// other rows: the stack is quantized once, at load.
func (b *Backend) spreadExpertScales(g *cuda.GPU, scales cuda.Buffer, E, N int) error {
	all := make([]float32, E*N)
	if err := cuda.DownloadSlice(g.Stream, all, scales); err != nil {
		return err
	}
	for e := range E {
		for r := 1; r < N; r++ {
			all[e*N+r] = all[e*N]
		}
	}
	return cuda.UploadSlice(g.Stream, scales, all)
}

// uploadExpertsFP8 makes FP8 experts of an F8_E4M3 checkpoint stack: its
// codes as they are, its scales one a row. A static or per-token input
// scale is not taken (the kernels quantize the input per tensor).
func (b *Backend) uploadExpertsFP8(name string, h model.HostTensor) (model.Tensor, error) {
	if err := h.CheckFP8(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(h.Shape) != 3 || h.Shape[2]%16 != 0 {
		return nil, fmt.Errorf("%s: shape %v is not an Experts stack of rows of a multiple of 16 values", name, h.Shape)
	}
	if h.FP8.Input > 0 || h.FP8.PerToken {
		return nil, errNoFP8(name, "FP8 experts with a static or per-token input scale")
	}
	n, rows := numel(h.Shape), h.Shape[0]*h.Shape[1]
	if len(h.Data) != n {
		return nil, fmt.Errorf("%s: %d bytes for shape %v of F8_E4M3", name, len(h.Data), h.Shape)
	}
	sc := make([]float32, rows)
	for r := range sc {
		sc[r] = h.FP8.RowScale(r)
	}
	return b.uploadCodes(name, h, &fp8Weight{nw: rows}, sc, func() {})
}

// fp8MoEState is a backend's FP8 MoE workspace, kept beside the Backend
// (keyed by it) as mxfp4State is.
type fp8MoEState struct{ work cuda.Buffer }

var fp8MoEStates sync.Map // *Backend -> *fp8MoEState

func (b *Backend) fp8MoEState() *fp8MoEState {
	v, _ := fp8MoEStates.LoadOrStore(b, &fp8MoEState{})
	return v.(*fp8MoEState)
}

// fp8Experts is t as FP8 experts, if it is an FP8 Experts stack.
func fp8Experts(t *tensor) (cuda.FP8Experts, bool) {
	if t == nil || t.q == nil || len(t.shape) != 3 {
		return cuda.FP8Experts{}, false
	}
	return cuda.FP8Experts{Codes: t.buf, Scales: t.q.scales}, true
}

// fp8MoE runs MoE when its experts are FP8 and reports whether it did;
// other experts are left to the caller.
func (b *Backend) fp8MoE(out, x, idx, weights, gateUp, down model.Tensor, rows, k int) bool {
	gu, dn := ft(gateUp), ft(down)
	gw, gok := fp8Experts(gu)
	dw, dok := fp8Experts(dn)
	if !gok && !dok {
		return false
	}
	st := b.fp8MoEState()
	o, xi, it, wt := ft(out), ft(x), ft(idx), ft(weights)
	sh, most, check := b.expertsOp(gu, dn, o, xi, it, wt, rows, k)
	b.op(func(g *cuda.GPU) error {
		if !gok || !dok {
			return fmt.Errorf("moe: gate_up and down must both be FP8, or neither")
		}
		if err := check(); err != nil {
			return err
		}
		if err := b.growWork(g, &st.work, cuda.MoEFP8WorkBytes(b.dt, most), "FP8 moe workspace"); err != nil {
			return err
		}
		return g.MoEFP8(g.Stream, b.dt, o.buf, xi.buf, it.buf, wt.buf, gw, dw, st.work, sh)
	})
	return true
}
