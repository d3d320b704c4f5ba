//go:build cgo && linux

package backend

import (
	"fmt"
	"slices"

	"github.com/xrun-dev/xrun/engine/cuda"
	"github.com/xrun-dev/xrun/engine/model"
)

// FP8 GEMMs (dtype fp8; model.FP8GEMMs), TensorRT-LLM's FP8 recipe as the
// CPU backend computes it (engine/cpu/fp8.go, the reference): the linear
// layers' weights are E4M3 codes with a per-tensor (or a checkpoint's
// per-channel) scale, each GEMM quantizes its input to E4M3 first (the
// checkpoint's static input_scale, else amax/448 over the input computed
// on the device, or per token where the checkpoint says so), and the GEMM
// multiplies codes with float32 accumulation and scales its bf16 output:
// cuBLASLt's FP8 kernels under gemm_plugin auto, the own FP8 kernels under
// disable and for per-row scales (cuBLASLt's Hopper FP8 path takes
// per-tensor scales only). Attention, norms, the router and the LM head
// stay in bf16. FP8 GEMMs are never held back for the decode GEMV fusions
// (fusion.go): the norm in front of one runs on its own.
//
// MoE experts run in FP8 too (moe_fp8.go). An FP8 KV cache is
// kv_fp8.go's (opt-in until verified on a GPU).

// randomFill is how a Random weight was generated.
type randomFill struct {
	seed  uint64
	scale float32
}

// fp8Weight is an FP8 GEMM weight's scales: scales holds nw float32
// weight scales (1, or one per row), then the static input scale if any.
type fp8Weight struct {
	scales   cuda.Buffer
	nw       int
	static   bool
	perToken bool
}

func (q *fp8Weight) operand(codes cuda.Buffer) cuda.FP8Operand {
	return cuda.FP8Operand{Codes: codes, Scales: q.scales.Slice(0, 4*q.nw), PerRow: q.nw > 1}
}

func (q *fp8Weight) input() cuda.FP8Quant {
	m := cuda.FP8Quant{PerRow: q.perToken}
	if q.static {
		m.Static = q.scales.Slice(4*q.nw, 4)
	}
	return m
}

// fp8Scratch is the quantized input of the FP8 GEMM being run: codes,
// scales (one per row at most) and the amax cell, sized for the largest
// activation and the widest K of any FP8 weight (maxK).
type fp8Scratch struct {
	xq, sx, amax cuda.Buffer
	maxK         int
}

// errNoFP8 refuses what this backend has no FP8 kernels for.
func errNoFP8(name, what string) error {
	return fmt.Errorf("%s: %s on the CUDA backend: %w", name, what, model.ErrNoFP8)
}

