// The swapped kernels of gemm_tma.cuh's template that the engine launches
// (gemm_tma.go's tmaConfigs with swap), a family of their own so that a
// cold kernel cache compiles them beside gemm_tma.cu's rather than after.
#include "gemm_tma.cuh"

// The swapped tiles (gemm_tma.cuh's XR and GEMM_TMA_X): C consumers of 64
// rows of W each, XR rows of X, ST stages; every kernel of a
// configuration, the plain, E4M3 and both epilogues'. s1x32, s1x40 and
// s1x48: 64 rows of W by 32, 40 or 48 of X, 16, 16 and 14 stages; s2x32 and s2x48: 128 rows of W,
// 10 and 9 stages; s2x160, s2x176 and s2x192: 128 rows of W by 160, 176
// or 192 of X, 6, 5 and 5 stages; s1x80, s2x80 and s3x80: 64, 128 or 192
// rows of W (one to three consumers) by 80 of X, 12, 8 and 6 stages;
// s2x88 and s3x88: 128 or 192 rows of W by 88 of X, 8 and 6 stages;
// s1x72 and s1x136: 64 rows of W by 72 or 136 of X, 12 and 8 stages;
// s2x104 and s3x104: 128 or 192 rows of W by 104 of X, 7 and 5 stages;
// s2x208: 128 rows of W by 208 of X, 5 stages.
#define GEMM_TMA_X_ALL(T)                                                                                              \
	GEMM_TMA_X(s1x32, T, 1, 32, 16) GEMM_TMA_X(s1x40, T, 1, 40, 16) GEMM_TMA_X(s1x48, T, 1, 48, 14)                    \
	GEMM_TMA_X(s2x32, T, 2, 32, 10) GEMM_TMA_X(s2x48, T, 2, 48, 9) GEMM_TMA_X(s2x160, T, 2, 160, 6)                   \
	GEMM_TMA_X(s2x176, T, 2, 176, 5) GEMM_TMA_X(s2x192, T, 2, 192, 5) GEMM_TMA_X(s1x80, T, 1, 80, 12)                 \
	GEMM_TMA_X(s2x80, T, 2, 80, 8) GEMM_TMA_X(s3x80, T, 3, 80, 6) GEMM_TMA_X(s2x88, T, 2, 88, 8)                      \
	GEMM_TMA_X(s3x88, T, 3, 88, 6) GEMM_TMA_X(s1x72, T, 1, 72, 12) GEMM_TMA_X(s1x136, T, 1, 136, 8)                   \
	GEMM_TMA_X(s2x104, T, 2, 104, 7) GEMM_TMA_X(s3x104, T, 3, 104, 5) GEMM_TMA_X(s2x208, T, 2, 208, 5)
GEMM_TMA_X_ALL(f16)
GEMM_TMA_X_ALL(bf16)
