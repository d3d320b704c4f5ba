// MXFP4 experts (moe_weights mxfp4; engine/model/mxfp4.go): expert weights
// kept as OCP MXFP4, GPT-OSS's checkpoint layout, and dequantized in
// registers by the grouped expert GEMMs that read them (weights 4-bit,
// activations fp16/bf16, float32 accumulation), as TensorRT-LLM and vLLM
// run GPT-OSS on Hopper.
//
// An expert stack [E][N][K] is codes [E][N][K/2] (two E2M1 values a byte,
// value 2i in the low nibble of byte i) and scales [E][N][K/32] (E8M0, one
// per 32 values: 2^(s-127), 255 NaN). An E2M1 code is a sign bit (3) over
// the magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6. K is a multiple of 32, so a
// row's codes are a multiple of 16 bytes and every block's 16 bytes load
// as one uint4.
//
// The GEMMs run over moe_group's tiles (moe_group.cu: tile (expert, first
// row, end row) of sorted rows, hdr[0] tiles) and read and write whole
// sorted rows: Y[p][n] = sum_k A[p][k] W_e[n][k] for p in the tile.
// moe_mxfp4_tc, the one the engine runs above one row per expert, puts the
// weights on the tensor cores as mma's first operand and a tile's (up to
// 64) token rows as its columns, 8 at a time, decoding each weight block
// once per tile by byte permutes. moe_mxfp4_gemv, for tiles of at most 8
// rows, runs below that (batch 1): warps stream weight rows with every
// lane decoding whole blocks into float32. moe_mxfp4_gemm stays as a
// reference (tests and benchmarks choose it) for tiles of up to 64 rows, 64 x 64 output
// tiles on the tensor cores (mma m16n8k16) with the weights dequantized
// into shared memory one 32-value block per row at a time. Under fp16
// that kernel rounds the dequantized weights to fp16 (exact unless a
// weight is beyond fp16's range); the GEMV keeps them in float32, and
// moe_mxfp4_tc applies the scale to float32 sums.
//
// mxfp4_random makes the zoo's random experts where they live: the
// float32 values of model.RandomValue quantized by
// model.QuantizeMXFP4Block's rule, bit for bit.
#include "mma.cuh"

typedef unsigned char u8;

// fp4_value is E2M1 code c's value (the low 4 bits): magnitude m = c & 7
// is 0.5 m for m < 2, else (1 + (m & 1) / 2) 2^((m >> 1) - 1), built
// straight into float32's bits.
__device__ __forceinline__ float fp4_value(u32 c) {
	const u32 m = c & 7u, e = m >> 1;
	u32 bits = e ? (((126u + e) << 23) | ((m & 1u) << 22)) : (m ? (126u << 23) : 0u);
	return __uint_as_float(bits | ((c & 8u) << 28));
}

// e8m0 is a scale byte's multiplier: 2^(s-127), 2^-127 (a subnormal) for
// 0, NaN for 255.
__device__ __forceinline__ float e8m0(u32 s) {
	if (s == 0u) return __uint_as_float(0x00400000u);
	if (s == 255u) return nan_f32();
	return __uint_as_float(s << 23);
}

// mxfp4_block32 decodes one block's 16 bytes (c) and scale into w[32].
__device__ __forceinline__ void mxfp4_block32(float *w, uint4 c, float s) {
	const u32 words[4] = {c.x, c.y, c.z, c.w};
#pragma unroll
	for (int i = 0; i < 4; i++) {
#pragma unroll
		for (int j = 0; j < 8; j++) w[8 * i + j] = fp4_value(words[i] >> (4 * j)) * s;
	}
}

// fp4_code is model's fp4Code: a magnitude already divided by the scale,
// rounded to the nearest E2M1 magnitude, ties to the even code,
// saturating at 6.
__device__ __forceinline__ u32 fp4_code(float a) {
	if (a <= 0.25f) return 0;
	if (a < 0.75f) return 1;
	if (a <= 1.25f) return 2;
	if (a < 1.75f) return 3;
	if (a <= 2.5f) return 4;
	if (a < 3.5f) return 5;
	if (a <= 5.f) return 6;
	return 7;
}

