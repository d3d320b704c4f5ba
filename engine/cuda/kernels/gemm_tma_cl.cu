// The unswapped narrow tiles (gemm_tma.cu's wg1n and the alternating p1s
// and p1m) in clusters of CX row tiles by CY column tiles, W multicast to
// the CX blocks of a column tile and X to the CY of a row tile
// (gemm_tma.cuh's CX, CY), a family of their own so that the unclustered
// kernels' code stays as it was. cuBLASLt runs a decode's small
// projections at M = 256 on such tiles in clusters (Nsight Compute, H200,
// bench/NOTES.md v62): GPT-OSS-20B's o as 64 x 96 in 4 x 2, Qwen3-30B-A3B's
// o as 64 x 64 in pairs, TinyLlama's qkv as 64 x 80 in pairs, where the
// own unclustered tiles take 1.2-1.35x its time.
#include "gemm_tma.cuh"

// gemm_tma_<config>_<dtype>, gemm_tma_f8_..., gemm_tma_glu_... and
// gemm_tma_res_...: 64 rows of X by BN of W, C consumers (KP: two taking
// alternate k-tiles), ST stages, clusters of CX x CY.
#define GEMM_TMA_CL(cfg, T, C, KP, BN, ST, CX, CY)                                                                     \
	TMA_K16(gemm_tma_##cfg##_##T, T, (C + 1) * 128, 1, C, BN, ST, TMA_EPI_NONE, false, false, 0, KP, CX, CY)            \
	TMA_KF8(gemm_tma_f8_##cfg##_##T, T, (C + 1) * 128, 1, C, BN, ST, TMA_EPI_NONE, false, false, 0, KP, CX, CY)         \
	TMA_K16(gemm_tma_glu_##cfg##_##T, T, (C + 1) * 128, 1, C, BN, ST, TMA_EPI_GLU, false, false, 0, KP, CX, CY)         \
	TMA_K16(gemm_tma_res_##cfg##_##T, T, (C + 1) * 128, 1, C, BN, ST, TMA_EPI_RES, false, false, 0, KP, CX, CY)
#define GEMM_TMA_CL_ALL(T)                                                                                             \
	GEMM_TMA_CL(p1mc21, T, 2, true, 96, 10, 2, 1)                                                                      \
	GEMM_TMA_CL(p1mc41, T, 2, true, 96, 10, 4, 1)                                                                      \
	GEMM_TMA_CL(p1mc42, T, 2, true, 96, 10, 4, 2)                                                                      \
	GEMM_TMA_CL(p1sc21, T, 2, true, 64, 12, 2, 1)                                                                      \
	GEMM_TMA_CL(p1sc41, T, 2, true, 64, 12, 4, 1)                                                                      \
	GEMM_TMA_CL(wg1nc21, T, 1, false, 80, 10, 2, 1)
GEMM_TMA_CL_ALL(f16)
GEMM_TMA_CL_ALL(bf16)
