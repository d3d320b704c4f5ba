// The kernels of gemm_tma.cuh's template that the engine launches.
#include "gemm_tma.cuh"

// Configurations (gemm_tma.go's tmaConfigs; names as XRUN_CUDA_WGMMA_TILE's):
// wg1: one consumer, 64 x 128, four stages (two blocks a multiprocessor);
// wg2: two, 128 x 128, six stages; wg2m: two, 128 x 192, five stages (this
// kernel's only: a width that covers some outputs in one wave where 128 and
// 256 need two, or a split); wg2w: two, 128 x 256, four stages; wg2f:
// two, 128 x 176, five stages (this kernel's only: at a decode's 256 rows,
// the 64 column tiles of a 11,264-row weight are 128 blocks for 132
// multiprocessors, where 128 x 192's 118 leave 14 idle); wg1s, wg1n and
// wg1m: one consumer, 64 x 64, 64 x 80 and 64 x 96, twelve, ten and ten
// stages, one block a multiprocessor (this kernel's only: a decode batch
// of up to 256 rows in one wave of about 128 blocks, K unsplit, as
// cuBLASLt runs TinyLlama's small projections there; 64 x 96 covers its
// gate_up, 11,264 rows, in 118 blocks); wg1w: one consumer, 64 x 176,
// seven stages (a decode's qkv at 256 rows in one wave, K unsplit); wg1d:
// one consumer, 64 x 128, eight stages, one block a multiprocessor (wg1's
// tile with twice its loads in flight, for K split across a cluster);
// wg3: three consumers, 192 x 128, five stages (129-192 rows in one row
// tile, where 128-row tiles compute up to 127 rows past M); w2x64, w2x80
// and w2x96: two consumers, 128 rows of X by 64, 80 or 96 of W, eight,
// eight and seven stages (a decode's projections of 4,096-6,144 outputs
// at 256 rows in one round of about 128 blocks, K unsplit, as cuBLASLt runs
// them over E4M3 codes). The swapped tiles are gemm_tma_swap.cu's.
// gemm_tma_<config>_<dtype>, and gemm_tma_f8_<config>_<dtype> over E4M3
// codes (dtype is Y's).
#define GEMM_TMA(cfg, T, C, BN, ST, MINB)                                                                              \
	TMA_K16(gemm_tma_##cfg##_##T, T, (C + 1) * 128, MINB, C, BN, ST)                                                   \
	TMA_KF8(gemm_tma_f8_##cfg##_##T, T, (C + 1) * 128, MINB, C, BN, ST)
// gemm_tma_glu_<config>_<dtype> and gemm_tma_res_<config>_<dtype>: the
// 16-bit kernels with the SwiGLU or residual-add epilogue (N is the output
// width; under GLU W has 2N rows and its tensor map boxes of BN / 2).
#define GEMM_TMA_EPI(cfg, T, C, BN, ST, MINB)                                                                          \
	TMA_K16(gemm_tma_glu_##cfg##_##T, T, (C + 1) * 128, MINB, C, BN, ST, TMA_EPI_GLU)                                  \
	TMA_K16(gemm_tma_res_##cfg##_##T, T, (C + 1) * 128, MINB, C, BN, ST, TMA_EPI_RES)
#define GEMM_TMA_EPI_ALL(T)                                                                                            \
	GEMM_TMA_EPI(wg1, T, 1, 128, 4, 2) GEMM_TMA_EPI(wg2, T, 2, 128, 6, 1) GEMM_TMA_EPI(wg2m, T, 2, 192, 5, 1)          \
	GEMM_TMA_EPI(wg2w, T, 2, 256, 4, 1) GEMM_TMA_EPI(wg2f, T, 2, 176, 5, 1)                                            \
	GEMM_TMA_EPI(wg1s, T, 1, 64, 12, 1) GEMM_TMA_EPI(wg1n, T, 1, 80, 10, 1) GEMM_TMA_EPI(wg1m, T, 1, 96, 10, 1)   \
	GEMM_TMA_EPI(wg1w, T, 1, 176, 7, 1) GEMM_TMA_EPI(wg1d, T, 1, 128, 8, 1) GEMM_TMA_EPI(wg3, T, 3, 128, 5, 1)       \
	GEMM_TMA_EPI(w2x64, T, 2, 64, 8, 1) GEMM_TMA_EPI(w2x80, T, 2, 80, 8, 1) GEMM_TMA_EPI(w2x96, T, 2, 96, 7, 1)
GEMM_TMA_EPI_ALL(f16)
GEMM_TMA_EPI_ALL(bf16)
#define GEMM_TMA_ALL(T)                                                                                                \
	GEMM_TMA(wg1, T, 1, 128, 4, 2) GEMM_TMA(wg2, T, 2, 128, 6, 1) GEMM_TMA(wg2m, T, 2, 192, 5, 1)                      \
	GEMM_TMA(wg2w, T, 2, 256, 4, 1) GEMM_TMA(wg2f, T, 2, 176, 5, 1)                                                    \
	GEMM_TMA(wg1s, T, 1, 64, 12, 1) GEMM_TMA(wg1n, T, 1, 80, 10, 1) GEMM_TMA(wg1m, T, 1, 96, 10, 1) GEMM_TMA(wg1w, T, 1, 176, 7, 1) \
	GEMM_TMA(wg1d, T, 1, 128, 8, 1) GEMM_TMA(wg3, T, 3, 128, 5, 1) GEMM_TMA(w2x64, T, 2, 64, 8, 1)                    \
	GEMM_TMA(w2x80, T, 2, 80, 8, 1) GEMM_TMA(w2x96, T, 2, 96, 7, 1)
GEMM_TMA_ALL(f16)
GEMM_TMA_ALL(bf16)
// The tiles whose two consumers take alternate k-tiles (gemm_tma.cuh's
// KP): 64 rows of X by BN of W, ST stages (even), every kernel of a
// configuration. p1s: 64 x 64, twelve stages; p1m: 64 x 96, ten.
#define GEMM_TMA_KP(cfg, T, BN, ST)                                                                                    \
	TMA_K16(gemm_tma_##cfg##_##T, T, 384, 1, 2, BN, ST, TMA_EPI_NONE, false, false, 0, true)                           \
	TMA_KF8(gemm_tma_f8_##cfg##_##T, T, 384, 1, 2, BN, ST, TMA_EPI_NONE, false, false, 0, true)                        \
	TMA_K16(gemm_tma_glu_##cfg##_##T, T, 384, 1, 2, BN, ST, TMA_EPI_GLU, false, false, 0, true)                        \
	TMA_K16(gemm_tma_res_##cfg##_##T, T, 384, 1, 2, BN, ST, TMA_EPI_RES, false, false, 0, true)
#define GEMM_TMA_KP_ALL(T) GEMM_TMA_KP(p1s, T, 64, 12) GEMM_TMA_KP(p1m, T, 96, 10)
GEMM_TMA_KP_ALL(f16)
GEMM_TMA_KP_ALL(bf16)