// mxfp4_random: thread g quantizes block g of the random weight (seed,
// scale): its 32 values random_value(seed, 32 g + i, scale), amax's
// biased exponent less 2 (at least 0) the scale byte, 255 when a value is
// not finite; each value times 2^(127 - s) (exact) to its code.
extern "C" __global__ void mxfp4_random(u8 *codes, u8 *scales, long long blocks, u64 seed, float scale) {
	pdl_enter();
	for (long long g = blockIdx.x * (long long)blockDim.x + threadIdx.x; g < blocks; g += (long long)gridDim.x * blockDim.x) {
		float v[32];
		float amax = 0.f;
		bool bad = false;
#pragma unroll
		for (int i = 0; i < 32; i++) {
			v[i] = random_value(seed, g * 32 + i, scale);
			const float a = fabsf(v[i]);
			bad = bad || !(a <= 3.402823466e38f);
			amax = fmaxf(amax, a);
		}
		u32 w[4] = {0u, 0u, 0u, 0u};
		u32 s = 255u;
		if (!bad) {
			s = (u32)max((int)((__float_as_uint(amax) >> 23) & 0xffu) - 2, 0);
			const float inv = __uint_as_float((254u - s) << 23);
#pragma unroll
			for (int i = 0; i < 32; i++) {
				u32 c = fp4_code(__fmul_rn(fabsf(v[i]), inv));
				if (c != 0u && (__float_as_uint(v[i]) >> 31)) c |= 8u;
				w[i >> 3] |= c << (4 * (i & 7));
			}
		}
		*(uint4 *)(codes + g * 16) = make_uint4(w[0], w[1], w[2], w[3]);
		scales[g] = (u8)s;
	}
}

// moe_mxfp4_gemv: block (x, y) = tile x (blocks past hdr[0] exit), weight
// rows y*GV_ROWS .. of expert e; each of its GV_WARPS warps takes
// GV_ROWS/GV_WARPS of those rows in turn, each lane the 32-value blocks
// lane, lane + 32, ... of the row: the block decoded once into registers
// and multiplied with the tile's (at most GV_BM) rows of A, 64 bytes of
// each, then a warp sum per row.
#define GV_BM 8
#define GV_WARPS 4
#define GV_ROWS 16
template <class T>
__device__ __forceinline__ void moe_mxfp4_gemv(const T *__restrict__ A, const u8 *__restrict__ codes,
	const u8 *__restrict__ scales, T *__restrict__ Y, const int *__restrict__ hdr, const int4 *__restrict__ tiles, int N,
	int K) {
	pdl_enter();
	if ((int)blockIdx.x >= hdr[0]) return;
	const int4 tile = tiles[blockIdx.x];
	const int e = tile.x, p0 = tile.y, rows = min(tile.z - tile.y, GV_BM);
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	const int KB = K / 32;
	for (int r = warp; r < GV_ROWS; r += GV_WARPS) {
		const int n = blockIdx.y * GV_ROWS + r;
		if (n >= N) break;
		const long long wrow = (long long)e * N + n;
		const u8 *wc = codes + wrow * (K / 2);
		const u8 *ws = scales + wrow * KB;
		float acc[GV_BM];
#pragma unroll
		for (int i = 0; i < GV_BM; i++) acc[i] = 0.f;
		for (int b = lane; b < KB; b += 32) {
			float w[32];
			mxfp4_block32(w, *(const uint4 *)(wc + b * 16), e8m0(ws[b]));
#pragma unroll
			for (int i = 0; i < GV_BM; i++) {
				if (i < rows) {
					const pack8 *a = (const pack8 *)(A + (long long)(p0 + i) * K + b * 32);
					float s = 0.f;
#pragma unroll
					for (int q = 0; q < 4; q++) {
						const pack8 v = a[q];
#pragma unroll
						for (int j = 0; j < 4; j++) {
							const float2 x = unpack2(v.w[j], T());
							s += x.x * w[8 * q + 2 * j] + x.y * w[8 * q + 2 * j + 1];
						}
					}
					acc[i] += s;
				}
			}
		}
#pragma unroll
		for (int i = 0; i < GV_BM; i++) {
			if (i < rows) {
				const float v = warp_sum(acc[i]);
				if (lane == 0) Y[(long long)(p0 + i) * N + n] = from_f32<T>(v);
			}
		}
	}
}

