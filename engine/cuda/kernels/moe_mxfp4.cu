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
// sorted rows: Y[p][n] = sum_k A[p][k] W_e[n][k] for p in the tile. Two
// kernels: moe_mxfp4_gemv for tiles of at most 8 rows (decode), warps
// streaming weight rows with every lane decoding whole blocks; and
// moe_mxfp4_gemm for tiles of up to 64 rows (prefill), 64 x 64 output
// tiles on the tensor cores (mma m16n8k16) with the weights dequantized
// into shared memory one 32-value block per row at a time. Under fp16 the
// dequantized weights are rounded to fp16 for the tensor cores (exact
// unless a weight is beyond fp16's range); the GEMV keeps them in float32.
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

#define MOE_MXFP4(T)                                                                                                   \
	extern "C" __global__ void __launch_bounds__(GV_WARPS * 32) moe_mxfp4_gemv_##T(const T *A, const u8 *codes,        \
		const u8 *scales, T *Y, const int *hdr, const int4 *tiles, int N, int K) {                                     \
		moe_mxfp4_gemv<T>(A, codes, scales, Y, hdr, tiles, N, K);                                                      \
	}                                                                                                                  \
	extern "C" __global__ void __launch_bounds__(128) moe_mxfp4_gemm_##T(const T *A, const u8 *codes,                  \
		const u8 *scales, T *Y, const int *hdr, const int4 *tiles, int N, int K) {                                     \
		moe_mxfp4_gemm<T>(A, codes, scales, Y, hdr, tiles, N, K);                                                      \
	}
MOE_MXFP4(f16)
MOE_MXFP4(bf16)
