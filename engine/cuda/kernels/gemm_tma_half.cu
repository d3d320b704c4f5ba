// The narrow tiles of 64 rows of X on two consumer warpgroups that each
// take half of W's tile every k-tile (gemm_tma.cuh's NS), where p1s and
// p1m's consumers take alternate k-tiles whole. cuBLASLt runs a decode's
// small projections at M = 256 on such tiles with 384 threads (64 x 96,
// 64 x 80 and 64 x 64, Nsight Compute, H200, bench/NOTES.md v62); on
// GPT-OSS-20B's o its blocks' active cycles were 0.72x the own p1m's
// (v64). No epilogue kernels: GemmEpilogue runs the one-consumer tile
// (gemm_tma.go's tmaHalfTwin). The plan takes h1s for wg1s.
#include "gemm_tma.cuh"

// gemm_tma_<config>_<dtype>, gemm_tma_f8_...: 64 rows of X by BN of W,
// two consumers of BN / 2 columns each, ST stages, clusters of CX x CY.
#define GEMM_TMA_H(cfg, T, BN, ST, CX, CY)                                                                            \
	TMA_K16(gemm_tma_##cfg##_##T, T, 384, 1, 2, BN, ST, TMA_EPI_NONE, false, false, 0, false, CX, CY, true)            \
	TMA_KF8(gemm_tma_f8_##cfg##_##T, T, 384, 1, 2, BN, ST, TMA_EPI_NONE, false, false, 0, false, CX, CY, true)
#define GEMM_TMA_H_ALL(T)                                                                                              \
	GEMM_TMA_H(h1s, T, 64, 12, 1, 1) GEMM_TMA_H(h1n, T, 80, 10, 1, 1) GEMM_TMA_H(h1m, T, 96, 10, 1, 1)                 \
	GEMM_TMA_H(h1sc21, T, 64, 12, 2, 1) GEMM_TMA_H(h1nc21, T, 80, 10, 2, 1) GEMM_TMA_H(h1mc21, T, 96, 10, 2, 1)         \
	GEMM_TMA_H(h1mc41, T, 96, 10, 4, 1)
GEMM_TMA_H_ALL(f16)
GEMM_TMA_H_ALL(bf16)
