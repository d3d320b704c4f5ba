// MoE experts in FP8 (dtype fp8 on a MoE model; engine/cuda/moe_fp8.go):
// the grouped expert GEMMs with E4M3 codes for both operands, as the CPU
// backend's moeFP8 computes them (engine/cpu/moe.go): the input rows
// quantized per tensor (fp8_quant, kernels/fp8.cu), each expert's weight
// with a float32 scale per row, the products summed in float32 and the
// sums scaled by the input's and the row's scales.
//
// moe_fp8 runs over moe_group's tiles (moe_group.cu: tile (expert, first
// row, end row) of sorted rows, hdr[0] tiles), laid out as moe_mxfp4_tc
// (moe_mxfp4.cu): the weights are mma's A operand ("swap AB"), a tile's
// token rows its n = 8 columns, 8 at a time and up to 64; block (x, y) is
// tile x and weight rows y*64 .. y*64 + 63, warp w taking 16 of them. Per
// chunk of F8_KC values of k each warp holds its rows' codes in registers
// and the block stages the tile's input codes in shared memory.
//
// The tensor cores take f16: an E4M3 code becomes the f16 whose value is
// the code's times 2^-8, exactly, by moving its fields (f8x2_f16x2), and
// the float32 sums are scaled back by 2^16. No cvt.e4m3x2 (sm_89) is
// needed, and no product or sum is rounded otherwise than by the float32
// accumulation. A NaN code (written only for a NaN input) is not kept.
#include "common.cuh"
#include "mma.cuh"

typedef unsigned char u8;

// f8x2_f16x2 turns the two E4M3 codes in p's low 16 bits (the first in
// the low byte) into two f16 (the first in the low half) holding their
// values times 2^-8: E4M3's 4 exponent bits and 3 mantissa bits are f16's
// low exponent bits and top mantissa bits, the bias difference (15 - 7)
// being the 2^-8; subnormal codes land on f16 subnormals alike.
__device__ __forceinline__ u32 f8x2_f16x2(u32 p) {
	return ((p & 0x80u) << 8) | ((p & 0x7fu) << 7) | ((p & 0x8000u) << 16) | ((p & 0x7f00u) << 15);
}

// pair16 is the idx-th 16-bit pair (0..7) of 16 bytes.
__device__ __forceinline__ u32 pair16(uint4 v, int idx) {
	const int w = idx >> 1;
	const u32 word = w == 0 ? v.x : w == 1 ? v.y : w == 2 ? v.z : v.w;
	return (word >> ((idx & 1) * 16)) & 0xffffu;
}

#define F8_BM 64            // token rows of a tile at most
#define F8_BN 64            // weight rows of a block: 4 warps of 16
#define F8_KC 64            // values of k a chunk: 4 k16 steps
#define F8_LD (F8_KC + 16)  // staged bytes a row (padded)

// moe_fp8: Y[p][n] = sa[0] * sw[e][n] * sum_k A[p][k] W_e[n][k] for the
// tile's rows p, codes in A and W (K % 16 == 0).
template <class T>
__device__ __forceinline__ void moe_fp8(const u8 *__restrict__ A, const float *__restrict__ sa, const u8 *__restrict__ W,
	const float *__restrict__ sw, T *__restrict__ Y, const int *__restrict__ hdr, const int4 *__restrict__ tiles, int N, int K) {
	pdl_enter();
	__shared__ __align__(16) u8 As[F8_BM * F8_LD];
	if ((int)blockIdx.x >= hdr[0]) return;
	const int4 tile = tiles[blockIdx.x];
	const int e = tile.x, p0 = tile.y, rows = min(tile.z - tile.y, F8_BM);
	const int groups = (rows + 7) >> 3;
	const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
	const int g = lane >> 2, t = lane & 3;
	const int n_lo = blockIdx.y * F8_BN + warp * 16 + g, n_hi = n_lo + 8;
	const bool ok_lo = n_lo < N, ok_hi = n_hi < N;
	const u8 *w_lo = W + ((long long)e * N + n_lo) * K, *w_hi = w_lo + 8LL * K;
	float acc[F8_BM / 8][4];
#pragma unroll
	for (int j = 0; j < F8_BM / 8; j++)
#pragma unroll
		for (int c = 0; c < 4; c++) acc[j][c] = 0.f;
	for (int k0 = 0; k0 < K; k0 += F8_KC) {
		const int steps = min(F8_KC, K - k0) / 16;
		// The warp's rows' codes of this chunk, 16 a k16 step, loaded
		// before the staging so that their latency overlaps it.
		uint4 lo[F8_KC / 16], hi[F8_KC / 16];
#pragma unroll
		for (int s = 0; s < F8_KC / 16; s++) {
			lo[s] = hi[s] = make_uint4(0u, 0u, 0u, 0u);
			if (s < steps && ok_lo) lo[s] = ld_nc16(w_lo + k0 + 16 * s);
			if (s < steps && ok_hi) hi[s] = ld_nc16(w_hi + k0 + 16 * s);
		}
		__syncthreads(); // the last chunk's codes are read
		for (int i = tid; i < groups * 8 * steps; i += blockDim.x) {
			const int r = i / steps, c = i - r * steps;
			uint4 v = make_uint4(0u, 0u, 0u, 0u);
			if (r < rows) v = *(const uint4 *)(A + (long long)(p0 + r) * K + k0 + c * 16);
			*(uint4 *)(As + r * F8_LD + c * 16) = v;
		}
		__syncthreads();
#pragma unroll
		for (int s = 0; s < F8_KC / 16; s++) {
			if (s >= steps) continue; // a uniform branch: the loops stay unrolled
			// A: rows g (a0, a2) and g + 8 (a1, a3), k 2t, 2t + 1 (a0, a1)
			// and 2t + 8, 2t + 9 (a2, a3) of the step.
			const u32 a[4] = {f8x2_f16x2(pair16(lo[s], t)), f8x2_f16x2(pair16(hi[s], t)), f8x2_f16x2(pair16(lo[s], t + 4)),
				f8x2_f16x2(pair16(hi[s], t + 4))};
#pragma unroll
			for (int j = 0; j < F8_BM / 8; j++) {
				if (j >= groups) continue;
				// B: token row 8j + g, the same k.
				const u8 *base = As + (8 * j + g) * F8_LD + 16 * s + 2 * t;
				const u32 b[2] = {f8x2_f16x2(*(const u16 *)base), f8x2_f16x2(*(const u16 *)(base + 8))};
				mma(acc[j], a, b, f16());
			}
		}
	}
	// Both operands were 2^-8 of their values.
	const float s = sa[0] * 65536.f;
	const float s_lo = ok_lo ? s * sw[(long long)e * N + n_lo] : 0.f, s_hi = ok_hi ? s * sw[(long long)e * N + n_hi] : 0.f;
	store_swapab<T, F8_BM>(Y, acc, p0, rows, groups, t, N, n_lo, n_hi, ok_lo, ok_hi, s_lo, s_hi);
}

extern "C" __global__ void __launch_bounds__(128) moe_fp8_f16(const u8 *A, const float *sa, const u8 *W, const float *sw, f16 *Y,
	const int *hdr, const int4 *tiles, int N, int K) {
	moe_fp8<f16>(A, sa, W, sw, Y, hdr, tiles, N, K);
}
extern "C" __global__ void __launch_bounds__(128) moe_fp8_bf16(const u8 *A, const float *sa, const u8 *W, const float *sw, bf16 *Y,
	const int *hdr, const int4 *tiles, int N, int K) {
	moe_fp8<bf16>(A, sa, W, sw, Y, hdr, tiles, N, K);
}
