//go:build cgo && linux

package cuda

import "fmt"

// FP8Experts is an expert stack [E][N][K] in E4M3 (dtype fp8 on a MoE
// model; kernels/moe_fp8.cu): Codes E·N·K bytes and Scales E·N float32,
// one a row (a per-expert scale repeated, or a checkpoint's per-channel
// ones).
type FP8Experts struct {
	Codes, Scales Buffer
}

// check verifies w holds an [E][N][K] stack.
func (w FP8Experts) check(E, N, K int) error {
	switch {
	case K%16 != 0:
		return fmt.Errorf("cuda: FP8 expert rows of %d values: want a multiple of 16", K)
	case w.Codes.Bytes < E*N*K || w.Scales.Bytes < 4*E*N:
		return fmt.Errorf("cuda: FP8 experts of %d bytes of codes and %d of scales, [%d, %d, %d] needs %d and %d",
			w.Codes.Bytes, w.Scales.Bytes, E, N, K, E*N*K, 4*E*N)
	case w.Codes.Ptr%16 != 0:
		return fmt.Errorf("cuda: FP8 expert codes must be 16-byte aligned")
	}
	return nil
}

// The kernel's row tile and output columns a block (kernels/moe_fp8.cu:
// F8_BM, F8_BN).
const fp8MoEBM, fp8MoEBN = 64, 64

// fp8MoEScratch is what MoEFP8 adds to MoEMXFP4's workspace: the codes of
// the GEMM input being run (the gathered rows, then the activations), its
// scale, and FP8Quantize's amax scratch.
type fp8MoEScratch struct{ q, sx, amax Buffer }

// fp8MoELayout places MoEFP8's buffers (expertsLayout), then the scratch.
func fp8MoELayout(dt DType, sh MoEShape, base Buffer) (moeWork, fp8MoEScratch) {
	w, b := expertsLayout(dt, sh, base, fp8MoEBM, sh.Rows*sh.K*max(sh.Hidden, sh.FFN), 8, FP8AmaxBytes)
	return w, fp8MoEScratch{q: b[0], sx: b[1], amax: b[2]}
}

// MoEFP8WorkBytes is the workspace MoEFP8 needs for sh.
func MoEFP8WorkBytes(dt DType, sh MoEShape) int {
	w, _ := fp8MoELayout(dt, sh, Buffer{})
	return w.bytes
}

// MoEFP8 queues MoE on FP8 experts, as the CPU backend's moeFP8: the pairs
// grouped by expert and their token rows gathered; those rows quantized
// to E4M3 with the input's scale (amax/448 over every token's row, those
// routed nowhere included) and the gate/up GEMM on codes (moe_fp8) scaled
// by the input's and each weight row's scale; SwiGLU; the activations of
// the routed pairs quantized per tensor and the down GEMM alike; the
// combine. Nothing is read back, so it can be captured.
func (g *GPU) MoEFP8(s *Stream, dt DType, out, x, idx, wts Buffer, gateUp, down FP8Experts, work Buffer, sh MoEShape) error {
	n, E, H, F := sh.Rows*sh.K, sh.Experts, sh.Hidden, sh.FFN
	if err := checkExperts(dt, sh, out, x, idx, wts, work, MoEFP8WorkBytes(dt, sh), func() error {
		if err := gateUp.check(E, 2*F, H); err != nil {
			return err
		}
		return down.check(E, H, F)
	}); err != nil {
		return err
	}
	if sh.Rows == 0 {
		return nil
	}
	w, sc := fp8MoELayout(dt, sh, work)
	// Grid x covers every tile moe_group can write (blocks past hdr[0]
	// exit).
	tiles := ceilDiv(n, fp8MoEBM) + E
	return g.ossExperts(s, dt, out, x, idx, wts, w, sh, MoEOSS{}, fp8MoEBM, func(A, Y Buffer, isDown bool, N, K int) error {
		wt, sx := gateUp, sc.sx.Slice(0, 4)
		if isDown {
			// The activations: the rows of pairs routed nowhere were
			// zeroed (below), so the amax is the routed pairs'.
			wt = down
			if err := g.FP8Quantize(s, dt, sc.q, A, n, K, FP8Quant{}, sc.amax, sx); err != nil {
				return err
			}
		} else {
			// The input's scale from x itself, then the gathered rows
			// (the routed pairs' only are written) quantized with it.
			if err := g.FP8Quantize(s, dt, sc.q, x, sh.Rows, K, FP8Quant{}, sc.amax, sx); err != nil {
				return err
			}
			if err := g.FP8Quantize(s, dt, sc.q, A, n, K, FP8Quant{Static: sx}, sc.amax, sc.sx.Slice(4, 4)); err != nil {
				return err
			}
			// The activation rows the SwiGLU will not write count as
			// zeros in their amax.
			if err := s.Zero(w.act); err != nil {
				return err
			}
		}
		f, err := g.function("moe_fp8", "moe_fp8_"+dt.suffix())
		if err != nil {
			return err
		}
		a := g.argsPack().Ptr(sc.q).Ptr(sx).Ptr(wt.Codes).Ptr(wt.Scales).Ptr(Y).Ptr(w.hdr).Ptr(w.tiles).I32(N).I32(K)
		return s.Launch(f, Dim3{X: tiles, Y: ceilDiv(N, fp8MoEBN)}, Dim3{X: 128}, 0, a)
	})
}

// FP8QuantizeRandomRows queues the E4M3 codes of elements offset ..
// offset + n - 1 of the random weight (seed, scale) into q, with their own
// scale s = amax/448 of those float32 values written to the nscales
// float32 of scaleOut: one expert of an Experts stack, as the CPU
// backend's QuantizeFP8 quantizes each, with a scale a row. amax is a
// 4-byte scratch cell.
func (g *GPU) FP8QuantizeRandomRows(s *Stream, q Buffer, n int, offset int64, seed uint64, scale float32, amax, scaleOut Buffer, nscales int) error {
	if q.Bytes < n || amax.Bytes < 4 || scaleOut.Bytes < 4*nscales || offset < 0 || nscales < 1 {
		return fmt.Errorf("cuda: FP8 random weight of %d codes from %d into %d bytes, %d scales into %d bytes", n, offset, q.Bytes, nscales, scaleOut.Bytes)
	}
	amax = amax.Slice(0, 4)
	if err := s.Zero(amax); err != nil {
		return err
	}
	grid := Dim3{X: min(ceilDiv(n, 256*8), 8*g.Info.SMs)}
	f, err := g.function("fp8", "fp8_random_amax_at")
	if err != nil {
		return err
	}
	if err := s.Launch(f, grid, Dim3{X: 256}, 0, g.argsPack().U64(uint64(n)).U64(uint64(offset)).U64(seed).F32(scale).Ptr(amax)); err != nil {
		return err
	}
	f, err = g.function("fp8", "fp8_random_quant_at")
	if err != nil {
		return err
	}
	a := g.argsPack().Ptr(q).U64(uint64(n)).U64(uint64(offset)).U64(seed).F32(scale).Ptr(amax).Ptr(scaleOut).I32(nscales)
	return s.Launch(f, grid, Dim3{X: 256}, 0, a)
}
