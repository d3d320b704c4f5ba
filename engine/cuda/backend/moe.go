//go:build cgo && linux

package backend

import (
	"fmt"
	"sync"

	"github.com/xrun-dev/xrun/engine/cuda"
	"github.com/xrun-dev/xrun/engine/model"
)

// moeState is a backend's MoE bookkeeping, kept beside the Backend (keyed
// by it) so that MoE support stays in this file.
type moeState struct {
	// On the GPU's thread: the MoE workspace (sized for the largest
	// activation, so it is allocated by an eager iteration and never while
	// a graph is captured) and the drift cells of forced routing windows.
	work  cuda.Buffer
	drift cuda.Buffer

	// On the caller's goroutine: forced tables seen with a start row other
	// than 0 (uniform and zipf windows; perfect routing always starts at 0).
	varies map[*tensor]bool
}

var moeStates sync.Map // *Backend -> *moeState

func (b *Backend) moeState() *moeState {
	if v, ok := moeStates.Load(b); ok {
		return v.(*moeState)
	}
	v, _ := moeStates.LoadOrStore(b, &moeState{varies: map[*tensor]bool{}})
	return v.(*moeState)
}

// moeDriftCells is how many layers have their own drift cell (layers
// beyond share them, which only correlates their windows).
const moeDriftCells = 1024

var moeMethods = map[string]int{
	model.RoutingSoftmaxTopKRenorm: cuda.MoESoftmaxTopKRenorm,
	model.RoutingTopKSoftmax:       cuda.MoETopKSoftmax,
	model.RoutingSoftmaxTopK:       cuda.MoESoftmaxTopK,
}

// route is Route: the router's top-k by method, or the forced experts, and
// the layer's expert counts, on the device.
//
// Padding rows of a decode bucket are routed nowhere (expert -1, weight 0)
// and not counted: they would otherwise add a padding token's experts to
// the load and to the expert GEMMs' work.
//
// A replayed graph repeats the forced start row it was captured with; for
// tables whose start row varies between iterations (uniform, zipf) the
// captured launch moves its window on the device instead (MoERoute.Drift),
// so every replay still routes by a fresh window of independent draws.
func (b *Backend) route(idx, weights, logits, forced model.Tensor, forcedRow, rows, k int, method string, counts model.Tensor, layer int) {
	st := b.moeState()
	it, wt, lt, fb, ct := ft(idx), ft(weights), ft(logits), ft(forced), ft(counts)
	rows = b.rows(rows)
	lay := b.cur
	m, ok := moeMethods[method]
	E := lt.cols()
	r := cuda.MoERoute{Logits: lt.buf, Idx: it.buf, Weights: wt.buf, Rows: rows, Experts: E, K: k, Method: m, Row: forcedRow}
	if lay.pad {
		r.Slots, r.PadSlot = lay.slot, b.cache.c.Slots
	}
	drift := false
	if fb != nil {
		if b.mode == eager && forcedRow != 0 {
			st.varies[fb] = true
		}
		drift = b.mode != eager && st.varies[fb] && fb.rows() > rows
	}
	b.op(func(g *cuda.GPU) error {
		switch {
		case !ok && fb == nil:
			return fmt.Errorf("route: routing method %q", method)
		case it.cols() != k || wt.cols() != k || it.kind != kInt32 || wt.kind != kFloat:
			return fmt.Errorf("route: ids %v and weights %v for k = %d", it.shape, wt.shape, k)
		case rows > it.rows() || rows > lt.rows():
			return fmt.Errorf("route: %d rows, ids hold %d, logits %d", rows, it.rows(), lt.rows())
		}
		if ct != nil {
			if ct.kind != kInt32 || ct.cols() != E || layer < 0 || layer >= ct.rows() {
				return fmt.Errorf("route: counts %v for layer %d of %d experts", ct.shape, layer, E)
			}
			r.Counts = ct.buf.Slice(layer*E*4, E*4)
		}
		if fb != nil {
			if fb.kind != kInt32 || fb.cols() != k {
				return fmt.Errorf("route: forced table %v for k = %d", fb.shape, k)
			}
			r.Forced = fb.buf
			if st.drift.Bytes == 0 {
				if g.Stream.Capturing() {
					return fmt.Errorf("route: drift cells must exist before a capture")
				}
				d, err := b.alloc(g, moeDriftCells*4)
				if err != nil {
					return err
				}
				if err := g.Stream.Zero(d); err != nil {
					return err
				}
				st.drift = d
			}
			if drift {
				r.Drift, r.Period = st.drift.Slice(layer%moeDriftCells*4, 4), fb.rows()-rows
			}
		}
		return g.MoERoute(g.Stream, b.dt, r)
	})
}