// moe_mxfp4_gemm: block (x, y) = tile x (blocks past hdr[0] exit), output
// columns y*64 .. y*64 + 63 of the tile's (at most 64) rows. Per 32-value
// k step the block stages A's 64 x 32 slice and the 64 weight rows' blocks
// dequantized, both [64][GM_LD] in shared memory (rows padded to 40
// elements so the fragment loads below hit distinct banks), then each of
// its 4 warps (2 x 2, 32 x 32 outputs each) runs two k16 steps of 2 x 4
// mma m16n8k16. Fragments follow PTX's layout for .row.col m16n8k16: lane
// l, g = l / 4, t = l % 4; A's a0..a3 = (row g, k 2t), (row g + 8, k 2t),
// (row g, k 2t + 8), (row g + 8, k 2t + 8), each two k-adjacent values;
// B's b0, b1 = (k 2t, col g), (k 2t + 8, col g), two k-adjacent values of
// weight row g; C's c0, c1 = row g, cols 2t, 2t + 1, c2, c3 = row g + 8.
#define GM_BM 64
#define GM_BN 64
#define GM_LD 40
template <class T>
__device__ __forceinline__ void moe_mxfp4_gemm(const T *__restrict__ A, const u8 *__restrict__ codes,
	const u8 *__restrict__ scales, T *__restrict__ Y, const int *__restrict__ hdr, const int4 *__restrict__ tiles, int N,
	int K) {
	pdl_enter();
	__shared__ __align__(16) T As[GM_BM * GM_LD];
	__shared__ __align__(16) T Ws[GM_BN * GM_LD];
	if ((int)blockIdx.x >= hdr[0]) return;
	const int4 tile = tiles[blockIdx.x];
	const int e = tile.x, p0 = tile.y, rows = min(tile.z - tile.y, GM_BM);
	const int n0 = blockIdx.y * GM_BN;
	const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
	const int g = lane >> 2, t = lane & 3;
	const int wm = (warp >> 1) * 32, wn = (warp & 1) * 32;
	const int KB = K / 32;
	float acc[2][4][4];
#pragma unroll
	for (int i = 0; i < 2; i++)
#pragma unroll
		for (int j = 0; j < 4; j++)
#pragma unroll
			for (int c = 0; c < 4; c++) acc[i][j][c] = 0.f;
	// This thread's weight half-block: row tid / 2, values (tid % 2) * 16 ..
	const int wr = tid >> 1, wh = tid & 1;
	const bool wok = n0 + wr < N;
	const long long wrow = (long long)e * N + n0 + wr;
	for (int kb = 0; kb < KB; kb++) {
		// A: 64 rows x 64 bytes = 256 pack8, two per thread; rows past
		// the tile are zeros.
#pragma unroll
		for (int q = 0; q < 2; q++) {
			const int i = tid + q * 128, r = i >> 2, c = i & 3;
			pack8 v = {};
			if (r < rows) v = *(const pack8 *)(A + (long long)(p0 + r) * K + kb * 32 + c * 8);
			*(pack8 *)(As + r * GM_LD + c * 8) = v;
		}
		// W: this thread's 16 values (8 bytes of codes) dequantized in
		// registers, then stored as T; rows past N are zeros.
		{
			u32 lo = 0u, hi = 0u;
			float s = 0.f;
			if (wok) {
				const uint2 c = *(const uint2 *)(codes + wrow * (K / 2) + kb * 16 + wh * 8);
				lo = c.x;
				hi = c.y;
				s = e8m0(scales[wrow * KB + kb]);
			}
			pack8 p0v = {}, p1v = {};
#pragma unroll
			for (int j = 0; j < 8; j++) {
				pack_set<T>(p0v, j, wok ? fp4_value(lo >> (4 * j)) * s : 0.f);
				pack_set<T>(p1v, j, wok ? fp4_value(hi >> (4 * j)) * s : 0.f);
			}
			*(pack8 *)(Ws + wr * GM_LD + wh * 16) = p0v;
			*(pack8 *)(Ws + wr * GM_LD + wh * 16 + 8) = p1v;
		}
		__syncthreads();
#pragma unroll
		for (int k0 = 0; k0 < 32; k0 += 16) {
			u32 a[2][4], b[4][2];
#pragma unroll
			for (int i = 0; i < 2; i++) {
				const T *base = As + (wm + i * 16 + g) * GM_LD + k0 + 2 * t;
				a[i][0] = *(const u32 *)(base);
				a[i][1] = *(const u32 *)(base + 8 * GM_LD);
				a[i][2] = *(const u32 *)(base + 8);
				a[i][3] = *(const u32 *)(base + 8 * GM_LD + 8);
			}
#pragma unroll
			for (int j = 0; j < 4; j++) {
				const T *base = Ws + (wn + j * 8 + g) * GM_LD + k0 + 2 * t;
				b[j][0] = *(const u32 *)(base);
				b[j][1] = *(const u32 *)(base + 8);
			}
#pragma unroll
			for (int i = 0; i < 2; i++)
#pragma unroll
				for (int j = 0; j < 4; j++) mma(acc[i][j], a[i], b[j], T());
		}
		__syncthreads(); // the tiles are read before the next step writes them
	}
#pragma unroll
	for (int i = 0; i < 2; i++) {
#pragma unroll
		for (int j = 0; j < 4; j++) {
			const int col = n0 + wn + j * 8 + 2 * t;
#pragma unroll
			for (int h = 0; h < 2; h++) {
				const int r = wm + i * 16 + g + h * 8;
				if (r >= rows) continue;
				T *y = Y + (long long)(p0 + r) * N;
				if (col < N) y[col] = from_f32<T>(acc[i][j][2 * h]);
				if (col + 1 < N) y[col + 1] = from_f32<T>(acc[i][j][2 * h + 1]);
			}
		}
	}
}

