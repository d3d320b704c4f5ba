//go:build cgo && linux

package cuda

import "fmt"

// MXFP4Weights is an expert stack [E][N][K] kept as MXFP4 on the device
// (kernels/moe_mxfp4.cu): Codes E·N·K/2 bytes, two E2M1 values a byte
// (the low nibble first), and Scales E·N·K/32 E8M0 bytes.
type MXFP4Weights struct {
	Codes, Scales Buffer
}

// check verifies w holds an [E][N][K] stack.
func (w MXFP4Weights) check(E, N, K int) error {
	switch {
	case K%32 != 0:
		return fmt.Errorf("cuda: MXFP4 rows of %d values: want a multiple of 32", K)
	case w.Codes.Bytes < E*N*K/2 || w.Scales.Bytes < E*N*K/32:
		return fmt.Errorf("cuda: MXFP4 experts of %d bytes of codes and %d of scales, [%d, %d, %d] needs %d and %d",
			w.Codes.Bytes, w.Scales.Bytes, E, N, K, E*N*K/2, E*N*K/32)
	case w.Codes.Ptr%16 != 0:
		return fmt.Errorf("cuda: MXFP4 codes must be 16-byte aligned")
	}
	return nil
}

// The kernels' row tiles and output columns per block (kernels/
// moe_mxfp4.cu: GV_BM, GV_ROWS; GM_BM, GM_BN; TC_BM, TC_BN).
const (
	mxfp4GemvBM, mxfp4GemvRows = 8, 16
	mxfp4GemmBM, mxfp4GemmBN   = 64, 64
	mxfp4TCBM, mxfp4TCBN       = 64, 64
)

// mxfp4KernelForce, when "gemv", "gemm" or "tc", runs every MXFP4 expert
// GEMM on that kernel (tests, benchmarks); "" chooses.
var mxfp4KernelForce = ""

// mxfp4Kernel is the kernel for sh and its row tile and output columns
// per block: moe_mxfp4_gemv while the routed pairs are at most one per
// expert (decode at batch 1 and the like: 138 against 161 us a GPT-OSS-20B
// expert layer on an H200), moe_mxfp4_tc above (632 and 1021 us at batch
// 64 and 256, where the GEMV took 1832 and 7057 and the shared-memory GEMM
// 1025 and 1099). Its tensor cores take a tile's token rows 8 at a time,
// so decoding a weight block once serves up to 64 rows.
func mxfp4Kernel(sh MoEShape) (name string, bm, cols int) {
	switch mxfp4KernelForce {
	case "gemv":
		return "moe_mxfp4_gemv_", mxfp4GemvBM, mxfp4GemvRows
	case "gemm":
		return "moe_mxfp4_gemm_", mxfp4GemmBM, mxfp4GemmBN
	case "tc":
		return "moe_mxfp4_tc_", mxfp4TCBM, mxfp4TCBN
	}
	if sh.Rows*sh.K <= sh.Experts {
		return "moe_mxfp4_gemv_", mxfp4GemvBM, mxfp4GemvRows
	}
	return "moe_mxfp4_tc_", mxfp4TCBM, mxfp4TCBN
}

// mxfp4Layout places MoEMXFP4's buffers (expertsLayout), with room for
// the tiles of the smallest row tile.
func mxfp4Layout(dt DType, sh MoEShape, base Buffer) moeWork {
	w, _ := expertsLayout(dt, sh, base, mxfp4GemvBM)
	return w
}

// MoEMXFP4WorkBytes is the workspace MoEMXFP4 needs for sh.
func MoEMXFP4WorkBytes(dt DType, sh MoEShape) int { return mxfp4Layout(dt, sh, Buffer{}).bytes }

