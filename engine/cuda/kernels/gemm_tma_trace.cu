// The TMA GEMM (gemm_tma.cuh) with each block's timeline recorded: where a
// decode-sized GEMM's time goes besides its MMAs (the wait for the kernel
// before, the first stage's arrival, the split's reduction, the stores).
// BenchmarkGemmPhases launches these; the engine never does, and the
// kernels it launches are compiled without the marks.
//
// gemm_tma_trace[_glu|_res]_<config>_f16: gemm_tma.cu's kernels of the
// same name without _trace, plus trace, u64 [blocks][TMA_T_ROW] (TMA_T_*).
#include "gemm_tma.cuh"

// One traced kernel: the epilogue EPI, the name's infix SUF.
#define GEMM_TMA_TRACE_K(cfg, C, BN, ST, EPI, SUF)                                                                     \
	extern "C" __global__ void __launch_bounds__((C + 1) * 128, 1) gemm_tma_trace##SUF##cfg##_f16(                   \
		const __grid_constant__ tmap tx, const __grid_constant__ tmap tw, f16 *Y, int M, int N, int K, int kps,        \
		int early, u64 *trace) {                                                                                       \
		gemm_tma<f16, f16, C, BN, ST, EPI, true>(tx, tw, Y, nullptr, 0, nullptr, 0, M, N, K, kps, early, trace);      \
	}
#define GEMM_TMA_TRACE(cfg, C, BN, ST)                                                                                 \
	GEMM_TMA_TRACE_K(cfg, C, BN, ST, TMA_EPI_NONE, _) GEMM_TMA_TRACE_K(cfg, C, BN, ST, TMA_EPI_GLU, _glu_)            \
	GEMM_TMA_TRACE_K(cfg, C, BN, ST, TMA_EPI_RES, _res_)
// The 128-row configurations of gemm_tma.cu (tmaConfigs), as there.
GEMM_TMA_TRACE(wg2, 2, 128, 6)
GEMM_TMA_TRACE(wg2m, 2, 192, 5)
GEMM_TMA_TRACE(wg2w, 2, 256, 4)
GEMM_TMA_TRACE(wg2f, 2, 176, 5)
GEMM_TMA_TRACE(wg1s, 1, 64, 12)
GEMM_TMA_TRACE(wg1n, 1, 80, 10)
GEMM_TMA_TRACE(wg1m, 1, 96, 10)