// fp4x4 turns the four E2M1 codes of h's low 16 bits (code i in nibble i)
// into two words of two T values each, w0 = codes 0, 1 and w1 = codes 2,
// 3 (the first of each pair in the low half), with no arithmetic: each
// magnitude's low and high byte in T's format come from an 8-entry table
// by byte permutes (prmt), the sign bits are moved into place.
template <class T> struct fp4_table;
template <> struct fp4_table<bf16> { // 0, 0.5, 1, 1.5, 2, 3, 4, 6 as bf16
	static constexpr u32 lo0 = 0xC0800000u, lo1 = 0xC0804000u, hi0 = 0x3F3F3F00u, hi1 = 0x40404040u;
};
template <> struct fp4_table<f16> { // as fp16: low bytes all zero
	static constexpr u32 lo0 = 0u, lo1 = 0u, hi0 = 0x3E3C3800u, hi1 = 0x46444240u;
};
// prmt: byte n of the result is byte (s >> 4n) & 7 of {b, a} (a's bytes
// first); no selector here sets the sign-replicating bit.
__device__ __forceinline__ u32 prmt(u32 a, u32 b, u32 s) {
	u32 r;
	asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(s));
	return r;
}
template <class T> __device__ __forceinline__ void fp4x4(u32 h, u32 &w0, u32 &w1) {
	const u32 sel = h & 0x7777u;
	const u32 lo = prmt(fp4_table<T>::lo0, fp4_table<T>::lo1, sel);
	const u32 hi = prmt(fp4_table<T>::hi0, fp4_table<T>::hi1, sel);
	w0 = prmt(lo, hi, 0x5140u) | ((h & 0x8u) << 12) | ((h & 0x80u) << 24);
	w1 = prmt(lo, hi, 0x7362u) | ((h & 0x800u) << 4) | ((h & 0x8000u) << 16);
}

#define TC_BM 64
#define TC_BN 64

// tc_w is a warp's weight blocks of one chunk of KC values of k: its rows
// g and g + 8 (lo, hi), codes and float32 scales, zero past K or N.
template <int KC>
struct tc_w {
	static constexpr int NB = KC / 32;
	uint4 lo[NB], hi[NB];
	float slo[NB], shi[NB];
};

