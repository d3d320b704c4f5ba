// The engine's own grouped expert GEMMs (gemm_plugin: disable, and every
// captured decode graph): one launch covers every expert, using the row
// tiles moe_group wrote on the device, so no count ever goes to the host.
//
//   moe_gate_up: act[p, :] = silu(gate_e(x[t])) * up_e(x[t]) for the sorted
//     rows p of expert e (t = order[p] / k): the A rows are gathered from the
//     token rows while loading, and each block computes BN gate columns and
//     the BN matching up columns (gate_up is [E][2F][H], gate rows first), so
//     SwiGLU is applied to the float32 accumulators before the one rounding.
//   moe_down: ys[p, :] = act[p, :] * down_e^T (down is [E][H][F]).
//
// Blocks: x = a row tile of one expert (tiles of one expert adjacent, so
// blocks that read the same weight tile run together and share it in L2;
// blocks past the tile count exit at once), y = BN output columns. Within a
// block: fp32 accumulation on the tensor cores with mma.sync m16n8k16 (sm_80
// and later), a ST-deep cp.async pipeline of BK-deep tiles, rows padded by
// 16 bytes so ldmatrix reads are free of bank conflicts, edges zero-filled
// on load and masked on store. K % 8 == 0 and N % 8 == 0.
//
// Two tile heights: s (16 rows, 4 warps) for decode, where an expert sees a
// handful of tokens and the kernel is bound by streaming its weights, and
// l (64 rows, 8 warps) once experts average more than 16 rows.
#include "common.cuh"
#include "mma.cuh"

__device__ __forceinline__ void moe_pdl_enter() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.wait;" ::: "memory");
	asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// GATED: the gate_up GEMM (A rows gathered from the tokens, 2 BN weight rows
