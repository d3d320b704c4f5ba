// The engine's own GEMM (gemm_plugin: disable): Y[M,N] = X[M,K] * W[N,K]^T,
// row-major, fp16 or bf16 in and out, fp32 accumulation on the tensor cores
// with mma.sync m16n8k16. X and W are both K-contiguous, which is exactly the
// "row.col" operand order mma wants, so both tiles load with plain ldmatrix.
//
// Tiles of BM x BN, BK deep, STAGES-deep cp.async pipeline in dynamic shared
// memory; each row of a tile is padded by 16 bytes so the eight rows an
// ldmatrix phase reads fall in distinct banks. The decode configurations
// take BK = 64: each weight row then arrives as 128 contiguous bytes per
// stage rather than 64, which is what bandwidth at M = 1..64 depends on. Edges in M and N are
// zero-filled on load and masked on store; K must be a multiple of 8 (one
// 16-byte chunk is all in or all out), which every zoo shape is.
//
// Split-K: blockIdx.z takes kps k-tiles (of BK); with more than one split each block
// writes fp32 partials P[split][M][N] and gemm_reduce sums them. This keeps
// the GPU busy at decode shapes (M = 1..64), where N/BN tiles alone are far
// fewer than the multiprocessors.
#include "common.cuh"
#include "mma.cuh"

template <class T, int BM, int BN, int BK, int WM, int WN, int STAGES>
__device__ __forceinline__ void gemm_tn(const T *__restrict__ X, const T *__restrict__ W, T *__restrict__ Y,
	float *__restrict__ P, int M, int N, int K, int kps) {
	pdl_enter();
	constexpr int NT = WM * WN * 32;
	constexpr int LDS = BK + 8, CPR = BK / 8; // padded row; 16-byte chunks per row
	constexpr int WTM = BM / WM, WTN = BN / WN;
	constexpr int MI = WTM / 16, NI = WTN / 8;
	static_assert(MI >= 1 && NI >= 2 && NI % 2 == 0, "warp tile must be 16 x 16k");
	extern __shared__ unsigned char smem[];
	T *As = (T *)smem;                  // [STAGES][BM][LDS]
	T *Bs = As + STAGES * BM * LDS;     // [STAGES][BN][LDS]

	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	const int wm = warp / WN, wn = warp % WN;
	const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
	const int ktiles = (K + BK - 1) / BK;
	const int kt0 = blockIdx.z * kps;
	const int nk = min(ktiles, kt0 + kps) - kt0; // may be <= 0: then the partials are zeros

	auto load = [&](int stage, int kt) {
		const int k0 = kt * BK;
#pragma unroll
		for (int c = tid; c < BM * CPR; c += NT) {
			int r = c / CPR, kc = (c % CPR) * 8;
			int gm = m0 + r, gk = k0 + kc;
			bool ok = gm < M && gk < K;
			cp_async16(smem_u32(As + (stage * BM + r) * LDS + kc), ok ? X + (long long)gm * K + gk : X, ok);
		}
#pragma unroll
		for (int c = tid; c < BN * CPR; c += NT) {
			int r = c / CPR, kc = (c % CPR) * 8;
			int gn = n0 + r, gk = k0 + kc;
			bool ok = gn < N && gk < K;
			cp_async16(smem_u32(Bs + (stage * BN + r) * LDS + kc), ok ? W + (long long)gn * K + gk : W, ok);
		}
	};

	float acc[MI][NI][4];
#pragma unroll
	for (int i = 0; i < MI; i++)
#pragma unroll
		for (int j = 0; j < NI; j++)
#pragma unroll
			for (int e = 0; e < 4; e++) acc[i][j][e] = 0.f;

#pragma unroll
	for (int s = 0; s < STAGES - 1; s++) {
		if (s < nk) load(s, kt0 + s);
		cp_async_commit();
	}
	for (int i = 0; i < nk; i++) {
		cp_async_wait<STAGES - 2>();
		__syncthreads(); // tile i landed for everyone; stage (i-1) % STAGES is free
		int nx = i + STAGES - 1;
		if (nx < nk) load(nx % STAGES, kt0 + nx);
		cp_async_commit();
		const int st = i % STAGES;
#pragma unroll
		for (int kk = 0; kk < BK; kk += 16) {
			u32 a[MI][4], b[NI][2];
#pragma unroll
			for (int mi = 0; mi < MI; mi++) {
				int r = wm * WTM + mi * 16 + (lane & 15);
				ldmatrix_x4(a[mi], smem_u32(As + (st * BM + r) * LDS + kk + (lane >> 4) * 8));
			}
#pragma unroll
			for (int ni = 0; ni < NI; ni += 2) {
				int r = wn * WTN + ni * 8 + (lane & 7) + ((lane >> 4) << 3);
				u32 t[4];
				ldmatrix_x4(t, smem_u32(Bs + (st * BN + r) * LDS + kk + ((lane >> 3) & 1) * 8));
				b[ni][0] = t[0];
				b[ni][1] = t[1];
				b[ni + 1][0] = t[2];
				b[ni + 1][1] = t[3];
			}
#pragma unroll
			for (int mi = 0; mi < MI; mi++)
#pragma unroll
				for (int ni = 0; ni < NI; ni++) mma(acc[mi][ni], a[mi], b[ni], T{});
		}
	}
	cp_async_wait<0>();

	// Epilogue: the accumulator fragment holds rows lane/4 and lane/4 + 8,
	// columns 2*(lane%4) and +1 of each 16 x 8 tile.
	const bool pairs = (N & 1) == 0;
#pragma unroll
	for (int mi = 0; mi < MI; mi++)
#pragma unroll
		for (int ni = 0; ni < NI; ni++)
#pragma unroll
			for (int h = 0; h < 2; h++) {
				int r = m0 + wm * WTM + mi * 16 + (lane >> 2) + h * 8;
				int c = n0 + wn * WTN + ni * 8 + (lane & 3) * 2;
				if (r >= M || c >= N) continue;
				gemm_store2(Y, P, M, N, r, c, acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1], pairs);
			}
}

