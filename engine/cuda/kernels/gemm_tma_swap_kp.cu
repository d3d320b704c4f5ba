// The swapped tiles of one 64-row tile of W whose two consumers take
// alternate k-tiles (gemm_tma.cuh's XR with KP), a family of their own so
// that a cold kernel cache compiles them beside gemm_tma_swap.cu's. cuBLASLt
// runs a decode's 64-row tiles of W on two consumer warpgroups (384
// threads: Nsight Compute, H200, M = 136, bench/NOTES.md v61) where s1x48,
// s1x72 and s1x136 have one.
#include "gemm_tma.cuh"

// gemm_tma_<config>_<dtype>, gemm_tma_f8_..., gemm_tma_glu_... and
// gemm_tma_res_...: 64 rows of W by XR of X, ST stages (even, so that each
// stage is always the same consumer's). p1x48: 48 rows of X, 14 stages;
// p1x72: 72, 12; p1x112: 112, 10; p1x136: 136, 8.
#define GEMM_TMA_XKP(cfg, T, XR, ST)                                                                                   \
	TMA_K16(gemm_tma_##cfg##_##T, T, 384, 1, 2, 64, ST, TMA_EPI_NONE, false, false, XR, true)                          \
	TMA_KF8(gemm_tma_f8_##cfg##_##T, T, 384, 1, 2, 64, ST, TMA_EPI_NONE, false, false, XR, true)                       \
	TMA_K16(gemm_tma_glu_##cfg##_##T, T, 384, 1, 2, 64, ST, TMA_EPI_GLU, false, false, XR, true)                       \
	TMA_K16(gemm_tma_res_##cfg##_##T, T, 384, 1, 2, 64, ST, TMA_EPI_RES, false, false, XR, true)
#define GEMM_TMA_XKP_ALL(T) GEMM_TMA_XKP(p1x48, T, 48, 14) GEMM_TMA_XKP(p1x72, T, 72, 12) GEMM_TMA_XKP(p1x112, T, 112, 10) GEMM_TMA_XKP(p1x136, T, 136, 8)
GEMM_TMA_XKP_ALL(f16)
GEMM_TMA_XKP_ALL(bf16)
