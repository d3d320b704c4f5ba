// Skinny GEMM for decode (gemm_plugin: disable, M <= 8):
// Y[M,N] = X[M,K] W[N,K]^T as a matrix-vector product on the CUDA cores, as
// TensorRT-LLM's cudaCoreGemm does for small M. At M = 1..8 the product is a
// pure stream of W (2 N K bytes, read once) with almost no arithmetic per
// byte, so what matters is having enough 16-byte loads of W in flight to
// cover the memory latency on every multiprocessor, not the tensor cores.
//
// Each warp owns R consecutive rows of W and walks K in 16-byte chunks, lane
// l taking chunks l, l + 32, ...: a warp reads 512 contiguous bytes of each
// of its rows per step, fully coalesced, and each lane issues the loads of
// 8 / R steps (and the matching chunks of X) before it multiplies anything,
// so 8 loads per lane are outstanding at once. W is loaded with L1::no_allocate (it
// is used once) so the rows of X, which every warp re-reads, stay in L1.
// Products accumulate in fp32, one warp reduction per output at the end. R
// grows with N (the host keeps the warps within one wave) and with M (each
// chunk of X read from L1 then serves R rows of W).
//
// SWIGLU: X is not stored; each chunk is silu(gate) * up of a fused gate_up
// row [2K] (gate first), rounded to the storage type as the separate swiglu
// kernel would write it: the down projection reads the MLP's activation
// straight from gate_up, one kernel instead of two.
#include "common.cuh"

// ld_stream is a 16-byte read of data used once: no L1 allocation, and a
// 256-byte L2 prefetch since the warp goes on to read the rest of the run.
__device__ __forceinline__ pack8 ld_stream(const pack8 *p) {
	pack8 r;
	asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
		: "=r"(r.w[0]), "=r"(r.w[1]), "=r"(r.w[2]), "=r"(r.w[3])
		: "l"(p));
	return r;
}

template <class T, int MT, int R, bool SWIGLU>
__device__ __forceinline__ void gemv(const T *__restrict__ X, const T *__restrict__ W, T *__restrict__ Y,
	int M, int N, int K) {
	// U steps of K per round: each lane issues U x R 16-byte loads of W (and
	// its chunks of X) before it multiplies anything, 4 KB in flight per warp.
	constexpr int U = 8 / R;
	pdl_enter();
	const int lane = threadIdx.x & 31;
	const int n0 = (blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5)) * R;
	if (n0 >= N) return;
	const int K8 = K >> 3;
	const long long ldx = SWIGLU ? 2LL * K : (long long)K;
	const pack8 *wr[R];
#pragma unroll
	for (int r = 0; r < R; r++) wr[r] = (const pack8 *)(W + (long long)min(n0 + r, N - 1) * K);
	float acc[R][MT];
#pragma unroll
	for (int r = 0; r < R; r++)
#pragma unroll
		for (int m = 0; m < MT; m++) acc[r][m] = 0.f;

	for (int c0 = lane; c0 < K8; c0 += 32 * U) {
		pack8 w[U][R], xs[U][MT], us[U][SWIGLU ? MT : 1];
#pragma unroll
		for (int u = 0; u < U; u++) {
			const int c = c0 + 32 * u;
			if (c < K8) {
#pragma unroll
				for (int r = 0; r < R; r++) w[u][r] = ld_stream(wr[r] + c);
#pragma unroll
				for (int m = 0; m < MT; m++) {
					if (m < M) {
						const T *xr = X + m * ldx + (long long)c * 8;
						xs[u][m] = *(const pack8 *)xr;
						if (SWIGLU) us[u][SWIGLU ? m : 0] = *(const pack8 *)(xr + K);
					}
				}
			}
		}
#pragma unroll
		for (int u = 0; u < U; u++) {
			if (c0 + 32 * u >= K8) continue;
#pragma unroll
			for (int m = 0; m < MT; m++) {
				if (m >= M) continue;
				float x[8];
#pragma unroll
				for (int e = 0; e < 8; e++) {
					float g = pack_get<T>(xs[u][m], e);
					// silu with the fast reciprocal (exact division cost more
					// than the loads here); the product is rounded as the
					// swiglu kernel stores it.
					x[e] = SWIGLU ? to_f32(from_f32<T>(g * __frcp_rn(1.f + __expf(-g)) * pack_get<T>(us[u][SWIGLU ? m : 0], e))) : g;
				}
#pragma unroll
				for (int r = 0; r < R; r++)
#pragma unroll
					for (int e = 0; e < 4; e++) {
						float2 wf = unpack2(w[u][r].w[e], T{});
						acc[r][m] = fmaf(x[2 * e], wf.x, acc[r][m]);
						acc[r][m] = fmaf(x[2 * e + 1], wf.y, acc[r][m]);
					}
			}
		}
	}
	// Every lane ends with every sum; lane r * MT + m writes output (m, n0 + r).
#pragma unroll
	for (int r = 0; r < R; r++)
#pragma unroll
		for (int m = 0; m < MT; m++) {
			float v = warp_sum(acc[r][m]);
			if (lane == r * MT + m && m < M && n0 + r < N) Y[(long long)m * N + n0 + r] = from_f32<T>(v);
		}
}

// Names: gemv_<dtype>_m<MT>_r<R> and gemv_swiglu_<dtype>_m<MT>_r<R>; MT is
// M rounded up to a power of two (M <= MT rows are computed).
#define GEMV1(T, MT, R)                                                                                      \
	extern "C" __global__ void __launch_bounds__(128) gemv_##T##_m##MT##_r##R(const T *X, const T *W, T *Y,   \
		int M, int N, int K) {                                                                               \
		gemv<T, MT, R, false>(X, W, Y, M, N, K);                                                             \
	}
#define GEMVS(T, MT, R)                                                                                      \
	extern "C" __global__ void __launch_bounds__(128) gemv_swiglu_##T##_m##MT##_r##R(const T *X, const T *W, \
		T *Y, int M, int N, int K) {                                                                         \
		gemv<T, MT, R, true>(X, W, Y, M, N, K);                                                              \
	}
#define GEMV_T(T)                                                                                            \
	GEMV1(T, 1, 1) GEMV1(T, 1, 2) GEMV1(T, 1, 4) GEMV1(T, 2, 1) GEMV1(T, 2, 2) GEMV1(T, 2, 4)                \
	GEMV1(T, 4, 2) GEMV1(T, 4, 4) GEMV1(T, 8, 4)                                                             \
	GEMVS(T, 1, 2) GEMVS(T, 1, 4) GEMVS(T, 2, 2) GEMVS(T, 2, 4)
GEMV_T(f16)
GEMV_T(bf16)
