//go:build cgo && linux

package cuda

import (
	"cmp"
	"fmt"
)

// gemmConfig mirrors one GEMM(...) instantiation in kernels/gemm.cu, or
// one GEMM_WG(...) in kernels/gemm_wgmma.cu (wgmma).
type gemmConfig struct {
	name                string
	bm, bn, bk, threads int
	stages              int
	wgmma               bool
	fp8                 bool // E4M3 codes in (GemmFP8), a byte an element
}

// smem is the dynamic shared memory of the configuration: STAGES tiles of
// (BM + BN) rows of BK + 8 padded elements; for wgmma, of BK elements
// (swizzled, not padded) and 1024 bytes to align the first on.
func (c gemmConfig) smem(es int) int {
	if c.wgmma {
		return c.stages*(c.bm+c.bn)*c.bk*es + 1024
	}
	return c.stages * (c.bm + c.bn) * (c.bk + 8) * es
}

// family is the kernel file of the configuration.
func (c gemmConfig) family() string {
	if c.wgmma {
		return "gemm_wgmma"
	}
	return "gemm"
}

var (
	gemmSmall  = gemmConfig{"s", 16, 64, 64, 128, 4, false, false}
	gemmMedium = gemmConfig{"m", 64, 64, 64, 128, 3, false, false}
	gemmLarge  = gemmConfig{"l", 128, 128, 32, 256, 3, false, false}
	// Hopper's warpgroup MMA (XRUN_CUDA_WGMMA): one warpgroup of 64 rows
	// up to M = 64, two of 128 rows above. BenchmarkGemm on an H200,
	// TinyLlama's projections, fp16: 1.07-1.96x the mma.sync tiles at
	// M = 64 and 256 (gate_up M=256: 43.1 us against 84.2; cuBLASLt 20.1).
	gemmWG1 = gemmConfig{"wg1", 64, 128, 64, 128, 4, true, false}
	gemmWG2 = gemmConfig{"wg2", 128, 128, 64, 256, 4, true, false}
	// 128 x 256 tiles: not chosen by M yet (XRUN_CUDA_WGMMA_TILE=wg2w).
	gemmWG2W = gemmConfig{"wg2w", 128, 256, 64, 256, 4, true, false}
	// The same over E4M3 codes (GemmFP8): 128 codes a row of a tile.
	gemmF8WG1  = gemmConfig{"f8_wg1", 64, 128, 128, 128, 4, true, true}
	gemmF8WG2  = gemmConfig{"f8_wg2", 128, 128, 128, 256, 4, true, true}
	gemmF8WG2W = gemmConfig{"f8_wg2w", 128, 256, 128, 256, 4, true, true}
)

// gemmWGTiles are the wgmma configurations by XRUN_CUDA_WGMMA_TILE's
// names: 16-bit and E4M3.
var gemmWGTiles = map[string][2]gemmConfig{
	"wg1": {gemmWG1, gemmF8WG1}, "wg2": {gemmWG2, gemmF8WG2}, "wg2w": {gemmWG2W, gemmF8WG2W},
}

// GemmWorkspaceBytes holds the fp32 split-K partials of the own GEMM.
const GemmWorkspaceBytes = 16 << 20

// gemmPlan is the launch the own GEMM makes for one shape.
type gemmPlan struct {
	cfg         gemmConfig
	splits, kps int
}

// gemmWaves is how many blocks per multiprocessor split-K aims for unless
// XRUN_CUDA_GEMM_WAVES or planGemmWG's choice by M says otherwise.
const gemmWaves = 2

// planGemm picks a tile configuration by M, then splits K until the grid
// has about waves (0: gemmWaves) blocks per multiprocessor, keeping at
// least 8 k-tiles (256 or 512 of K) per split and the partials within the
// workspace.
func planGemm(m, n, k, sms, wsBytes, waves int) gemmPlan {
	cfg := gemmMedium
	switch {
	case m <= 16:
		cfg = gemmSmall
	case m > 128 && ceilDiv(m, 128)*ceilDiv(n, 128) >= sms:
		cfg = gemmLarge
	}
	return splitGemm(cfg, m, n, k, sms, wsBytes, cmp.Or(waves, gemmWaves))
}

// planGemmWG is planGemm on the wgmma configurations (M above the GEMV's),
// over E4M3 codes with fp8: the tile XRUN_CUDA_WGMMA_TILE names, else by M,
// and waves blocks per multiprocessor (0: by M too).
func planGemmWG(m, n, k, sms, wsBytes int, fp8 bool, tile string, waves int) gemmPlan {
	i := 0
	if fp8 {
		i = 1
	}
	cfgs, ok := gemmWGTiles[tile]
	byM := gemmWaves
	if !ok {
		// By BenchmarkGemm on an H200 (TinyLlama's shapes, fp16): at M =
		// 64 one wave of split-K blocks is as fast or faster (LM head 38.0
		// against 51.4 us, gate_up 20.3 against 23.2); at M = 256 the 128 x
		// 256 tile is 7-13 % faster on all four shapes. E4M3 keeps 128 x
		// 128 there (wg2w was slower on three of four Llama-3.1-8B shapes).
		switch {
		case m <= 64:
			cfgs = gemmWGTiles["wg1"]
			if !fp8 {
				byM = 1
			}
		case m > 128 && !fp8:
			cfgs = gemmWGTiles["wg2w"]
		default:
			cfgs = gemmWGTiles["wg2"]
		}
	}
	return splitGemm(cfgs[i], m, n, k, sms, wsBytes, cmp.Or(waves, byM))
}

