// The engine's own grouped expert GEMMs (gemm_plugin: disable, and every
// captured decode graph): one launch covers every expert, using the row
// tiles moe_group wrote on the device, so no count ever goes to the host.
//
//   moe_gate_up: act[p, :] = silu(gate_e(x[t])) * up_e(x[t]) for the sorted
//     rows p of expert e (t = order[p] / k): the A rows are gathered from the
//     token rows while loading, and each block computes BW/2 gate columns and
//     the BW/2 matching up columns (gate_up is [E][2F][H], gate rows first),
//     so SwiGLU is applied to the float32 accumulators before the one
//     rounding.
//   moe_down: ys[p, :] = act[p, :] * down_e^T (down is [E][H][F]); split
//     over K (blockIdx.z) into float32 partials part[z][p][:] when the grid
//     would otherwise be too small to fill the GPU; moe_combine_split sums
//     them.
//
// Decode is bound by streaming the expert weights, so the tiling is built
// around reading each weight tile from HBM once per expert: a block owns BW
// weight rows (one N-slice) of one expert and ALL of that expert's rows up
// to BM (16, 64 or 128 by configuration; tiles of one expert beyond BM are
// adjacent blocks, which run together and share the weight tile in L2).
// Every warp covers all of the block's rows and 32 weight rows, so a warp's
// B fragments are loaded once per 16-deep step and reused over all row
// fragments. The number of 16-row fragments an expert actually has is only
// known on the device; the block picks a body compiled for MI = 1, 2, 4, 6
// or 8 fragments (at least the rows it has), so an expert with 20 rows does
// not pay for 128, and nothing is predicated inside the inner loop.
//
// Within a block: fp32 accumulation on the tensor cores with mma.sync
// m16n8k16 (sm_80 and later), an ST-deep cp.async pipeline of 64-deep k
// tiles (128 contiguous bytes per weight row and stage), rows padded by 16
// bytes so ldmatrix reads are free of bank conflicts, only the rows of live
// fragments loaded (the rest of a fragment zero-filled), weight and K edges
// zero-filled on load and masked on store. K % 8 == 0 and N % 8 == 0.
//
// The weight loads carry L2 hints chosen by flags (moe.go: moeFlags; both
// by default): MOE_PF256 asks L2 to fetch the 256 aligned
// bytes around each 128-byte request, so every other k tile of a row is
// already in L2 and HBM sees longer bursts; MOE_EVICT_FIRST marks the
// streamed weights first to go, keeping the activations, which every
// N-slice of a tile rereads, in L2.
#include "common.cuh"
#include "mma.cuh"

#define MOE_PF256 1
#define MOE_EVICT_FIRST 2

__device__ __forceinline__ void moe_pdl_enter() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.wait;" ::: "memory");
	asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ u64 moe_weight_policy(int flags) {
	u64 p;
	if (flags & MOE_EVICT_FIRST) {
		asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
	} else {
		asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(p));
	}
	return p;
}

// moe_cp_w is cp_async16 for weights, with the L2 policy and, with pf, the
// 256-byte L2 prefetch.
__device__ __forceinline__ void moe_cp_w(u32 dst, const void *src, bool ok, u64 pol, bool pf) {
	int n = ok ? 16 : 0;
	if (pf) {
		asm volatile("cp.async.cg.shared.global.L2::cache_hint.L2::256B [%0], [%1], 16, %2, %3;" ::"r"(dst), "l"(src),
			"r"(n), "l"(pol));
	} else {
		asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;" ::"r"(dst), "l"(src), "r"(n),
			"l"(pol));
	}
}

// moe_mi clamps a fragment count to what a BM-row configuration stages.
__host__ __device__ constexpr int moe_mi(int mi, int bm) { return mi < bm / 16 ? mi : bm / 16; }

