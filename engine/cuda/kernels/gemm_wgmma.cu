// The engine's own GEMM on Hopper's warpgroup MMA (gemm_plugin: disable,
// sm_90a): Y[M,N] = X[M,K] * W[N,K]^T as gemm.cu's, fp16 or bf16 in and
// out, fp32 accumulation, with wgmma.mma_async instead of mma.sync: a
// warpgroup (four warps) multiplies a 64 x 128 tile by a 128-wide slice of
// W in one instruction per 16 of K, reading both operands from shared
// memory itself, so no ldmatrix, no register-file copy of the operands,
// and about twice mma.sync's rate on an H100.
//
// Block tile: 64 x WGS rows (WGS warpgroups, one 64-row slice each) by
// 128 or 256 columns, 64 deep; a STAGES-deep cp.async pipeline. Each tile
// row is 64 values of 16 bits, 128 bytes, stored in the 128-byte swizzle
// wgmma's descriptors name: 16-byte chunk c of row r at chunk c ^ (r % 8),
// tiles 1024-byte aligned, so that the eight rows of a core matrix fall
// in distinct banks. The K step of 16 inside a row moves the descriptor's
// start by 32 bytes (the hardware applies the swizzle to the address).
//
// The MMAs are asynchronous: one commit group per k-tile, at most one
// left in flight (wait_group 1), so a stage is reloaded two tiles after
// it was read and loads run STAGES - 2 tiles ahead. cp.async writes
// through the generic proxy; fence.proxy.async makes them visible to
// wgmma's before the barrier.
//
// The same kernels over E4M3 codes (GemmFP8, gemm_plugin disable with
// dtype fp8): 128 codes a row of a tile, wgmma's k32 E4M3 form, the
// scales of fp8.cu's kernels applied to the fp32 products in the
// epilogue.
//
// Edges in M and N are zero-filled on load and masked on store; K must be
// a multiple of 8 (16 for codes). Split-K as gemm.cu: blockIdx.z takes
// kps k-tiles and, split, writes fp32 partials (scaled, for codes) that
// gemm.cu's gemm_reduce sums.
//
// On other architectures the kernels are stubs that trap (compiled so that
// the family builds everywhere); the launcher uses them on sm_90 only.
#include "common.cuh"
#include "fp8.cuh"
#include "mma.cuh"
#include "wgmma.cuh"

// wg_load queues a k-tile of R rows (from row r0 of the R x K matrix A,
// k0 on; 128 bytes of each row) into the swizzled tile at shared address
// s, NT threads 16 bytes at a time; rows past R and columns past K are
// zeros.
template <int R, int NT, class E>
__device__ __forceinline__ void wg_load(u32 s, const E *A, int rows, int r0, int K, int k0, int tid) {
	constexpr int EPC = 16 / (int)sizeof(E); // elements per 16-byte chunk
#pragma unroll
	for (int i = 0; i < R * 8 / NT; i++) {
		const int c = tid + i * NT, r = c >> 3, ch = c & 7;
		const int gr = r0 + r, gk = k0 + ch * EPC;
		const bool ok = gr < rows && gk < K;
		cp_async16(s + r * 128 + ((ch ^ (r & 7)) << 4), ok ? A + (long long)gr * K + gk : A, ok);
	}
}