// MoEMXFP4 queues MoE on MXFP4 experts: the pairs grouped by expert
// (moe_group) and their token rows gathered, the gate/up GEMM reading
// MXFP4 weights, the activation (moe_oss_glu: GPT-OSS's clamped SwiGLU
// with o.Limit > 0, else SwiGLU; o's gate/up bias if any), the down GEMM,
// its bias, and the combine. Nothing is read back, so it can be captured.
// The GEMMs are mxfp4Kernel's.
func (g *GPU) MoEMXFP4(s *Stream, dt DType, out, x, idx, wts Buffer, gateUp, down MXFP4Weights, work Buffer, sh MoEShape, o MoEOSS) error {
	n, E, H, F := sh.Rows*sh.K, sh.Experts, sh.Hidden, sh.FFN
	if err := checkExperts(dt, sh, out, x, idx, wts, work, MoEMXFP4WorkBytes(dt, sh), func() error {
		if err := gateUp.check(E, 2*F, H); err != nil {
			return err
		}
		return down.check(E, H, F)
	}); err != nil {
		return err
	}
	if es := dt.Size(); o.GateUpBias.Ptr != 0 && o.GateUpBias.Bytes < E*2*F*es || o.DownBias.Ptr != 0 && o.DownBias.Bytes < E*H*es {
		return fmt.Errorf("cuda: MoE expert biases smaller than %d x %d and %d x %d", E, 2*F, E, H)
	}
	if sh.Rows == 0 {
		return nil
	}
	w := mxfp4Layout(dt, sh, work)
	kernel, bm, cols := mxfp4Kernel(sh)
	// Y[p] = A[p] · W_e^T over the tiles; grid x covers every tile
	// moe_group can write (blocks past hdr[0] exit).
	tiles := ceilDiv(n, bm) + E
	matmul := func(A Buffer, W MXFP4Weights, Y Buffer, N, K int) error {
		f, err := g.function("moe_mxfp4", kernel+dt.suffix())
		if err != nil {
			return err
		}
		a := g.argsPack().Ptr(A).Ptr(W.Codes).Ptr(W.Scales).Ptr(Y).Ptr(w.hdr).Ptr(w.tiles).I32(N).I32(K)
		return s.Launch(f, Dim3{X: tiles, Y: ceilDiv(N, cols)}, Dim3{X: 128}, 0, a)
	}
	return g.ossExperts(s, dt, out, x, idx, wts, w, sh, o, bm, func(A, Y Buffer, isDown bool, N, K int) error {
		if isDown {
			return matmul(A, down, Y, N, K)
		}
		return matmul(A, gateUp, Y, N, K)
	})
}

// checkExperts checks the operands of MoE on quantized experts (MoEMXFP4,
// MoEFP8): the shape, the experts (weights), the input, output and routing
// sizes, a workspace of at least need bytes, 16-byte alignment.
func checkExperts(dt DType, sh MoEShape, out, x, idx, wts, work Buffer, need int, weights func() error) error {
	if err := sh.check(); err != nil {
		return err
	}
	if err := weights(); err != nil {
		return err
	}
	es, n, H := dt.Size(), sh.Rows*sh.K, sh.Hidden
	switch {
	case out.Bytes < sh.Rows*H*es || x.Bytes < sh.Rows*H*es:
		return fmt.Errorf("cuda: MoE input or output smaller than %d x %d", sh.Rows, H)
	case idx.Bytes < n*4 || wts.Bytes < n*es:
		return fmt.Errorf("cuda: MoE routing smaller than %d x %d", sh.Rows, sh.K)
	case work.Bytes < need:
		return fmt.Errorf("cuda: MoE workspace of %d bytes, %d needed", work.Bytes, need)
	case x.Ptr%16 != 0 || out.Ptr%16 != 0:
		return fmt.Errorf("cuda: MoE operands must be 16-byte aligned")
	}
	return nil
}

// MXFP4Random queues the random MXFP4 weight (seed, scale) into w, all of
// its w.Scales.Bytes blocks: model.RandomMXFP4's codes and scales, bit
// for bit (kernels/moe_mxfp4.cu: mxfp4_random).
func (g *GPU) MXFP4Random(s *Stream, w MXFP4Weights, seed uint64, scale float32) error {
	blocks := w.Scales.Bytes
	if w.Codes.Bytes < 16*blocks || w.Codes.Ptr%16 != 0 {
		return fmt.Errorf("cuda: MXFP4 codes of %d bytes for %d blocks (16-byte aligned)", w.Codes.Bytes, blocks)
	}
	if blocks == 0 {
		return nil
	}
	f, err := g.function("moe_mxfp4", "mxfp4_random")
	if err != nil {
		return err
	}
	a := g.argsPack().Ptr(w.Codes).Ptr(w.Scales).U64(uint64(blocks)).U64(seed).F32(scale)
	return s.Launch(f, Dim3{X: min(ceilDiv(blocks, 256), 16*g.Info.SMs)}, Dim3{X: 256}, 0, a)
}