// uploadFP8 makes an FP8 GEMM weight of an F8_E4M3 checkpoint tensor: its
// codes and scales as they are.
func (b *Backend) uploadFP8(name string, kind model.WeightKind, h model.HostTensor) (model.Tensor, error) {
	switch kind {
	case model.Matrix:
	case model.Experts:
		return b.uploadExpertsFP8(name, h)
	default:
		return nil, fmt.Errorf("%s: an F8_E4M3 weight must be a GEMM weight (Matrix)", name)
	}
	if err := h.CheckFP8(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	n := numel(h.Shape)
	if len(h.Data) != n {
		return nil, fmt.Errorf("%s: %d bytes for shape %v of F8_E4M3", name, len(h.Data), h.Shape)
	}
	q := &fp8Weight{nw: len(h.FP8.Weight), static: h.FP8.Input > 0, perToken: h.FP8.PerToken}
	sc := slices.Clone(h.FP8.Weight)
	if q.static {
		sc = append(sc, h.FP8.Input)
	}
	return b.uploadCodes(name, h, q, sc, func() { b.fp8.maxK = max(b.fp8.maxK, h.Shape[1]) })
}

// uploadCodes makes a weight of an F8_E4M3 checkpoint tensor's codes and
// the float32 scales sc (q's), then calls then on the GPU's thread.
func (b *Backend) uploadCodes(name string, h model.HostTensor, q *fp8Weight, sc []float32, then func()) (model.Tensor, error) {
	t := &tensor{name: name, shape: slices.Clone(h.Shape), kind: kFloat, q: q}
	err := b.dev.Do(func(g *cuda.GPU) error {
		var err error
		if t.buf, err = b.alloc(g, len(h.Data)); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if q.scales, err = b.alloc(g, 4*len(sc)); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		b.memWeights += int64(t.buf.Bytes + q.scales.Bytes)
		then()
		if err := g.Stream.Upload(t.buf, h.Data); err != nil {
			return err
		}
		return cuda.UploadSlice(g.Stream, q.scales, sc)
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// QuantizeFP8 replaces a Matrix weight by its E4M3 codes with one scale,
// amax/448 (model.FP8GEMMs): of the float32 values a Random weight was
// generated from, else of its fp16/bf16 values; its GEMMs quantize their
// input dynamically per tensor.
func (b *Backend) QuantizeFP8(w model.Tensor) (model.Tensor, error) {
	t := ft(w)
	if t.q != nil {
		return t, nil
	}
	switch len(t.shape) {
	case 2:
	case 3:
		return b.quantizeExpertsFP8(t)
	default:
		return nil, fmt.Errorf("%s: shape %v is not a Matrix weight", t.name, t.shape)
	}
	n, k := t.shape[0], t.shape[1]
	err := b.quantizeInPlace(t, n*k, 1, func(g *cuda.GPU, codes cuda.Buffer, q *fp8Weight) error {
		b.fp8.maxK = max(b.fp8.maxK, k) // on the GPU's thread, as its readers
		if t.rnd != nil {
			return g.FP8QuantizeRandom(g.Stream, codes, n*k, t.rnd.seed, t.rnd.scale, b.fp8.amax, q.scales)
		}
		return g.FP8Quantize(g.Stream, b.dt, codes, t.buf, n, k, cuda.FP8Quant{}, b.fp8.amax, q.scales)
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// quantizeInPlace replaces t's fp16/bf16 values by n E4M3 codes and nw
// float32 weight scales, which quantize writes (b.fp8.amax is its
// scratch).
func (b *Backend) quantizeInPlace(t *tensor, n, nw int, quantize func(g *cuda.GPU, codes cuda.Buffer, q *fp8Weight) error) error {
	q := &fp8Weight{nw: nw}
	return b.dev.Do(func(g *cuda.GPU) error {
		codes, err := b.alloc(g, n)
		if err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
		if q.scales, err = b.alloc(g, 4*nw); err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
		if err := b.ensureAmax(g); err != nil {
			return err
		}
		if err := quantize(g, codes, q); err != nil {
			return fmt.Errorf("quantizing %s: %w", t.name, err)
		}
		// The kernels read the fp16/bf16 weight: done before it goes.
		if err := g.Stream.Sync(); err != nil {
			return err
		}
		b.memWeights += int64(codes.Bytes+q.scales.Bytes) - int64(t.buf.Bytes)
		b.freeOwned(g, t.buf)
		t.buf, t.rnd, t.q = codes, nil, q
		return nil
	})
}

// ensureAmax allocates the amax cell (set-up only).
func (b *Backend) ensureAmax(g *cuda.GPU) error {
	if b.fp8.amax.Bytes > 0 {
		return nil
	}
	a, err := b.alloc(g, cuda.FP8AmaxBytes)
	b.fp8.amax = a
	return err
}

// ensureFP8Input sizes the quantized-input scratch for rows rows of the
// widest FP8 weight. Captured graphs hold its address, so growing drops
// them; it cannot grow inside a capture (the eager first iteration of a
// bucket sizes it).
func (b *Backend) ensureFP8Input(g *cuda.GPU, rows int) error {
	s := &b.fp8
	rows = max(rows, b.maxRows)
	if s.xq.Bytes >= rows*s.maxK && s.sx.Bytes >= 4*rows {
		return nil
	}
	if g.Stream.Capturing() {
		return fmt.Errorf("fp8: the input scratch (%d x %d) must exist before a capture", rows, s.maxK)
	}
	if err := g.Stream.Sync(); err != nil {
		return err
	}
	b.dropGraphs()
	if s.xq.Bytes > 0 {
		b.memActs -= int64(s.xq.Bytes + s.sx.Bytes)
		b.freeOwned(g, s.xq, s.sx)
		s.xq, s.sx = cuda.Buffer{}, cuda.Buffer{}
	}
	var err error
	if s.xq, err = b.alloc(g, rows*s.maxK); err != nil {
		return fmt.Errorf("fp8 input scratch: %w", err)
	}
	if s.sx, err = b.alloc(g, 4*rows); err != nil {
		return fmt.Errorf("fp8 input scratch: %w", err)
	}
	b.memActs += int64(s.xq.Bytes + s.sx.Bytes)
	return b.ensureAmax(g)
}

// matmulFP8 queues out = x · wᵀ for an FP8 weight: x quantized into the
// scratch, then cuBLASLt's FP8 GEMM (gemm_plugin auto, per-tensor scales)
// or the own one.
func (b *Backend) matmulFP8(o, xi, wt *tensor, rows int) {
	n, k := wt.shape[0], wt.shape[1]
	q := wt.q
	b.op(func(g *cuda.GPU) error {
		if xi.cols() != k || o.cols() != n {
			return fmt.Errorf("matmul %s: x has %d columns, out %d, weight is %v", wt.name, xi.cols(), o.cols(), wt.shape)
		}
		if err := b.ensureFP8Input(g, rows); err != nil {
			return err
		}
		mode := q.input()
		if err := g.FP8Quantize(g.Stream, b.dt, b.fp8.xq, xi.buf, rows, k, mode, b.fp8.amax, b.fp8.sx); err != nil {
			return fmt.Errorf("matmul %s: %w", wt.name, err)
		}
		x := cuda.FP8Operand{Codes: b.fp8.xq, Scales: b.fp8.sx, PerRow: mode.PerRow}
		w := q.operand(wt.buf)
		if b.blas != nil && !x.PerRow && !w.PerRow {
			return b.blas.MatmulFP8(g.Stream, b.dt, o.buf, x, w, rows, n, k)
		}
		return g.GemmFP8(g.Stream, b.dt, o.buf, x, w, rows, n, k)
	})
}

// Compile-time check: the backend runs FP8 GEMMs.
var _ model.FP8GEMMs = (*Backend)(nil)
