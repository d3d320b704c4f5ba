//go:build cgo && linux

package cuda

import "fmt"

// MoEOSS is what GPT-OSS's experts add to MoE: biases (GateUpBias
// [experts][2 FFN] in [gate | up] order, DownBias [experts][hidden]; Ptr 0:
// none) and the clamped SwiGLU (Limit > 0: (clamp(u, ±Limit) + 1) ·
// min(g, Limit) · sigmoid(Alpha · min(g, Limit)); 0: silu(g) · u).
type MoEOSS struct {
	GateUpBias, DownBias Buffer
	Limit, Alpha         float32
}

// expertsLayout places the buffers of MoE on gathered rows (ossExperts:
// MoEOSSExperts, MoEMXFP4, MoEFP8) at base (base.Bytes == 0: only size
// them): the grouping's, with room for the tiles of row tiles of minTile
// rows at least, then the gathered inputs, the gate/up products, the
// activations and the down products, one row per routed pair, then a
// buffer of each of the extra sizes.
func expertsLayout(dt DType, sh MoEShape, base Buffer, minTile int, extra ...int) (moeWork, []Buffer) {
	es := dt.Size()
	n, E, H, F := sh.Rows*sh.K, sh.Experts, sh.Hidden, sh.FFN
	w := moeWork{nmax: n}
	off := 0
	take := func(bytes int) Buffer {
		b := Buffer{Ptr: base.Ptr + DevicePtr(off), Bytes: bytes}
		off += (bytes + 255) / 256 * 256
		return b
	}
	w.hdr = take(16 * 4)
	w.cntOffs = take((2*E + 1) * 4)
	w.order = take(n * 4)
	w.where = take(n * 4)
	w.tiles = take((ceilDiv(n, minTile) + E) * 16)
	w.xs = take(n * H * es)
	w.gu = take(n * 2 * F * es)
	w.act = take(n * F * es)
	w.ys = take(n * H * es)
	var bufs []Buffer
	for _, x := range extra {
		bufs = append(bufs, take(x))
	}
	w.bytes = off
	if base.Bytes != 0 && off > base.Bytes {
		panic("cuda: MoE workspace smaller than its layout") // callers check the WorkBytes first
	}
	return w, bufs
}

// ossMoELayout places MoEOSSExperts' buffers (expertsLayout).
func ossMoELayout(dt DType, sh MoEShape, base Buffer) moeWork {
	w, _ := expertsLayout(dt, sh, base, moeGemmSmall.bm)
	return w
}

// MoEOSSWorkBytes is the workspace MoEOSSExperts needs for sh.
func MoEOSSWorkBytes(dt DType, sh MoEShape) int { return ossMoELayout(dt, sh, Buffer{}).bytes }

// MoEOSSExperts queues MoE with GPT-OSS's expert biases and activation:
// the pairs grouped by expert (moe_group) and their token rows gathered,
// the own grouped GEMM without its fused SwiGLU for gate/up, the biases
// and the activation (kernels/moe_oss.cu), the grouped down GEMM, its
// bias, and the combine. Nothing is read back, so it can be captured.
func (g *GPU) MoEOSSExperts(s *Stream, dt DType, out, x, idx, wts, gateUp, down, work Buffer, sh MoEShape, o MoEOSS) error {
	if err := sh.check(); err != nil {
		return err
	}
	es := dt.Size()
	n, E, H, F := sh.Rows*sh.K, sh.Experts, sh.Hidden, sh.FFN
	switch {
	case out.Bytes < sh.Rows*H*es || x.Bytes < sh.Rows*H*es:
		return fmt.Errorf("cuda: MoE input or output smaller than %d x %d", sh.Rows, H)
	case idx.Bytes < n*4 || wts.Bytes < n*es:
		return fmt.Errorf("cuda: MoE routing smaller than %d x %d", sh.Rows, sh.K)
	case gateUp.Bytes < E*2*F*H*es || down.Bytes < E*H*F*es:
		return fmt.Errorf("cuda: MoE expert weights smaller than %d x [2 x %d, %d] and [%d, %d]", E, F, H, H, F)
	case o.GateUpBias.Ptr != 0 && o.GateUpBias.Bytes < E*2*F*es || o.DownBias.Ptr != 0 && o.DownBias.Bytes < E*H*es:
		return fmt.Errorf("cuda: MoE expert biases smaller than %d x %d and %d x %d", E, 2*F, E, H)
	case work.Bytes < MoEOSSWorkBytes(dt, sh):
		return fmt.Errorf("cuda: MoE workspace of %d bytes, %d needed", work.Bytes, MoEOSSWorkBytes(dt, sh))
	case x.Ptr%16 != 0 || out.Ptr%16 != 0 || gateUp.Ptr%16 != 0 || down.Ptr%16 != 0:
		return fmt.Errorf("cuda: MoE operands must be 16-byte aligned")
	}
	if sh.Rows == 0 {
		return nil
	}
	w := ossMoELayout(dt, sh, work)
	cfg := moeConfigFor(sh, g.Info.SharedPerBlock, g.sw.CUDAMoETile)
	// The plain grouped GEMM (moe_gemm's non-gated kernel): Y[p] = A[p] ·
	// W_e^T over the tiles, unsplit.
	tiles := ceilDiv(n, cfg.bm) + E
	gemm := func(A, W, Y Buffer, N, K int) error {
		f, err := g.function("moe_gemm", "moe_down_"+cfg.name+"_"+dt.suffix())
		if err != nil {
			return err
		}
		if err := f.allowShared(cfg.smem); err != nil {
			return err
		}
		kt := ceilDiv(K, moeBK)
		a := g.argsPack().Ptr(A).Ptr(W).Ptr(Y).Ptr(Buffer{}).Ptr(w.hdr).Ptr(w.tiles).I32(N).I32(K).I32(kt).U64(0).
			I32(g.sw.CUDAMoEHints)
		return s.Launch(f, Dim3{X: tiles, Y: ceilDiv(N, cfg.weightRows)}, Dim3{X: cfg.threads}, cfg.smem, a)
	}
	return g.ossExperts(s, dt, out, x, idx, wts, w, sh, o, cfg.bm, func(A, Y Buffer, isDown bool, N, K int) error {
		if isDown {
			return gemm(A, down, Y, N, K)
		}
		return gemm(A, gateUp, Y, N, K)
	})
}