// gemm_wg: Y (in T) = X W^T over elements E, T itself or E4M3 codes (u8),
// whose products are scaled in the epilogue by sx (one, or one per row of
// X: sxRows) and sw (one, or one per row of W), as fp8.cu's kernels.
template <class T, class E, int WGS, int BN, int STAGES>
__device__ __forceinline__ void gemm_wg(const E *__restrict__ X, const E *__restrict__ W, T *__restrict__ Y,
	float *__restrict__ P, const float *sx, int sxRows, const float *sw, int swRows, int M, int N, int K, int kps) {
#ifdef XR_WGMMA
	pdl_enter();
	constexpr bool F8 = sizeof(E) == 1;
	constexpr int ROWS = 64 * WGS, BK = 128 / (int)sizeof(E), NT = 128 * WGS, NA = BN / 2; // BK: 128 bytes of a row
	static_assert(BN == 128 || BN == 256, "tile width");
	constexpr int ABYTES = ROWS * 128, STAGE = ABYTES + BN * 128;
	constexpr int AHEAD = STAGES - 2; // k-tiles loaded ahead: one stage more stays with the MMAs in flight
	static_assert(STAGES >= 3, "stages");
	extern __shared__ unsigned char smem[];
	const u32 base = (smem_u32(smem) + 1023u) & ~1023u;

	const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31;
	const int m0 = blockIdx.y * ROWS, n0 = blockIdx.x * BN;
	const int ktiles = (K + BK - 1) / BK, kt0 = blockIdx.z * kps;
	const int nk = min(ktiles, kt0 + kps) - kt0; // may be <= 0: then the partials are zeros


	float acc[NA];
#pragma unroll
	for (int i = 0; i < NA; i++) acc[i] = 0.f;

#pragma unroll
	for (int s = 0; s < AHEAD; s++) {
		if (s < nk) wg_load<ROWS, NT>(base + s * STAGE, X, M, m0, K, (kt0 + s) * BK, tid);
		if (s < nk) wg_load<BN, NT>(base + s * STAGE + ABYTES, W, N, n0, K, (kt0 + s) * BK, tid);
		cp_async_commit();
	}
	for (int i = 0; i < nk; i++) {
		cp_async_wait<AHEAD - 1>();
		asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
		// Tile i landed for everyone; every warpgroup's MMAs of tile
		// i - 2 are done (the wait below), so its stage may be reloaded.
		__syncthreads();
		if (i + AHEAD < nk) {
			const u32 st = base + (i + AHEAD) % STAGES * STAGE;
			wg_load<ROWS, NT>(st, X, M, m0, K, (kt0 + i + AHEAD) * BK, tid);
			wg_load<BN, NT>(st + ABYTES, W, N, n0, K, (kt0 + i + AHEAD) * BK, tid);
		}
		cp_async_commit();
		const u32 sa = base + (i % STAGES) * STAGE + wg * 64 * 128, sb = base + (i % STAGES) * STAGE + ABYTES;
		wg_mma_ktile<BN, E>(acc, sa, sb);
		wg_wait<1>();
		wg_pin<NA>(acc);
	}
	wg_wait<0>();
	wg_pin<NA>(acc);
	cp_async_wait<0>();

	// Epilogue: the warp's 16 rows of its warpgroup's 64.
	wg_store<T, BN, F8>(acc, Y, P, M, N, m0 + wg * 64 + warp * 16 + (lane >> 2), n0, lane, sx, sxRows, sw, swRows);
#else
	// Launched where it has no body (not sm_90a): fail loudly, never
	// leave Y unwritten.
	asm volatile("trap;");
#endif
}

// Configurations (gemm.go's gemmWG*, chosen by M or XRUN_CUDA_WGMMA_TILE):
// wg1 (one warpgroup, 64 rows) up to M = 64, wg2 (two, 128 rows) above,
// wg2w (two, 128 rows by 256 columns). Names: gemm_<config>_<dtype>, and
// gemm_f8_<config>_<dtype> over E4M3 codes (GemmFP8; dtype is Y's).
#define GEMM_WG(cfg, T, WGS, BN, ST)                                                               \
	extern "C" __global__ void __launch_bounds__(WGS * 128) gemm_##cfg##_##T(                      \
		const T *X, const T *W, T *Y, float *P, int M, int N, int K, int kps) {                    \
		gemm_wg<T, T, WGS, BN, ST>(X, W, Y, P, nullptr, 0, nullptr, 0, M, N, K, kps);              \
	}
#define GEMM_WG_F8(cfg, T, WGS, BN, ST)                                                            \
	extern "C" __global__ void __launch_bounds__(WGS * 128) gemm_f8_##cfg##_##T(const u8 *X,       \
		const u8 *W, T *Y, float *P, const float *sx, int sxRows, const float *sw, int swRows, int M, \
		int N, int K, int kps) {                                                                   \
		gemm_wg<T, u8, WGS, BN, ST>(X, W, Y, P, sx, sxRows, sw, swRows, M, N, K, kps);             \
	}
#define GEMM_WG_ALL(T)                                                                     \
	GEMM_WG(wg1, T, 1, 128, 4) GEMM_WG(wg2, T, 2, 128, 4) GEMM_WG(wg2w, T, 2, 256, 4)       \
	GEMM_WG_F8(wg1, T, 1, 128, 4) GEMM_WG_F8(wg2, T, 2, 128, 4) GEMM_WG_F8(wg2w, T, 2, 256, 4)
GEMM_WG_ALL(f16)
GEMM_WG_ALL(bf16)