// per block, SwiGLU epilogue, N = F); otherwise the down GEMM (A = act rows
// as sorted, N = H).
template <class T, int BM, int BN, int BK, int WM, int WN, int ST, bool GATED>
__device__ __forceinline__ void moe_gemm(const T *__restrict__ A, const T *__restrict__ W, T *__restrict__ Y,
	const int *__restrict__ hdr, const int4 *__restrict__ tiles, const int *__restrict__ order, int topk, int N, int K) {
	moe_pdl_enter();
	constexpr int NT = WM * WN * 32;
	constexpr int G = GATED ? 2 : 1;    // accumulator sets: gate and up, or one
	constexpr int BR = G * BN;          // weight rows per stage
	constexpr int LDS = BK + 8, CPR = BK / 8;
	constexpr int WTM = BM / WM, WTN = BN / WN;
	constexpr int MI = WTM / 16, NI = WTN / 8;
	static_assert(MI >= 1 && NI >= 2 && NI % 2 == 0, "warp tile must be 16 x 16j");
	extern __shared__ __align__(16) unsigned char smem[];
	T *As = (T *)smem;              // [ST][BM][LDS]
	T *Bs = As + ST * BM * LDS;     // [ST][BR][LDS]
	__shared__ long long arow[BM];  // element offset of each A row, -1 outside the tile

	if ((int)blockIdx.x >= hdr[0]) return;
	const int4 tile = tiles[blockIdx.x];
	const int e = tile.x, p0 = tile.y, p1 = tile.z;
	const int n0 = blockIdx.y * BN;
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	const int wm = warp / WN, wn = warp % WN;
	const T *We = W + (long long)e * G * N * K; // expert e's [G N][K] weights

	for (int r = tid; r < BM; r += NT) {
		int p = p0 + r;
		long long off = -1;
		if (p < p1) off = GATED ? (long long)(order[p] / topk) * K : (long long)p * K;
		arow[r] = off;
	}
	__syncthreads();

	const int ktiles = (K + BK - 1) / BK;
	auto load = [&](int stage, int kt) {
		const int k0 = kt * BK;
#pragma unroll
		for (int c = tid; c < BM * CPR; c += NT) {
			int r = c / CPR, kc = (c % CPR) * 8;
			long long off = arow[r];
			bool ok = off >= 0 && k0 + kc < K;
			cp_async16(smem_u32(As + (stage * BM + r) * LDS + kc), ok ? A + off + k0 + kc : A, ok);
		}
#pragma unroll
		for (int c = tid; c < BR * CPR; c += NT) {
			int r = c / CPR, kc = (c % CPR) * 8;
			int half = r / BN, gn = n0 + r % BN;
			bool ok = gn < N && k0 + kc < K;
			const T *src = We + ((long long)half * N + gn) * K + k0 + kc;
			cp_async16(smem_u32(Bs + (stage * BR + r) * LDS + kc), ok ? src : W, ok);
		}
	};

	float acc[G][MI][NI][4];
#pragma unroll
	for (int g = 0; g < G; g++)
#pragma unroll
		for (int i = 0; i < MI; i++)
#pragma unroll
			for (int j = 0; j < NI; j++)
#pragma unroll
				for (int q = 0; q < 4; q++) acc[g][i][j][q] = 0.f;

#pragma unroll
	for (int s = 0; s < ST - 1; s++) {
		if (s < ktiles) load(s, s);
		cp_async_commit();
	}
	for (int i = 0; i < ktiles; i++) {
		cp_async_wait<ST - 2>();
		__syncthreads(); // tile i is in for everyone; stage (i - 1) % ST is free again
		int nx = i + ST - 1;
		if (nx < ktiles) load(nx % ST, nx);
		cp_async_commit();
		const int st = i % ST;
#pragma unroll
		for (int kk = 0; kk < BK; kk += 16) {
			u32 a[MI][4];
#pragma unroll
			for (int mi = 0; mi < MI; mi++) {
				int r = wm * WTM + mi * 16 + (lane & 15);
				ldmatrix_x4(a[mi], smem_u32(As + (st * BM + r) * LDS + kk + (lane >> 4) * 8));
			}
#pragma unroll
			for (int g = 0; g < G; g++) {
#pragma unroll
				for (int ni = 0; ni < NI; ni += 2) {
					// Two n8 tiles: matrices (n 0-7, k 0-7), (n 0-7, k 8-15),
					// (n 8-15, k 0-7), (n 8-15, k 8-15).
					int r = g * BN + wn * WTN + ni * 8 + (lane & 7) + ((lane >> 4) << 3);
					u32 t[4];
					ldmatrix_x4(t, smem_u32(Bs + (st * BR + r) * LDS + kk + ((lane >> 3) & 1) * 8));
					u32 b0[2] = {t[0], t[1]}, b1[2] = {t[2], t[3]};
#pragma unroll
					for (int mi = 0; mi < MI; mi++) {
						mma(acc[g][mi][ni], a[mi], b0, T{});
						mma(acc[g][mi][ni + 1], a[mi], b1, T{});
					}
				}
			}
		}
	}
	cp_async_wait<0>();

	// Epilogue: a 16 x 8 accumulator holds rows lane/4 and lane/4 + 8,
	// columns 2 (lane % 4) and + 1.
#pragma unroll
	for (int mi = 0; mi < MI; mi++)
#pragma unroll
		for (int ni = 0; ni < NI; ni++)
#pragma unroll
			for (int h = 0; h < 2; h++) {
				int p = p0 + wm * WTM + mi * 16 + (lane >> 2) + h * 8;
				int c = n0 + wn * WTN + ni * 8 + (lane & 3) * 2;
				if (p >= p1 || c >= N) continue;
				float v0 = acc[0][mi][ni][2 * h], v1 = acc[0][mi][ni][2 * h + 1];
				if (GATED) {
					float u0 = acc[G - 1][mi][ni][2 * h], u1 = acc[G - 1][mi][ni][2 * h + 1];
					v0 = v0 / (1.f + __expf(-v0)) * u0;
					v1 = v1 / (1.f + __expf(-v1)) * u1;
				}
				*(u32 *)(Y + (long long)p * N + c) = (u32)from_f32<T>(v0).x | ((u32)from_f32<T>(v1).x << 16);
			}
}

#define MOE_GEMM(cfg, T, BM, BN, BK, WM, WN, ST)                                                                       \
	extern "C" __global__ void __launch_bounds__(WM * WN * 32) moe_gate_up_##cfg##_##T(const T *x, const T *W, T *act,  \
		const int *hdr, const int4 *tiles, const int *order, int topk, int F, int H) {                                 \
		moe_gemm<T, BM, BN / 2, BK, WM, WN, ST, true>(x, W, act, hdr, tiles, order, topk, F, H);                       \
	}                                                                                                                  \
	extern "C" __global__ void __launch_bounds__(WM * WN * 32) moe_down_##cfg##_##T(const T *act, const T *W, T *ys,    \
		const int *hdr, const int4 *tiles, int H, int F) {                                                             \
		moe_gemm<T, BM, BN, BK, WM, WN, ST, false>(act, W, ys, hdr, tiles, nullptr, 1, H, F);                          \
	}
// Both kernels of a configuration stream BN weight rows per stage: the
// gated one as BN/2 gate and BN/2 up rows.
MOE_GEMM(s, f16, 16, 128, 64, 1, 4, 4)
MOE_GEMM(s, bf16, 16, 128, 64, 1, 4, 4)
MOE_GEMM(l, f16, 64, 128, 64, 2, 4, 3)
MOE_GEMM(l, bf16, 64, 128, 64, 2, 4, 3)