// ossExperts is the expert pipeline MoEOSSExperts and MoEMXFP4 share,
// around their grouped GEMM mm (Y[p] = A[p] · W_e^T with the gate/up
// weights, or with isDown the down weights): the pairs grouped by expert
// in tiles of bm rows (moe_group) and their token rows gathered, mm for
// gate/up, the activation with the gate/up bias (moe_oss_glu: GPT-OSS's
// clamped SwiGLU with o.Limit > 0, else SwiGLU), mm for down, the down
// bias, and the combine.
func (g *GPU) ossExperts(s *Stream, dt DType, out, x, idx, wts Buffer, w moeWork, sh MoEShape, o MoEOSS, bm int, mm func(A, Y Buffer, isDown bool, N, K int) error) error {
	n, H, F := sh.Rows*sh.K, sh.Hidden, sh.FFN
	if err := g.moeGroup(s, idx, w, sh, bm, false); err != nil {
		return err
	}
	f, err := g.function("moe_group", "moe_gather_"+dt.suffix())
	if err != nil {
		return err
	}
	a := g.argsPack().Ptr(w.xs).Ptr(x).Ptr(w.hdr).Ptr(w.order).I32(n).I32(sh.K).I32(H)
	if err := s.Launch(f, Dim3{X: min(ceilDiv(n*H/8, 256), 16*g.Info.SMs)}, Dim3{X: 256}, 0, a); err != nil {
		return err
	}
	if err := mm(w.xs, w.gu, false, 2*F, H); err != nil {
		return err
	}
	if f, err = g.function("moe_oss", "moe_oss_glu_"+dt.suffix()); err != nil {
		return err
	}
	a = g.argsPack().Ptr(w.act).Ptr(w.gu).Ptr(o.GateUpBias).Ptr(w.hdr).Ptr(w.order).Ptr(idx).I32(F).F32(o.Limit).F32(o.Alpha)
	if err := s.Launch(f, Dim3{X: min(ceilDiv(n*F, 256), 16*g.Info.SMs)}, Dim3{X: 256}, 0, a); err != nil {
		return err
	}
	if err := mm(w.act, w.ys, true, H, F); err != nil {
		return err
	}
	if o.DownBias.Ptr != 0 {
		if f, err = g.function("moe_oss", "moe_oss_row_bias_"+dt.suffix()); err != nil {
			return err
		}
		a = g.argsPack().Ptr(w.ys).Ptr(o.DownBias).Ptr(w.hdr).Ptr(w.order).Ptr(idx).I32(H)
		if err := s.Launch(f, Dim3{X: min(ceilDiv(n*H, 256), 16*g.Info.SMs)}, Dim3{X: 256}, 0, a); err != nil {
			return err
		}
	}
	return g.moeCombine(s, dt, out, wts, w, sh, 1)
}