// tc_load issues the loads of the chunk from k0 (nothing past K).
template <int KC>
__device__ __forceinline__ void tc_load(tc_w<KC> &w, const u8 *c_lo, const u8 *c_hi, const u8 *s_lo, const u8 *s_hi, bool ok_lo,
	bool ok_hi, int k0, int K) {
	const int nb = max(0, min(KC, K - k0) / 32);
#pragma unroll
	for (int b = 0; b < KC / 32; b++) {
		w.lo[b] = w.hi[b] = make_uint4(0u, 0u, 0u, 0u);
		w.slo[b] = w.shi[b] = 0.f;
		const int kb = k0 / 32 + b;
		if (b < nb && ok_lo) {
			w.lo[b] = ld_nc16(c_lo + kb * 16);
			w.slo[b] = e8m0(s_lo[kb]);
		}
		if (b < nb && ok_hi) {
			w.hi[b] = ld_nc16(c_hi + kb * 16);
			w.shi[b] = e8m0(s_hi[kb]);
		}
	}
}

// tc_stage copies A's tile rows (to the last group in use; zeros past the
// tile) x the chunk's columns from k0 into As (rows of LD), 16 bytes at a
// time.
template <class T, int LD>
__device__ __forceinline__ void tc_stage(T *As, const T *__restrict__ A, int p0, int rows, int groups, int k0, int nb, int K) {
	const int vecs = nb * 4;
	for (int i = threadIdx.x; i < groups * 8 * vecs; i += blockDim.x) {
		const int r = i / vecs, c = i - r * vecs;
		uint4 v = make_uint4(0u, 0u, 0u, 0u);
		if (r < rows) v = *(const uint4 *)(A + (long long)(p0 + r) * K + k0 + c * 8);
		*(uint4 *)(As + r * LD + c * 8) = v;
	}
}

// tc_mma accumulates the chunk's nb blocks: w's weights (mma's A) times
// the staged token rows (mma's B, 8 a group), each block's two mma into a
// zeroed fragment added times the row's scale.
template <class T, int KC>
__device__ __forceinline__ void tc_mma(float (&acc)[TC_BM / 8][4], const tc_w<KC> &w, const T *As, int groups, int nb, u32 pick,
	int g, int t) {
	constexpr int LD = KC + 8;
#pragma unroll
	for (int b = 0; b < KC / 32; b++) {
		if (b >= nb) continue; // a uniform branch: the loops stay unrolled
		u32 a0[4], a1[4];      // the block's k 0-15 and k 16-31 fragments
		fp4x4<T>(prmt(w.lo[b].x, w.lo[b].y, pick), a0[0], a0[2]);
		fp4x4<T>(prmt(w.hi[b].x, w.hi[b].y, pick), a0[1], a0[3]);
		fp4x4<T>(prmt(w.lo[b].z, w.lo[b].w, pick), a1[0], a1[2]);
		fp4x4<T>(prmt(w.hi[b].z, w.hi[b].w, pick), a1[1], a1[3]);
#pragma unroll
		for (int j = 0; j < TC_BM / 8; j++) {
			if (j >= groups) continue;
			const T *base = As + (8 * j + g) * LD + b * 32 + 2 * t;
			const u32 b0[2] = {*(const u32 *)base, *(const u32 *)(base + 8)};
			const u32 b1[2] = {*(const u32 *)(base + 16), *(const u32 *)(base + 24)};
			float blk[4] = {0.f, 0.f, 0.f, 0.f};
			mma(blk, a0, b0, T());
			mma(blk, a1, b1, T());
			acc[j][0] += blk[0] * w.slo[b];
			acc[j][1] += blk[1] * w.slo[b];
			acc[j][2] += blk[2] * w.shi[b];
			acc[j][3] += blk[3] * w.shi[b];
		}
	}
}

