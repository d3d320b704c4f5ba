//go:build cgo && linux

package backend

import (
	"fmt"
	"slices"
	"sync"

	"github.com/xrun-dev/xrun/engine/cuda"
	"github.com/xrun-dev/xrun/engine/model"
)

// MXFP4 experts (model.MXFP4Experts, moe_weights mxfp4): a stack's codes
// are the tensor's buf and its scales live beside it (mxfp4Scales, keyed
// by the tensor, so that the tensor type stays as it is); MoE and OSSMoE
// on such weights run cuda.MoEMXFP4, whose kernels dequantize them in
// registers (kernels/moe_mxfp4.cu).
//
// UNVERIFIED ON A GPU: these kernels were written without a GPU or NVRTC
// to run them. engine.ResolveMoEWeights keeps moe_weights auto on bf16
// experts on this backend until the TestMXFP4 tests pass on one; mxfp4
// must be asked for.
//
// The scales are the backend's until Close (Free releases the codes).

// mxfp4Scales maps an MXFP4 tensor to its scales buffer.
var mxfp4Scales sync.Map // *tensor -> cuda.Buffer

func (b *Backend) mxfp4Of(t *tensor) (cuda.MXFP4Weights, bool) {
	if t == nil {
		return cuda.MXFP4Weights{}, false
	}
	v, ok := mxfp4Scales.Load(t)
	if !ok {
		return cuda.MXFP4Weights{}, false
	}
	return cuda.MXFP4Weights{Codes: t.buf, Scales: v.(cuda.Buffer)}, true
}

// newMXFP4 allocates an MXFP4 stack of shape and fills it with fill.
func (b *Backend) newMXFP4(name string, shape []int, fill func(g *cuda.GPU, w cuda.MXFP4Weights) error) (model.Tensor, error) {
	if err := model.CheckMXFP4Shape(shape); err != nil {
		return nil, err
	}
	n := numel(shape)
	t := &tensor{name: name, shape: slices.Clone(shape), kind: kFloat}
	err := b.dev.Do(func(g *cuda.GPU) error {
		codes, err := b.alloc(g, n/2)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		scales, err := b.alloc(g, n/model.MXFP4Block)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		t.buf = codes
		b.memWeights += int64(codes.Bytes + scales.Bytes)
		mxfp4Scales.Store(t, scales)
		return fill(g, cuda.MXFP4Weights{Codes: codes, Scales: scales})
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// RandomMXFP4 makes model.RandomMXFP4's weight on the device.
func (b *Backend) RandomMXFP4(name string, shape []int, seed uint64, scale float32) (model.Tensor, error) {
	return b.newMXFP4(name, shape, func(g *cuda.GPU, w cuda.MXFP4Weights) error {
		return g.MXFP4Random(g.Stream, w, seed, scale)
	})
}

// UploadMXFP4 copies an MXFP4 stack's codes and scales over as they are.
func (b *Backend) UploadMXFP4(name string, w model.MXFP4) (model.Tensor, error) {
	if err := w.Check(); err != nil {
		return nil, err
	}
	return b.newMXFP4(name, w.Shape, func(g *cuda.GPU, d cuda.MXFP4Weights) error {
		if err := g.Stream.Upload(d.Codes, w.Blocks); err != nil {
			return err
		}
		return g.Stream.Upload(d.Scales, w.Scales)
	})
}

// mxfp4State is a backend's MXFP4 MoE workspace, kept beside the Backend
// (keyed by it) as ossState is.
type mxfp4State struct{ work cuda.Buffer }

var mxfp4States sync.Map // *Backend -> *mxfp4State

func (b *Backend) mxfp4State() *mxfp4State {
	v, _ := mxfp4States.LoadOrStore(b, &mxfp4State{})
	return v.(*mxfp4State)
}

// mxfp4MoE runs MoE or OSSMoE (biases, act) when its experts are MXFP4 and
// reports whether it did; other experts are left to the caller.
func (b *Backend) mxfp4MoE(out, x, idx, weights, gateUp, down, gateUpBias, downBias model.Tensor, rows, k int, act model.GLU) bool {
	gu, dn := ft(gateUp), ft(down)
	gw, gok := b.mxfp4Of(gu)
	dw, dok := b.mxfp4Of(dn)
	if !gok && !dok {
		return false
	}
	st := b.mxfp4State()
	o, xi, it, wt := ft(out), ft(x), ft(idx), ft(weights)
	gub, dnb := ft(gateUpBias), ft(downBias)
	sh, most, check := b.expertsOp(gu, dn, o, xi, it, wt, rows, k)
	E, F2, H := sh.Experts, 2*sh.FFN, sh.Hidden
	b.op(func(g *cuda.GPU) error {
		if !gok || !dok {
			return fmt.Errorf("moe: gate_up and down must both be MXFP4, or neither")
		}
		if err := check(); err != nil {
			return err
		}
		if gub != nil && numel(gub.shape) != E*F2 || dnb != nil && numel(dnb.shape) != E*H {
			return fmt.Errorf("moe: expert biases %v and %v for experts %v", shapeOf(gub), shapeOf(dnb), gu.shape)
		}
		if err := b.growWork(g, &st.work, cuda.MoEMXFP4WorkBytes(b.dt, most), "MXFP4 moe workspace"); err != nil {
			return err
		}
		e := cuda.MoEOSS{Limit: act.Limit, Alpha: act.Alpha}
		if gub != nil {
			e.GateUpBias = gub.buf
		}
		if dnb != nil {
			e.DownBias = dnb.buf
		}
		return g.MoEMXFP4(g.Stream, b.dt, o.buf, xi.buf, it.buf, wt.buf, gw, dw, st.work, sh, e)
	})
	return true
}

// expertsOp is what a MoE op on an expert stack (MXFP4, FP8) needs of its
// tensors: the shape for rows and for the most rows the workspace is
// sized for, and the checks of the stacks' and the operands' shapes.
func (b *Backend) expertsOp(gu, dn, o, xi, it, wt *tensor, rows, k int) (sh, most cuda.MoEShape, check func() error) {
	rows = b.rows(rows)
	E, F2, H := gu.shape[0], gu.shape[1], gu.shape[2]
	sh = cuda.MoEShape{Rows: rows, K: k, Experts: E, Hidden: H, FFN: F2 / 2}
	most = sh
	most.Rows = max(rows, b.maxRows)
	return sh, most, func() error {
		switch {
		case len(dn.shape) != 3 || dn.shape[0] != E || dn.shape[1] != H || dn.shape[2] != F2/2 || F2%2 != 0:
			return fmt.Errorf("moe: gate_up %v and down %v do not match [E, 2F, H] and [E, H, F]", gu.shape, dn.shape)
		case it.cols() != k || wt.cols() != k || rows > it.rows() || rows > wt.rows() || rows > xi.rows() || rows > o.rows():
			return fmt.Errorf("moe: ids %v, weights %v, x %v for %d rows, k = %d", it.shape, wt.shape, xi.shape, rows, k)
		}
		return nil
	}
}

var _ model.MXFP4Experts = (*Backend)(nil)