// moe_tile is one block's work with MI row fragments staged: rows [p0, p1)
// (sorted rows, or for GATED the token rows order[p] / topk; arow gets their
// element offsets into A, -1 past p1), weight rows n0.. of We (GATED: BW/2
// gate and BW/2 up rows), k tiles kt0 .. kt0 + nk - 1. The result goes to
// Y (rounded) or, with P, to P as float32 partials.
template <class T, int MI, int WN, int ST, bool GATED>
__device__ __forceinline__ void moe_tile(const T *__restrict__ A, const T *__restrict__ We, const T *W,
	T *__restrict__ Y, float *__restrict__ P, long long *arow, const int *__restrict__ order, int topk, int p0, int p1,
	int n0, int N, int K, int kt0, int nk, int flags, unsigned char *smem) {
	constexpr int NT = WN * 32, BW = WN * 32, BNH = BW / 2;
	constexpr int BK = 64, LDS = BK + 8, CPR = BK / 8, AR = MI * 16;
	T *As = (T *)smem;          // [ST][AR][LDS]
	T *Bs = As + ST * AR * LDS; // [ST][BW][LDS]
	const int tid = threadIdx.x, lane = tid & 31, wn = tid >> 5;
	const u64 pol = moe_weight_policy(flags);
	const bool pf = (flags & MOE_PF256) != 0;

	// Thread tid copies 16-byte chunks tid, tid + NT, ...: fixed trip
	// counts, so the loops unroll without remainders.
	constexpr int ACH = (AR * CPR + NT - 1) / NT, BCH = BW * CPR / NT;
	auto loadA = [&](int stage, int kt) {
		const int k0 = kt * BK;
#pragma unroll
		for (int i = 0; i < ACH; i++) {
			int c = tid + i * NT;
			if (AR * CPR % NT != 0 && c >= AR * CPR) break;
			int r = c / CPR, kc = (c % CPR) * 8;
			long long off = arow[r];
			bool ok = off >= 0 && k0 + kc < K;
			cp_async16(smem_u32(As + (stage * AR + r) * LDS + kc), ok ? A + off + k0 + kc : A, ok);
		}
	};
	auto loadB = [&](int stage, int kt) {
		const int k0 = kt * BK;
#pragma unroll
		for (int i = 0; i < BCH; i++) {
			int c = tid + i * NT;
			int r = c / CPR, kc = (c % CPR) * 8;
			int half = GATED ? r / BNH : 0, gn = n0 + (GATED ? r % BNH : r);
			bool ok = gn < N && k0 + kc < K;
			const T *src = We + ((long long)half * N + gn) * K + k0 + kc;
			moe_cp_w(smem_u32(Bs + (stage * BW + r) * LDS + kc), ok ? src : W, ok, pol, pf);
		}
	};

	// Fragment f of a warp: GATED, f = 0, 1 gate columns wn*16 + 8f and
	// f = 2, 3 the matching up columns; otherwise columns wn*32 + 8f.
	float acc[MI][4][4];
#pragma unroll
	for (int i = 0; i < MI; i++)
#pragma unroll
		for (int j = 0; j < 4; j++)
#pragma unroll
			for (int q = 0; q < 4; q++) acc[i][j][q] = 0.f;

	// Prologue: the first stages' weights first (they depend on the tile
	// only), then the A row offsets (for gate_up a gather through order,
	// another dependent global read, now overlapping the weights' flight),
	// then the first stages' A rows. All in one group, plus ST - 2 empty
	// ones, so the main loop's group count is as if each stage had its own:
	// its first wait takes every prologue stage at once.
#pragma unroll 1
	for (int s = 0; s < ST - 1; s++)
		if (s < nk) loadB(s, kt0 + s);
	for (int r = tid; r < AR; r += NT) {
		int p = p0 + r;
		long long off = -1;
		if (p < p1) off = GATED ? (long long)(order[p] / topk) * K : (long long)p * K;
		arow[r] = off;
	}
	__syncthreads();
#pragma unroll 1
	for (int s = 0; s < ST - 1; s++)
		if (s < nk) loadA(s, kt0 + s);
#pragma unroll
	for (int s = 0; s < ST - 1; s++) cp_async_commit();
	for (int i = 0; i < nk; i++) {
		cp_async_wait<ST - 2>();
		__syncthreads(); // tile i is in for everyone; stage (i - 1) % ST is free again
		int nx = i + ST - 1;
		if (nx < nk) {
			loadA(nx % ST, kt0 + nx);
			loadB(nx % ST, kt0 + nx);
		}
		cp_async_commit();
		const T *as = As + (i % ST) * AR * LDS, *bs = Bs + (i % ST) * BW * LDS;
#pragma unroll
		for (int kk = 0; kk < BK; kk += 16) {
			// Each x4 load: n rows 0-7 and 8-15 of a 16-row group, k 0-7
			// and 8-15: fragments (2j, 2j + 1).
			u32 b[4][2];
#pragma unroll
			for (int j = 0; j < 2; j++) {
				int rb = GATED ? j * BNH + wn * 16 : wn * 32 + j * 16;
				int r = rb + (lane & 7) + ((lane >> 4) << 3);
				u32 t[4];
				ldmatrix_x4(t, smem_u32(bs + r * LDS + kk + ((lane >> 3) & 1) * 8));
				b[2 * j][0] = t[0];
				b[2 * j][1] = t[1];
				b[2 * j + 1][0] = t[2];
				b[2 * j + 1][1] = t[3];
			}
			u32 a[MI][4];
#pragma unroll
			for (int mi = 0; mi < MI; mi++)
				ldmatrix_x4(a[mi], smem_u32(as + (mi * 16 + (lane & 15)) * LDS + kk + (lane >> 4) * 8));
#pragma unroll
			for (int mi = 0; mi < MI; mi++)
#pragma unroll
				for (int f = 0; f < 4; f++) mma(acc[mi][f], a[mi], b[f], T{});
		}
	}
	cp_async_wait<0>();

	// Epilogue: a 16 x 8 accumulator holds rows lane/4 and lane/4 + 8,
	// columns 2 (lane % 4) and + 1.
#pragma unroll
	for (int mi = 0; mi < MI; mi++)
#pragma unroll
		for (int h = 0; h < 2; h++) {
			int p = p0 + mi * 16 + (lane >> 2) + h * 8;
			if (p >= p1) continue;
#pragma unroll
			for (int f = 0; f < (GATED ? 2 : 4); f++) {
				int c = n0 + (GATED ? wn * 16 : wn * 32) + f * 8 + (lane & 3) * 2;
				if (c >= N) continue;
				float v0 = acc[mi][f][2 * h], v1 = acc[mi][f][2 * h + 1];
				if (GATED) {
					float u0 = acc[mi][f + 2][2 * h], u1 = acc[mi][f + 2][2 * h + 1];
					v0 = v0 / (1.f + __expf(-v0)) * u0;
					v1 = v1 / (1.f + __expf(-v1)) * u1;
				}
				long long o = (long long)p * N + c;
				if (P) {
					*(float2 *)(P + o) = make_float2(v0, v1);
				} else {
					*(u32 *)(Y + o) = (u32)from_f32<T>(v0).x | ((u32)from_f32<T>(v1).x << 16);
				}
			}
		}
}