// splitGemm is the split-K of cfg's launch for one shape, aiming at waves
// blocks per multiprocessor.
func splitGemm(cfg gemmConfig, m, n, k, sms, wsBytes, waves int) gemmPlan {
	tiles := ceilDiv(m, cfg.bm) * ceilDiv(n, cfg.bn)
	ktiles := ceilDiv(k, cfg.bk)
	splits := 1
	for tiles*splits < waves*sms && ktiles/(splits*2) >= 8 && splits*2*m*n*4 <= wsBytes {
		splits *= 2
	}
	kps := ceilDiv(ktiles, splits)
	return gemmPlan{cfg: cfg, splits: ceilDiv(ktiles, kps), kps: kps}
}

// Gemm queues Y[m,n] = X[m,k] W[n,k]^T on s with the engine's own kernels
// (gemm_plugin: disable): matrix-vector kernels up to M = GemvRowsFor of
// the GPU's switches, the tensor-core tiles above: on Hopper warpgroup
// MMAs (gemm_wgmma.cu; XRUN_CUDA_WGMMA=0 turns them off), elsewhere
// mma.sync (gemm.cu). K must be a multiple of 8 and X and W 16-byte
// aligned, which whole allocations and row offsets of multiple-of-8 widths
// are.
func (g *GPU) Gemm(s *Stream, dt DType, y, x, w Buffer, m, n, k int) error {
	if err := checkGemm(dt, y, x, w, m, n, k); err != nil {
		return err
	}
	if k%8 != 0 || x.Ptr%16 != 0 || w.Ptr%16 != 0 || y.Ptr%4 != 0 {
		return fmt.Errorf("cuda: own GEMM needs K %% 8 == 0 and 16-byte aligned X, W (got K=%d, X at %#x, W at %#x, Y at %#x)",
			k, x.Ptr, w.Ptr, y.Ptr)
	}
	if m <= g.gemvRows {
		return g.gemv(s, dt, y, x, w, m, n, k, GemvFusion{})
	}
	if p, ok := g.tmaPlanFor(m, n, k, false); ok {
		return g.launchGemmTMA(s, dt, y, x, w, p, dt.Size(), m, n, k, nil)
	}
	if err := g.gemmWorkspace(s); err != nil {
		return err
	}
	var p gemmPlan
	if g.wgmma() {
		p = planGemmWG(m, n, k, g.Info.SMs, g.gemmWS.Bytes, false, g.sw.CUDAWgmmaTile, g.sw.CUDAGemmWaves)
	} else {
		p = planGemm(m, n, k, g.Info.SMs, g.gemmWS.Bytes, g.sw.CUDAGemmWaves)
	}
	return g.launchGemm(s, dt, y, p, m, n, k, func(a *Args, part Buffer) *Args {
		return a.Ptr(x).Ptr(w).Ptr(y).Ptr(part).I32(m).I32(n).I32(k).I32(p.kps)
	})
}

// wgmma reports whether the own GEMMs run on the warpgroup MMA: Hopper,
// XRUN_CUDA_WGMMA; wgmmaFP8 the own FP8 GEMM, XRUN_CUDA_WGMMA_FP8 too.
func (g *GPU) wgmma() bool    { return g.sw.CUDAWgmma && g.Info.Major == 9 }
func (g *GPU) wgmmaFP8() bool { return g.wgmma() && g.sw.CUDAWgmmaFP8 }

// gemmWorkspace allocates the split-K partials' workspace where it is not
// yet (never inside a capture).
func (g *GPU) gemmWorkspace(s *Stream) error {
	if g.gemmWS.Bytes > 0 {
		return nil
	}
	if s.capturing {
		return fmt.Errorf("cuda: the GEMM workspace must be allocated before a capture (call Gemm or LoadKernels first)")
	}
	ws, err := g.Alloc(GemmWorkspaceBytes)
	if err != nil {
		return err
	}
	g.gemmWS = ws
	return nil
}

// launchGemm launches plan p's tile kernel (its arguments from args, given
// the partials' buffer, empty unsplit) and, split, gemm_reduce into y.
func (g *GPU) launchGemm(s *Stream, dt DType, y Buffer, p gemmPlan, m, n, k int, args func(a *Args, part Buffer) *Args) error {
	es := dt.Size()
	if p.cfg.fp8 {
		es = 1
	}
	f, err := g.function(p.cfg.family(), "gemm_"+p.cfg.name+"_"+dt.suffix())
	if err != nil {
		return err
	}
	smem := p.cfg.smem(es)
	if err := f.allowShared(smem); err != nil {
		return err
	}
	part := Buffer{}
	if p.splits > 1 {
		part = g.gemmWS
	}
	grid := Dim3{X: ceilDiv(n, p.cfg.bn), Y: ceilDiv(m, p.cfg.bm), Z: p.splits}
	if err := s.Launch(f, grid, Dim3{X: p.cfg.threads}, smem, args(g.argsPack(), part)); err != nil {
		return err
	}
	if p.splits == 1 {
		return nil
	}
	r, err := g.function("gemm", "gemm_reduce_"+dt.suffix())
	if err != nil {
		return err
	}
	mn := m * n
	a := g.argsPack().Ptr(y).Ptr(part).U64(uint64(mn)).I32(p.splits)
	return s.Launch(r, Dim3{X: min(ceilDiv(mn, 256), 8*g.Info.SMs)}, Dim3{X: 256}, 0, a)
}
