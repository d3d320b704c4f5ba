//go:build cgo && linux

package cuda

import "fmt"

// FP8 E4M3 GEMMs (kernels/fp8.cu): activations quantized per tensor or per
// row, random weights quantized per tensor, and the own FP8 GEMM. Codes are
// one byte each; scales are float32 in device memory, so that dynamic
// scales never leave the GPU and everything can be captured in a graph.

// FP8Quant says how an FP8 GEMM's input is quantized.
type FP8Quant struct {
	// Static is a device float32 holding the checkpoint's input scale
	// (Bytes 0: dynamic).
	Static Buffer
	// PerRow quantizes each row with its own amax/448 (per token).
	PerRow bool
}

// FP8AmaxBytes is the size of the amax scratch FP8Quantize needs for a
// dynamic per-tensor scale: the partial maxima of up to fp8AmaxParts
// blocks (and FP8QuantizeRandom's one cell).
const FP8AmaxBytes = 4 * fp8AmaxParts

const fp8AmaxParts = 1024

// fp8SelfAmaxMax is the largest input (rows x k) whose dynamic scale every
// quantizing block computes itself, sparing the amax kernel: decode's
// inputs (4096 to 14336 values a row at Llama-3.1-8B) are read from L2 by
// each of a few blocks faster than a second launch runs.
const fp8SelfAmaxMax = 1 << 15

// Modes of fp8_quant (kernels/fp8.cu).
const (
	fqStatic = iota
	fqParts
	fqSelf
	fqRow
)

// FP8Quantize queues q[rows, k] = E4M3(x · (1/s)) with s per q's mode,
// writing s to scales (one float32, or one per row with PerRow). amax is
// scratch of FP8AmaxBytes for a dynamic per-tensor scale of a larger
// input: the partial maxima of an amax kernel in front.
func (g *GPU) FP8Quantize(s *Stream, dt DType, q, x Buffer, rows, k int, mode FP8Quant, amax, scales Buffer) error {
	switch {
	case rows <= 0 || k <= 0:
		return fmt.Errorf("cuda: FP8 quantize of %d x %d", rows, k)
	case x.Bytes < rows*k*dt.Size() || q.Bytes < rows*k:
		return fmt.Errorf("cuda: FP8 quantize of %d x %d: x holds %d bytes, q %d", rows, k, x.Bytes, q.Bytes)
	case mode.PerRow && scales.Bytes < 4*rows || scales.Bytes < 4:
		return fmt.Errorf("cuda: FP8 quantize of %d rows: %d bytes of scales", rows, scales.Bytes)
	}
	n, fq, parts := rows*k, fqStatic, 0
	switch {
	case mode.PerRow:
		fq = fqRow
	case mode.Static.Bytes > 0:
	case n <= fp8SelfAmaxMax:
		fq = fqSelf
	default:
		fq, parts = fqParts, min(ceilDiv(n, 256*8), 4*g.Info.SMs, fp8AmaxParts)
		if amax.Bytes < 4*parts {
			return fmt.Errorf("cuda: FP8 quantize: %d bytes of amax scratch, %d partial maxima", amax.Bytes, parts)
		}
		f, err := g.function("fp8", "fp8_amax_"+dt.suffix())
		if err != nil {
			return err
		}
		if err := s.Launch(f, Dim3{X: parts}, Dim3{X: 256}, 0, g.argsPack().Ptr(x).U64(uint64(n)).Ptr(amax)); err != nil {
			return err
		}
	}
	f, err := g.function("fp8", "fp8_quant_"+dt.suffix())
	if err != nil {
		return err
	}
	a := g.argsPack().Ptr(x).Ptr(q).I32(rows).I32(k).Ptr(mode.Static).Ptr(amax).I32(parts).Ptr(scales).I32(fq)
	return s.Launch(f, Dim3{X: rows}, Dim3{X: min(256, ceilDiv(k, 128)*32)}, 0, a)
}

// FP8CalibAmax queues *cell = max(*cell, max |x[i]|) over x's first n
// values (NaNs skipped, as fp8.AbsMax does): the running amax that
// calibrates a static input scale. cell is one float32 (its bits maxed
// into atomically), zeroed by the caller before the first.
func (g *GPU) FP8CalibAmax(s *Stream, dt DType, x Buffer, n int, cell Buffer) error {
	if n <= 0 || x.Bytes < n*dt.Size() || cell.Bytes < 4 {
		return fmt.Errorf("cuda: FP8 calibration amax of %d values in %d bytes into %d", n, x.Bytes, cell.Bytes)
	}
	f, err := g.function("fp8", "fp8_calib_amax_"+dt.suffix())
	if err != nil {
		return err
	}
	grid := Dim3{X: min(ceilDiv(n, 256*8), 4*g.Info.SMs)}
	return s.Launch(f, grid, Dim3{X: 256}, 0, g.argsPack().Ptr(x).U64(uint64(n)).Ptr(cell.Slice(0, 4)))
}