// moe_gemm: block (x, y, z) = row tile x (moe_group's tiles; blocks past
// hdr[0] exit at once), N-slice y, K split z (kps k tiles each).
template <class T, int BM, int WN, int ST, bool GATED>
__device__ __forceinline__ void moe_gemm(const T *__restrict__ A, const T *__restrict__ W, T *__restrict__ Y,
	float *__restrict__ P, const int *__restrict__ hdr, const int4 *__restrict__ tiles, const int *__restrict__ order,
	int topk, int N, int K, int kps, long long pstride, int flags) {
	moe_pdl_enter();
	constexpr int BW = WN * 32;
	extern __shared__ __align__(16) unsigned char smem[];
	__shared__ long long arow[BM]; // element offset of each A row, -1 outside the tile

	if ((int)blockIdx.x >= hdr[0]) return;
	const int4 tile = tiles[blockIdx.x];
	const int e = tile.x, p0 = tile.y, p1 = tile.z;
	const int n0 = blockIdx.y * (GATED ? BW / 2 : BW);
	const int ktiles = (K + 63) / 64;
	const int kt0 = blockIdx.z * kps;
	const int nk = min(ktiles, kt0 + kps) - kt0; // <= 0: the partials are zeros
	const T *We = W + (long long)e * (GATED ? 2 : 1) * N * K;
	float *Pz = P ? P + (long long)blockIdx.z * pstride : nullptr;

	// The body for the fewest fragments that hold the tile's rows; the
	// constant tests drop the bodies a configuration cannot need.
#define MOE_BODY(mi)                                                                                                   \
	moe_tile<T, moe_mi(mi, BM), WN, ST, GATED>(A, We, W, Y, Pz, arow, order, topk, p0, p1, n0, N, K, kt0, nk, flags,    \
		smem)
	const int m = (p1 - p0 + 15) / 16;
	if (BM <= 16 || m <= 1) {
		MOE_BODY(1);
	} else if (BM <= 32 || m <= 2) {
		MOE_BODY(2);
	} else if (BM <= 64 || m <= 4) {
		MOE_BODY(4);
	} else if (BM <= 96 || m <= 6) {
		MOE_BODY(6);
	} else {
		MOE_BODY(8);
	}
#undef MOE_BODY
}

// Configurations (engine/cuda/moe.go: moeGemmConfig mirrors them): BM rows
// per tile at most, WN warps of 32 weight rows each, ST stages, MINB blocks
// per multiprocessor the registers must allow.
#define MOE_GEMM(cfg, T, BM, WN, ST, MINB)                                                                             \
	extern "C" __global__ void __launch_bounds__(WN * 32, MINB) moe_gate_up_##cfg##_##T(const T *x, const T *W,        \
		T *act, const int *hdr, const int4 *tiles, const int *order, int topk, int F, int H, int flags) {              \
		moe_gemm<T, BM, WN, ST, true>(x, W, act, nullptr, hdr, tiles, order, topk, F, H, (H + 63) / 64, 0, flags);     \
	}                                                                                                                  \
	extern "C" __global__ void __launch_bounds__(WN * 32, MINB) moe_down_##cfg##_##T(const T *act, const T *W, T *ys,  \
		float *part, const int *hdr, const int4 *tiles, int H, int F, int kps, long long pstride, int flags) {         \
		moe_gemm<T, BM, WN, ST, false>(act, W, ys, part, hdr, tiles, nullptr, 1, H, F, kps, pstride, flags);          \
	}
// s: decode of at most 16 tokens (one fragment), two blocks per SM.
MOE_GEMM(s, f16, 16, 4, 4, 2)
MOE_GEMM(s, bf16, 16, 4, 4, 2)
// m: up to 64 rows, 128 weight rows per block, two blocks per SM.
MOE_GEMM(m, f16, 64, 4, 4, 2)
MOE_GEMM(m, bf16, 64, 4, 4, 2)
// l: up to 128 rows, 256 weight rows per block (half the activation
// rereads of m), one block per SM with 216 KB of stages.
MOE_GEMM(l, f16, 128, 8, 4, 1)
MOE_GEMM(l, bf16, 128, 8, 4, 1)