// moe_mxfp4_tc: the tensor-core kernel for every tile size, weights as
// mma's A operand ("swap AB": Y^T = W A^T, so that a tile's few token rows
// are mma's n = 8 columns and no tensor-core row is padding at decode).
// Block (x, y) = tile x (blocks past hdr[0] exit), weight rows y*64 ..
// y*64 + 63: warp w takes 16 of them, and mma m16n8k16's columns are the
// tile's (at most 64) rows, 8 at a time, groups past the tile's rows
// skipped. Per chunk of KC values of k the block stages A's rows in
// shared memory (padded rows: fragment loads hit distinct banks) while
// each warp holds its weight rows' blocks in registers. Lane l (g = l / 4,
// t = l % 4) needs, of a 32-value block of weight rows g and g + 8, the
// bytes t, t + 4, t + 8, t + 12, the four words' byte t: values 2t, 2t + 1
// (+8, +16, +24), A's a0..a3 for the block's two k16 steps, decoded by
// fp4x4 unscaled (E2M1 values are exact in fp16 and bf16). Each block's
// two mma accumulate into a zeroed fragment that is added to the sum
// times the row's E8M0 scale in float32: no scaled weight is ever
// rounded, under fp16 as under bf16, and a NaN scale gives NaN.
//
// Loading the next chunk's weights before multiplying this one (a
// software pipeline) and chunks of 256 values were both measured slower:
// 769 and 745 against 632 us a GPT-OSS-20B expert layer at batch 64, 1246
// and 1200 against 1021 at 256 (H200).
template <class T, int KC>
__device__ __forceinline__ void moe_mxfp4_tc(const T *__restrict__ A, const u8 *__restrict__ codes,
	const u8 *__restrict__ scales, T *__restrict__ Y, const int *__restrict__ hdr, const int4 *__restrict__ tiles, int N,
	int K) {
	pdl_enter();
	constexpr int LD = KC + 8; // padded rows: fragment loads hit distinct banks
	__shared__ __align__(16) T As[TC_BM * LD];
	if ((int)blockIdx.x >= hdr[0]) return;
	const int4 tile = tiles[blockIdx.x];
	const int e = tile.x, p0 = tile.y, rows = min(tile.z - tile.y, TC_BM);
	const int groups = (rows + 7) >> 3;
	const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
	const int g = lane >> 2, t = lane & 3;
	const int KB = K / 32;
	const int n_lo = blockIdx.y * TC_BN + warp * 16 + g, n_hi = n_lo + 8;
	const bool ok_lo = n_lo < N, ok_hi = n_hi < N;
	const u8 *c_lo = codes + ((long long)e * N + n_lo) * (K / 2), *c_hi = c_lo + 8LL * (K / 2);
	const u8 *s_lo = scales + ((long long)e * N + n_lo) * KB, *s_hi = s_lo + 8LL * KB;
	const u32 pick = (u32)t | ((u32)(t + 4) << 4); // word x's byte t, then word y's
	float acc[TC_BM / 8][4];
#pragma unroll
	for (int j = 0; j < TC_BM / 8; j++)
#pragma unroll
		for (int c = 0; c < 4; c++) acc[j][c] = 0.f;
	tc_w<KC> w;
	for (int k0 = 0; k0 < K; k0 += KC) {
		const int nb = min(KC, K - k0) / 32; // K is a multiple of 32
		// Loaded before the staging, so that their latency overlaps it.
		tc_load<KC>(w, c_lo, c_hi, s_lo, s_hi, ok_lo, ok_hi, k0, K);
		__syncthreads(); // the last chunk's A is read
		tc_stage<T, LD>(As, A, p0, rows, groups, k0, nb, K);
		__syncthreads();
		tc_mma<T, KC>(acc, w, As, groups, nb, pick, g, t);
	}
	store_swapab<T, TC_BM>(Y, acc, p0, rows, groups, t, N, n_lo, n_hi, ok_lo, ok_hi, 1.f, 1.f);
}

#define MOE_MXFP4(T)                                                                                                   \
	extern "C" __global__ void __launch_bounds__(GV_WARPS * 32) moe_mxfp4_gemv_##T(const T *A, const u8 *codes,        \
		const u8 *scales, T *Y, const int *hdr, const int4 *tiles, int N, int K) {                                     \
		moe_mxfp4_gemv<T>(A, codes, scales, Y, hdr, tiles, N, K);                                                      \
	}                                                                                                                  \
	extern "C" __global__ void __launch_bounds__(128) moe_mxfp4_gemm_##T(const T *A, const u8 *codes,                  \
		const u8 *scales, T *Y, const int *hdr, const int4 *tiles, int N, int K) {                                     \
		moe_mxfp4_gemm<T>(A, codes, scales, Y, hdr, tiles, N, K);                                                      \
	}                                                                                                                  \
	extern "C" __global__ void __launch_bounds__(128) moe_mxfp4_tc_##T(const T *A, const u8 *codes,                    \
		const u8 *scales, T *Y, const int *hdr, const int4 *tiles, int N, int K) {                                     \
		moe_mxfp4_tc<T, 128>(A, codes, scales, Y, hdr, tiles, N, K);                                                   \
	}
MOE_MXFP4(f16)
MOE_MXFP4(bf16)
