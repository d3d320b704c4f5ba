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

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define XR_WGMMA 1
#endif

#ifdef XR_WGMMA
// desc is the matrix descriptor of a K-major tile at shared address addr
// in the 128-byte swizzle: the start (16-byte units), the stride between
// 8-row core-matrix groups (1024 bytes: eight rows of 128), the mode (1:
// 128-byte swizzle). The leading offset is unused in this layout.
__device__ __forceinline__ unsigned long long wg_desc(u32 addr) {
	return (unsigned long long)((addr & 0x3ffffu) >> 4) | (1ull << 16) | ((unsigned long long)(1024 >> 4) << 32) | (1ull << 62);
}

__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N> __device__ __forceinline__ void wg_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory"); }

// wg_pin keeps the compiler from moving accumulator reads or writes across
// the asynchronous MMAs' fences and waits.
template <int N> __device__ __forceinline__ void wg_pin(float *d) {
#pragma unroll
	for (int i = 0; i < N; i++) asm volatile("" : "+f"(d[i])::"memory");
}

// wgmma_n128 (and _n256): D[64 x 128] += A[64 x k] B[k x 128], both from
// shared memory (descriptors a, b), fp32 accumulators d in the fragment
// layout of mma.sync's C, repeated every 8 columns (d[4j..4j+3]: column
// block j); k is 16 of fp16 or bf16, 32 of E4M3 (the last argument's
// type): 32 bytes of each row either way. WG_ACC* are the accumulator
// operands (d[0..63], on to d[127] for n256), WG_REG* their registers.
#define WG_ACC64 "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define WG_ACC128 WG_ACC64, "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
#define WG_REG64 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define WG_REG128 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}"
// WGMMA defines wgmma_nN for operands of type TAG: SHAPE.f32.TY.TY, its
// descriptors and scale-d numbered A, B and S after the accumulators.
// TRANS is the imm-trans-a/b pair (both K-major) for fp16/bf16; the E4M3
// forms take none: K-major is their only layout, and ptxas rejects the
// instruction with them.
#define WGMMA(N, TAG, SHAPE, TY, REGS, ACC, A, B, S, TRANS)                                                \
	__device__ __forceinline__ void wgmma_n##N(float *d, unsigned long long a, unsigned long long b, TAG) { \
		asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " S ", 0;\n"                                        \
					 "wgmma.mma_async.sync.aligned." SHAPE ".f32." TY "." TY " " REGS ", " A ", " B         \
					 ", p, 1, 1" TRANS ";\n}\n"                                                            \
			: ACC                                                                                          \
			: "l"(a), "l"(b), "r"(1));                                                                     \
	}
WGMMA(128, f16, "m64n128k16", "f16", WG_REG64, WG_ACC64, "%64", "%65", "%66", ", 0, 0")
WGMMA(128, bf16, "m64n128k16", "bf16", WG_REG64, WG_ACC64, "%64", "%65", "%66", ", 0, 0")
WGMMA(128, u8, "m64n128k32", "e4m3", WG_REG64, WG_ACC64, "%64", "%65", "%66", "")
WGMMA(256, f16, "m64n256k16", "f16", WG_REG128, WG_ACC128, "%128", "%129", "%130", ", 0, 0")
WGMMA(256, bf16, "m64n256k16", "bf16", WG_REG128, WG_ACC128, "%128", "%129", "%130", ", 0, 0")
WGMMA(256, u8, "m64n256k32", "e4m3", WG_REG128, WG_ACC128, "%128", "%129", "%130", "")
#endif

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
		wg_pin<NA>(acc);
		wg_fence();
#pragma unroll
		for (int kk = 0; kk < 4; kk++) {
			if constexpr (BN == 128) {
				wgmma_n128(acc, wg_desc(sa + kk * 32), wg_desc(sb + kk * 32), E{});
			} else {
				wgmma_n256(acc, wg_desc(sa + kk * 32), wg_desc(sb + kk * 32), E{});
			}
		}
		wg_commit();
		wg_wait<1>();
		wg_pin<NA>(acc);
	}
	wg_wait<0>();
	wg_pin<NA>(acc);
	cp_async_wait<0>();

	// Epilogue: the warp's 16 rows of its warpgroup's 64; each 8-column
	// block j holds rows lane/4 and lane/4 + 8, columns 2 (lane % 4) and +1.
	const bool pairs = (N & 1) == 0;
	const int rb = m0 + wg * 64 + warp * 16 + (lane >> 2);
#pragma unroll
	for (int j = 0; j < BN / 8; j++)
#pragma unroll
		for (int h = 0; h < 2; h++) {
			const int r = rb + h * 8, c = n0 + j * 8 + (lane & 3) * 2;
			if (r >= M || c >= N) continue;
			float v0 = acc[4 * j + 2 * h], v1 = acc[4 * j + 2 * h + 1];
			if constexpr (F8) {
				const float s = sx[sxRows ? r : 0];
				v0 *= s * sw[swRows ? c : 0];
				v1 *= s * sw[swRows ? min(c + 1, N - 1) : 0];
			}
			gemm_store2(Y, P, M, N, r, c, v0, v1, pairs);
		}
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
