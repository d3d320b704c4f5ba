//go:build cgo && linux

package backend

import (
	"fmt"
	"math"
	"slices"

	"github.com/xrun-dev/xrun/engine/cuda"
	"github.com/xrun-dev/xrun/engine/fp8"
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
// (fusion.go); where a GEMM's input has a static scale, the RMSNorm or
// SwiGLU in front of it writes its codes itself (XRUN_CUDA_FP8_FUSE,
// fusion.go, kernels/fp8_fused.cu), so that no quantize pass runs.
//
// Static input scales come from a checkpoint's input_scale or from
// calibration at load (model.FP8Calibrator, CalibrateFP8): while it is on,
// the GEMMs of weights quantized dynamically per tensor also keep their
// input's largest magnitude in a device cell, and at its end each weight
// that saw input gets fp8.Scale of it, computed on the host as the CPU
// backend computes it.
//
// MoE experts run in FP8 too (moe_fp8.go). An FP8 KV cache is
// kv_fp8.go's (kv_cache_dtype fp8).

// randomFill is how a Random weight was generated.
type randomFill struct {
	seed  uint64
	scale float32
}

// fp8Weight is an FP8 GEMM weight's scales: scales holds nw float32
// weight scales (1, or one per row), then a checkpoint's static input
// scale if it has one, at scaleSlot(nw). static is the device float32 of the input's static
// scale (Bytes 0: dynamic): that one of scales, or one of the buffer
// calibration made for the weights it reached (endCalibration). Its
// fields change on the GPU's thread inside dev.Do (set-up, calibration)
// and, seen, on the caller's while calibrating; each side reads them
// after the other's change (dev.Do and dev.Post order the two).
type fp8Weight struct {
	scales   cuda.Buffer
	nw       int
	static   cuda.Buffer
	perToken bool
	// cell is 1 + the index of the weight's amax cell in b.fp8.cells while
	// calibrating (0: not calibrated); seen says a GEMM reached it.
	cell int
	seen bool
}

func (q *fp8Weight) operand(codes cuda.Buffer) cuda.FP8Operand {
	return cuda.FP8Operand{Codes: codes, Scales: q.scales.Slice(0, 4*q.nw), PerRow: q.nw > 1}
}

// scaleAlign is the alignment of a static input scale on the device: the
// fused path hands it to cuBLASLt as the A scale pointer, which cuBLASLt
// refuses (CUBLAS_STATUS_NOT_SUPPORTED, seen on an H200 with CUDA 13.0)
// at an address that is only 4-byte aligned.
const scaleAlign = 16

// scaleSlot is the index of a checkpoint's static input scale in a
// weight's scales, after its nw weight scales: the first scaleAlign-byte
// boundary.
func scaleSlot(nw int) int { return (nw*4 + scaleAlign - 1) / scaleAlign * scaleAlign / 4 }

func (q *fp8Weight) input() cuda.FP8Quant {
	return cuda.FP8Quant{Static: q.static, PerRow: q.perToken}
}

// fusable says the GEMM's input is quantized per tensor with a static
// scale: the kernel producing it can write its codes (fusion.go).
func (q *fp8Weight) fusable() bool { return q.static.Bytes > 0 && !q.perToken }

// fp8Scratch is the quantized input of the FP8 GEMM being run: codes,
// scales (one per row at most) and the amax cell, sized for the largest
// activation and the widest K of any FP8 weight (maxK); and what
// calibration and the fused quantization need.
type fp8Scratch struct {
	xq, sx, amax cuda.Buffer
	maxK         int

	// On the caller's goroutine: the Matrix FP8 weights (calibration's
	// candidates), whether any GEMM's input has a static scale (fusion.go
	// holds norms and SwiGLUs back only then) and whether calibration is
	// on.
	weights     []*tensor
	anyStatic   bool
	calibrating bool
	// cells are calibration's amax cells, one float32 per calibrated
	// weight.
	cells cuda.Buffer
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
	q := &fp8Weight{nw: len(h.FP8.Weight), perToken: h.FP8.PerToken}
	static := h.FP8.Input > 0
	sc := slices.Clone(h.FP8.Weight)
	at := scaleSlot(q.nw)
	if static {
		sc = append(sc, make([]float32, at-q.nw)...)
		sc = append(sc, h.FP8.Input)
	}
	t, err := b.uploadCodes(name, h, q, sc, func() {
		b.fp8.maxK = max(b.fp8.maxK, h.Shape[1])
		if static {
			q.static = q.scales.Slice(4*at, 4)
		}
	})
	if err != nil {
		return nil, err
	}
	b.fp8.weights = append(b.fp8.weights, ft(t))
	b.fp8.anyStatic = b.fp8.anyStatic || static
	return t, nil
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
	b.fp8.weights = append(b.fp8.weights, t)
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
	if s.xq, err = b.alloc(g, cuda.GemmInputRows(rows)*s.maxK); err != nil {
		return fmt.Errorf("fp8 input scratch: %w", err)
	}
	if s.sx, err = b.alloc(g, 4*rows); err != nil {
		return fmt.Errorf("fp8 input scratch: %w", err)
	}
	b.memActs += int64(s.xq.Bytes + s.sx.Bytes)
	return b.ensureAmax(g)
}

// matmulFP8 queues out = x · wᵀ for an FP8 weight: x quantized into the
// scratch (by the held-back op pre that produces x, where fusion.go gives
// one, else on its own, its amax kept too while calibrating), then
// cuBLASLt's FP8 GEMM (gemm_plugin auto, per-tensor scales) or the own
// one.
func (b *Backend) matmulFP8(o, xi, wt *tensor, rows int, pre *pending) {
	n, k := wt.shape[0], wt.shape[1]
	q := wt.q
	mode := q.input()
	var cell cuda.Buffer
	if b.fp8.calibrating && q.cell > 0 {
		q.seen = true
		cell = b.fp8.cells.Slice(4*(q.cell-1), 4)
	}
	b.op(func(g *cuda.GPU) error {
		if xi.cols() != k || o.cols() != n {
			return fmt.Errorf("matmul %s: x has %d columns, out %d, weight is %v", wt.name, xi.cols(), o.cols(), wt.shape)
		}
		if err := b.ensureFP8Input(g, rows); err != nil {
			return err
		}
		x := cuda.FP8Operand{Codes: b.fp8.xq, Scales: b.fp8.sx, PerRow: mode.PerRow}
		switch {
		case pre != nil:
			// The GEMM reads the static scale where it is.
			x.Scales = mode.Static
			if err := b.fp8Produce(g, pre, rows, k, mode.Static); err != nil {
				return fmt.Errorf("matmul %s: %w", wt.name, err)
			}
		default:
			if cell.Bytes > 0 {
				if err := g.FP8CalibAmax(g.Stream, b.dt, xi.buf, rows*k, cell); err != nil {
					return fmt.Errorf("matmul %s: %w", wt.name, err)
				}
			}
			if err := g.FP8Quantize(g.Stream, b.dt, b.fp8.xq, xi.buf, rows, k, mode, b.fp8.amax, b.fp8.sx); err != nil {
				return fmt.Errorf("matmul %s: %w", wt.name, err)
			}
		}
		w := q.operand(wt.buf)
		if b.blas != nil && !x.PerRow && !w.PerRow {
			return b.blas.MatmulFP8(g.Stream, b.dt, o.buf, x, w, rows, n, k)
		}
		return g.GemmFP8(g.Stream, b.dt, o.buf, x, w, rows, n, k)
	})
}

// CalibrateFP8 begins (on) or ends calibration (model.FP8Calibrator).
// Beginning drops the captured graphs (a replay would skip the amax
// kernels) and zeroes a cell for each Matrix weight whose input is
// quantized dynamically per tensor. Ending waits for the work queued
// before it, reads the cells and gives each weight that saw input the
// static scale fp8.Scale(amax) from then on; the graphs captured meanwhile
// go, since they quantize the old way.
func (b *Backend) CalibrateFP8(on bool) error {
	if on == b.fp8.calibrating {
		return fmt.Errorf("fp8 calibration is already %s", map[bool]string{true: "on", false: "off"}[on])
	}
	b.release()
	if on {
		return b.beginCalibration()
	}
	return b.endCalibration()
}

func (b *Backend) beginCalibration() error {
	var qs []*fp8Weight
	for _, t := range b.fp8.weights {
		if q := t.q; q != nil && q.static.Bytes == 0 && !q.perToken {
			qs = append(qs, q)
		}
	}
	err := b.dev.Do(func(g *cuda.GPU) error {
		if err := b.flush(g); err != nil {
			return err
		}
		if err := g.Stream.Sync(); err != nil {
			return err
		}
		b.dropGraphs()
		if len(qs) == 0 {
			return nil
		}
		cells, err := b.alloc(g, 4*len(qs))
		if err != nil {
			return fmt.Errorf("fp8 calibration: %w", err)
		}
		b.fp8.cells = cells
		for i, q := range qs {
			q.cell, q.seen = i+1, false
		}
		return g.Stream.Zero(cells)
	})
	if err != nil {
		return err
	}
	b.fp8.calibrating = true
	return nil
}

func (b *Backend) endCalibration() error {
	b.fp8.calibrating = false
	made := false
	err := b.dev.Do(func(g *cuda.GPU) error {
		err := b.flush(g)
		// Whatever happened, the cells go, and with them the graphs
		// captured meanwhile, whose amax kernels write into them.
		if serr := g.Stream.Sync(); err == nil {
			err = serr
		}
		b.dropGraphs()
		var qs []*fp8Weight
		for _, t := range b.fp8.weights {
			if q := t.q; q != nil && q.cell > 0 {
				qs = append(qs, q)
			}
		}
		cells := b.fp8.cells
		defer func() {
			for _, q := range qs {
				q.cell = 0
			}
			b.freeOwned(g, cells)
			b.fp8.cells = cuda.Buffer{}
		}()
		if err != nil || len(qs) == 0 {
			return err
		}
		bits := make([]uint32, cells.Bytes/4)
		if err := cuda.DownloadSlice(g.Stream, bits, cells); err != nil {
			return fmt.Errorf("fp8 calibration: %w", err)
		}
		// One scale every scaleAlign bytes: cuBLASLt reads them in place.
		var scales []float32
		var to []*fp8Weight
		for _, q := range qs {
			if q.seen {
				scales = append(scales, fp8.Scale(math.Float32frombits(bits[q.cell-1])))
				scales = append(scales, make([]float32, scaleAlign/4-1)...)
				to = append(to, q)
			}
		}
		if len(to) == 0 {
			return nil
		}
		buf, err := b.alloc(g, 4*len(scales))
		if err != nil {
			return fmt.Errorf("fp8 calibration: %w", err)
		}
		if err := cuda.UploadSlice(g.Stream, buf, scales); err != nil {
			return fmt.Errorf("fp8 calibration: %w", err)
		}
		b.memWeights += int64(buf.Bytes)
		for i, q := range to {
			q.static = buf.Slice(scaleAlign*i, 4)
		}
		made = true
		return nil
	})
	b.fp8.anyStatic = b.fp8.anyStatic || made
	return err
}

// Compile-time checks: the backend runs FP8 GEMMs and calibrates their
// static input scales.
var (
	_ model.FP8GEMMs      = (*Backend)(nil)
	_ model.FP8Calibrator = (*Backend)(nil)
)