// Y = sum over splits of P, rounded once.
template <class T>
__device__ __forceinline__ void gemm_reduce(T *Y, const float *P, long long MN, int splits) {
	pdl_enter();
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < MN; i += (long long)gridDim.x * blockDim.x) {
		float s = 0.f;
		for (int k = 0; k < splits; k++) s += P[k * MN + i];
		Y[i] = from_f32<T>(s);
	}
}

// Configurations, chosen on the host by M (gemm.go): s for decode (M <= 16),
// m for medium M, l for large M x N. Names: gemm_<config>_<dtype>.
#define GEMM(cfg, T, BM, BN, BK, WM, WN, ST)                                                     \
	extern "C" __global__ void __launch_bounds__(WM * WN * 32) gemm_##cfg##_##T(                 \
		const T *X, const T *W, T *Y, float *P, int M, int N, int K, int kps) {                  \
		gemm_tn<T, BM, BN, BK, WM, WN, ST>(X, W, Y, P, M, N, K, kps);                            \
	}
GEMM(s, f16, 16, 64, 64, 1, 4, 4)
GEMM(s, bf16, 16, 64, 64, 1, 4, 4)
GEMM(m, f16, 64, 64, 64, 2, 2, 3)
GEMM(m, bf16, 64, 64, 64, 2, 2, 3)
GEMM(l, f16, 128, 128, 32, 2, 4, 3)
GEMM(l, bf16, 128, 128, 32, 2, 4, 3)

extern "C" __global__ void gemm_reduce_f16(f16 *Y, const float *P, long long MN, int splits) {
	gemm_reduce<f16>(Y, P, MN, splits);
}
extern "C" __global__ void gemm_reduce_bf16(bf16 *Y, const float *P, long long MN, int splits) {
	gemm_reduce<bf16>(Y, P, MN, splits);
}
