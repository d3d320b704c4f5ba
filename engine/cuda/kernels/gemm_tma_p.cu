// The persistent kernels of gemm_tma.cu's tiles (PERSIST, K unsplit;
// XRUN_CUDA_GEMM_PERSIST), a family of their own so that a cold kernel
// cache compiles them beside gemm_tma.cu's rather than in it: that family
// was the longest compile of a cold cache.
#include "gemm_tma.cuh"

// gemm_tma_<config>_p_<dtype>, gemm_tma_glu_<config>_p_<dtype>,
// gemm_tma_res_<config>_p_<dtype> and gemm_tma_f8_<config>_p_<dtype>
// (E4M3 codes): the 128- and 192-row kernels whose blocks each take a run
// of the output's tiles (PERSIST, K unsplit; XRUN_CUDA_GEMM_PERSIST).
#define GEMM_TMA_P(cfg, T, C, BN, ST)                                                                                  \
	TMA_K16(gemm_tma_##cfg##_p_##T, T, (C + 1) * 128, 1, C, BN, ST, TMA_EPI_NONE, false, true)                         \
	TMA_K16(gemm_tma_glu_##cfg##_p_##T, T, (C + 1) * 128, 1, C, BN, ST, TMA_EPI_GLU, false, true)                      \
	TMA_K16(gemm_tma_res_##cfg##_p_##T, T, (C + 1) * 128, 1, C, BN, ST, TMA_EPI_RES, false, true)                      \
	TMA_KF8(gemm_tma_f8_##cfg##_p_##T, T, (C + 1) * 128, 1, C, BN, ST, TMA_EPI_NONE, false, true)
#define GEMM_TMA_P_ALL(T)                                                                                              \
	GEMM_TMA_P(wg2, T, 2, 128, 6) GEMM_TMA_P(wg2m, T, 2, 192, 5) GEMM_TMA_P(wg2w, T, 2, 256, 4) GEMM_TMA_P(wg3, T, 3, 128, 5)
GEMM_TMA_P_ALL(f16)
GEMM_TMA_P_ALL(bf16)