// FP8QuantizeRandom queues q[i] = E4M3(RandomValue(seed, i, scale) / s)
// for the n elements of a random weight, s = amax/448 of those float32
// values (written to scaleOut): QuantizeFP8 of a Random weight, with the
// CPU backend's scale and codes exactly. amax is a 4-byte scratch cell.
func (g *GPU) FP8QuantizeRandom(s *Stream, q Buffer, n int, seed uint64, scale float32, amax, scaleOut Buffer) error {
	if q.Bytes < n || amax.Bytes < 4 || scaleOut.Bytes < 4 {
		return fmt.Errorf("cuda: FP8 random weight of %d codes into %d bytes", n, q.Bytes)
	}
	amax = amax.Slice(0, 4) // one cell, maxed into atomically
	if err := s.Zero(amax); err != nil {
		return err
	}
	grid := Dim3{X: min(ceilDiv(n, 256*8), 8*g.Info.SMs)}
	f, err := g.function("fp8", "fp8_random_amax")
	if err != nil {
		return err
	}
	if err := s.Launch(f, grid, Dim3{X: 256}, 0, g.argsPack().U64(uint64(n)).U64(seed).F32(scale).Ptr(amax)); err != nil {
		return err
	}
	f, err = g.function("fp8", "fp8_random_quant")
	if err != nil {
		return err
	}
	return s.Launch(f, grid, Dim3{X: 256}, 0, g.argsPack().Ptr(q).U64(uint64(n)).U64(seed).F32(scale).Ptr(amax).Ptr(scaleOut))
}

// FP8Operand is an E4M3 GEMM operand: its codes and its scales (one
// float32, or one per row with PerRow).
type FP8Operand struct {
	Codes, Scales Buffer
	PerRow        bool
}

// fp8GemvRows is the largest M the own FP8 GEMM runs as matrix-vector
// products (fp8_gemv keeps 8 accumulators per lane).
const fp8GemvRows = 8

// GemmFP8 queues Y[m,n] = (X[m,k] W[n,k]^T) · scale_x · scale_w with the
// engine's own FP8 kernels (gemm_plugin disable), Y in dt: up to
// fp8GemvRows rows matrix-vector products, above on Hopper the warpgroup
// MMA over E4M3 (gemm_wgmma.cu; XRUN_CUDA_WGMMA_FP8), elsewhere CUDA-core
// tiles (fp8.cu). K must be a multiple of 16 and the codes 16-byte
// aligned.
func (g *GPU) GemmFP8(s *Stream, dt DType, y Buffer, x, w FP8Operand, m, n, k int) error {
	if err := checkGemmFP8(dt, y, x, w, m, n, k); err != nil {
		return err
	}
	if k%16 != 0 || x.Codes.Ptr%16 != 0 || w.Codes.Ptr%16 != 0 {
		return fmt.Errorf("cuda: own FP8 GEMM needs K %% 16 == 0 and 16-byte aligned codes (got K=%d, X at %#x, W at %#x)", k, x.Codes.Ptr, w.Codes.Ptr)
	}
	if m > fp8GemvRows && g.wgmmaFP8() {
		// Hopper: the warpgroup MMA's E4M3 form (gemm_tma.cu, or
		// gemm_wgmma.cu without TMA).
		if p, ok := g.tmaPlanFor(m, n, k, true); ok {
			return g.launchGemmTMA(s, dt, y, x.Codes, w.Codes, p, 1, m, n, k, fp8ScaleArgs(x, w))
		}
		if err := g.gemmWorkspace(s); err != nil {
			return err
		}
		p := planGemmWG(m, n, k, g.Info.SMs, g.gemmWS.Bytes, true, g.sw.CUDAWgmmaTile, g.sw.CUDAGemmWaves)
		return g.launchGemm(s, dt, y, p, m, n, k, func(a *Args, part Buffer) *Args {
			return fp8ScaleArgs(x, w)(a.Ptr(x.Codes).Ptr(w.Codes).Ptr(y).Ptr(part)).I32(m).I32(n).I32(k).I32(p.kps)
		})
	}
	name, grid, block := "fp8_gemm_", Dim3{X: ceilDiv(n, 64), Y: ceilDiv(m, 64)}, Dim3{X: 256}
	if m <= fp8GemvRows {
		name, grid = "fp8_gemv_", Dim3{X: ceilDiv(n, 8)}
	}
	f, err := g.function("fp8", name+dt.suffix())
	if err != nil {
		return err
	}
	a := fp8ScaleArgs(x, w)(g.argsPack().Ptr(x.Codes).Ptr(w.Codes).Ptr(y)).I32(m).I32(n).I32(k)
	return s.Launch(f, grid, block, 0, a)
}

// fp8ScaleArgs appends the operands' scales as every own FP8 GEMM kernel
// takes them: X's and whether they are one a row, then W's.
func fp8ScaleArgs(x, w FP8Operand) func(a *Args) *Args {
	return func(a *Args) *Args { return a.Ptr(x.Scales).I32(b2i(x.PerRow)).Ptr(w.Scales).I32(b2i(w.PerRow)) }
}

// checkGemmFP8 validates an FP8 GEMM's operands against its shape.
func checkGemmFP8(dt DType, y Buffer, x, w FP8Operand, m, n, k int) error {
	sc := func(o FP8Operand, rows int) int {
		if o.PerRow {
			return 4 * rows
		}
		return 4
	}
	switch {
	case m <= 0 || n <= 0 || k <= 0:
		return fmt.Errorf("cuda: FP8 GEMM shape M=%d N=%d K=%d", m, n, k)
	case x.Codes.Bytes < m*k || w.Codes.Bytes < n*k:
		return fmt.Errorf("cuda: FP8 GEMM codes: X holds %d bytes, W %d, for M=%d N=%d K=%d", x.Codes.Bytes, w.Codes.Bytes, m, n, k)
	case x.Scales.Bytes < sc(x, m) || w.Scales.Bytes < sc(w, n):
		return fmt.Errorf("cuda: FP8 GEMM scales: X has %d bytes, W %d, for M=%d N=%d", x.Scales.Bytes, w.Scales.Bytes, m, n)
	case y.Bytes < m*n*dt.Size():
		return fmt.Errorf("cuda: FP8 GEMM Y holds %d bytes, M=%d x N=%d needs %d", y.Bytes, m, n, m*n*dt.Size())
	}
	return nil
}