// moe is MoE: with gemm_plugin auto and outside a capture, cuBLASLt GEMMs
// per expert (the counts are read back, so prefill and mixed iterations
// only); otherwise, and always with gemm_plugin disable, the own grouped
// kernels, which keep everything on the device. cuBLASLt 13.0 offers no
// grouped GEMM with device-side shapes on Hopper, and a padded-capacity
// batched GEMM would make every routing cost what the worst one costs,
// hiding the very imbalance routing_mode measures; so captured decode
// iterations run the own kernels under both settings.
func (b *Backend) moe(out, x, idx, weights, gateUp, down model.Tensor, rows, k int) {
	st := b.moeState()
	o, xi, it, wt, gu, dn := ft(out), ft(x), ft(idx), ft(weights), ft(gateUp), ft(down)
	rows = b.rows(rows)
	E, F2, H := gu.shape[0], gu.shape[1], gu.shape[2]
	sh := cuda.MoEShape{Rows: rows, K: k, Experts: E, Hidden: H, FFN: F2 / 2}
	most := sh
	most.Rows = max(rows, b.maxRows)
	// XRUN_CUDA_MOE_LT=0 (moeLibrary off) keeps gemm_plugin auto's expert
	// GEMMs on the own grouped kernels in eager iterations too (for
	// comparisons).
	library := b.blas != nil && b.moeLibrary
	b.op(func(g *cuda.GPU) error {
		switch {
		case len(gu.shape) != 3 || len(dn.shape) != 3 || dn.shape[0] != E || dn.shape[1] != H || dn.shape[2] != F2/2 || F2%2 != 0:
			return fmt.Errorf("moe: gate_up %v and down %v do not match [E, 2F, H] and [E, H, F]", gu.shape, dn.shape)
		case xi.cols() != H || o.cols() != H || rows > xi.rows() || rows > o.rows():
			return fmt.Errorf("moe: x %v and out %v for %d rows of hidden %d", xi.shape, o.shape, rows, H)
		case it.cols() != k || wt.cols() != k || rows > it.rows() || rows > wt.rows():
			return fmt.Errorf("moe: ids %v and weights %v for %d rows, k = %d", it.shape, wt.shape, rows, k)
		}
		if err := b.growWork(g, &st.work, cuda.MoEWorkBytes(b.dt, most, library), "moe workspace"); err != nil {
			return err
		}
		if library && !g.Stream.Capturing() {
			return g.MoEBlasLt(g.Stream, b.dt, b.blas, o.buf, xi.buf, it.buf, wt.buf, gu.buf, dn.buf, st.work, sh)
		}
		return g.MoE(g.Stream, b.dt, o.buf, xi.buf, it.buf, wt.buf, gu.buf, dn.buf, st.work, sh)
	})
}

// growWork grows the workspace *work to need bytes, what naming it in
// errors. Captured graphs hold the old address, so growing drops them (it
// happens only when the model grows its activations, which drops them
// anyway), and it cannot happen during a capture.
func (b *Backend) growWork(g *cuda.GPU, work *cuda.Buffer, need int, what string) error {
	if work.Bytes >= need {
		return nil
	}
	if g.Stream.Capturing() {
		return fmt.Errorf("moe: the %s (%d bytes) must exist before a capture", what, need)
	}
	if err := g.Stream.Sync(); err != nil {
		return err
	}
	b.dropGraphs()
	if work.Bytes > 0 {
		b.freeOwned(g, *work)
		b.memActs -= int64(work.Bytes)
		*work = cuda.Buffer{}
	}
	w, err := b.alloc(g, need)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	*work = w
	b.memActs += int64(need)
	return nil
}
