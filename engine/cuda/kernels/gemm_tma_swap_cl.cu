// The swapped tiles of one 64-row tile of W on alternating consumers
// (gemm_tma_swap_kp.cu's) in clusters of CX row tiles by CY column tiles,
// W multicast to the CX blocks of a column tile and X to the CY of a row
// tile (gemm_tma.cuh's CX, CY), a family of their own so that the
// unclustered kernels' code stays as it was. cuBLASLt runs GPT-OSS-20B's o
// and Llama-3.2-1B's qkv at M = 136 on 64 x 72 tiles in clusters of 4 x 2
// (Nsight Compute, H200, bench/NOTES.md v62), where the own p1x72 takes
// 1.2-1.3x its time with the same stages, threads and registers.
#include "gemm_tma.cuh"

// gemm_tma_<config>_<dtype>, gemm_tma_f8_..., gemm_tma_glu_... and
// gemm_tma_res_...: 64 rows of W by XR of X, ST stages, clusters of CX x CY.
#define GEMM_TMA_XCL(cfg, T, XR, ST, CX, CY)                                                                           \
	TMA_K16(gemm_tma_##cfg##_##T, T, 384, 1, 2, 64, ST, TMA_EPI_NONE, false, false, XR, true, CX, CY)                  \
	TMA_KF8(gemm_tma_f8_##cfg##_##T, T, 384, 1, 2, 64, ST, TMA_EPI_NONE, false, false, XR, true, CX, CY)               \
	TMA_K16(gemm_tma_glu_##cfg##_##T, T, 384, 1, 2, 64, ST, TMA_EPI_GLU, false, false, XR, true, CX, CY)               \
	TMA_K16(gemm_tma_res_##cfg##_##T, T, 384, 1, 2, 64, ST, TMA_EPI_RES, false, false, XR, true, CX, CY)
#define GEMM_TMA_XCL_ALL(T)                                                                                            \
	GEMM_TMA_XCL(p1x72c13, T, 72, 12, 1, 3)                                                                            \
	GEMM_TMA_XCL(p1x72c21, T, 72, 12, 2, 1)                                                                            \
	GEMM_TMA_XCL(p1x72c23, T, 72, 12, 2, 3)                                                                            \
	GEMM_TMA_XCL(p1x48c12, T, 48, 14, 1, 2) GEMM_TMA_XCL(p1x48c13, T, 48, 14, 1, 3)                                    \
	GEMM_TMA_XCL(p1x112c21, T, 112, 10, 2, 1) GEMM_TMA_XCL(p1x112c22, T, 112, 10, 2, 2)
GEMM_TMA_XCL_ALL(f16)
GEMM_TMA_XCL_ALL(bf16)
