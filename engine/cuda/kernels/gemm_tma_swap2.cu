// Swapped kernels of gemm_tma.cuh's template added after gemm_tma_swap.cu
// had grown to the longest compile of a cold kernel cache (150 s of NVRTC
// on an H200 machine's CPU): a family of their own, compiled beside it.
#include "gemm_tma.cuh"

// GEMM_TMA_X2 is gemm_tma_swap.cu's GEMM_TMA_X: C consumers of 64 rows of
// W, XR rows of X, ST stages, every kernel of a configuration (plain,
// E4M3, both epilogues). A header both families include would change
// every family's cache key (kernelHeaders), so each keeps its own.
#define GEMM_TMA_X2(cfg, T, C, XR, ST)                                                                                 \
	TMA_K16(gemm_tma_##cfg##_##T, T, (C + 1) * 128, 1, C, 64 * C, ST, TMA_EPI_NONE, false, false, XR)                  \
	TMA_KF8(gemm_tma_f8_##cfg##_##T, T, (C + 1) * 128, 1, C, 64 * C, ST, TMA_EPI_NONE, false, false, XR)               \
	TMA_K16(gemm_tma_glu_##cfg##_##T, T, (C + 1) * 128, 1, C, 64 * C, ST, TMA_EPI_GLU, false, false, XR)               \
	TMA_K16(gemm_tma_res_##cfg##_##T, T, (C + 1) * 128, 1, C, 64 * C, ST, TMA_EPI_RES, false, false, XR)

// s2x72: 128 rows of W by 72 of X, eight stages. cuBLASLt runs
// GPT-OSS-20B's 16-bit qkv at M = 200 on 128 x 72 tiles in clusters of
// four, and E4M3 TinyLlama's gate_up at 208 on them persistent (Nsight
// Compute, H200, NOTES v68).
GEMM_TMA_X2(s2x72, f16, 2, 72, 8)
GEMM_TMA_X2(s2x72, bf16, 2, 72, 8)
