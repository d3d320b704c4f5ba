// The persistent swapped kernels of gemm_tma.cuh's template (PERSIST with
// XR: each block takes a run of the output's tiles, its outputs staged
// apart from the stages), a family of their own so that a cold kernel cache
// compiles them beside gemm_tma_swap.cu's.
#include "gemm_tma.cuh"

// gemm_tma_<config>_p_<dtype> and gemm_tma_f8_<config>_p_<dtype> (E4M3
// codes): C consumers of 64 rows of W, XR rows of X, ST stages, no
// epilogue. s2x160: 128 rows of W by 160 of X, five stages (six do not fit
// beside the staged tile), for the LM heads of a decode batch of 129-160
// rows, whose 250-1,571 tiles take two or more rounds of blocks. s2x208:
// 128 rows of W by 208 of X, four stages, for the wide outputs of 193-208
// rows, which X then fills in one row tile. s2x72: 128 rows of W by 72
// of X, eight stages, and s2x200: 200 by 128, four stages, each storing
// its last 8-row block alone. s2x224: 224 by 128, four stages beside
// half its 224 x 136 staged outputs, staged in two passes (EPP; three
// stages beside all of them ran the 16-bit LM heads of K = 2,048 at
// 1.10-1.27x cuBLASLt's time, whose kernel there is persistent on four).
#define GEMM_TMA_XP(cfg, T, C, XR, ST, EPP)                                                                            \
	TMA_K16(gemm_tma_##cfg##_p_##T, T, (C + 1) * 128, 1, C, 64 * C, ST, TMA_EPI_NONE, false, true, XR, false, 1, 1, false, EPP) \
	TMA_KF8(gemm_tma_f8_##cfg##_p_##T, T, (C + 1) * 128, 1, C, 64 * C, ST, TMA_EPI_NONE, false, true, XR, false, 1, 1, false, EPP)
GEMM_TMA_XP(s2x160, f16, 2, 160, 5, 1)
GEMM_TMA_XP(s2x160, bf16, 2, 160, 5, 1)
GEMM_TMA_XP(s2x208, f16, 2, 208, 4, 1)
GEMM_TMA_XP(s2x208, bf16, 2, 208, 4, 1)
GEMM_TMA_XP(s2x72, f16, 2, 72, 8, 1)
GEMM_TMA_XP(s2x72, bf16, 2, 72, 8, 1)
GEMM_TMA_XP(s2x200, f16, 2, 200, 4, 1)
GEMM_TMA_XP(s2x200, bf16, 2, 200, 4, 1)
GEMM_TMA_XP(s2x224, f16, 2, 224, 4, 2)
GEMM_TMA_XP(s2x224, bf16, 2, 224, 4, 2)
