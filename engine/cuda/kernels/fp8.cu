// FP8 E4M3 GEMMs (dtype fp8, TensorRT-LLM's FP8 recipe): quantizing
// activations and weights to E4M3 codes, and the engine's own FP8 GEMM
// (gemm_plugin disable; auto runs cuBLASLt's FP8 path on the codes these
// kernels write).
//
// Codes are bit for bit those of engine/fp8.Encode: x · (1/s) with the
// reciprocal rounded once in float32, then rounded to the nearest E4M3
// value, ties to even, magnitudes above 448 saturated, NaN kept. The
// encoder is spelled out in integer operations (no cuda_fp8.h under NVRTC,
// and the cvt.e4m3x2 instructions need sm_89) so the codes match the CPU's
// reference on every architecture. A scale is amax/448, or 1 for an
// all-zero or non-finite amax (fp8.Scale).
//
// The own GEMM multiplies E4M3 values in float32 (every product of two is
// exact there) and applies scale_x · scale_w to the sum, as the tensor
// cores' FP8 path does with alpha: a matrix-vector kernel for decode
// (M <= 8, one warp per output column) and a plain 64 x 64 shared-memory
// tile on the CUDA cores above. Simple and correct, not fast: cuBLASLt
// (gemm_plugin auto) is the FP8 path to measure speed with.
#include "common.cuh"
#include "fp8.cuh"

__device__ __forceinline__ float fp8_scale(float amax) {
	if (!(amax > 0.f) || !(amax <= 3.402823466e38f)) return 1.f;
	return __fdiv_rn(amax, FP8_MAX);
}

// Non-negative floats order as their bits do, so an atomicMax on the bits
// is a float max; NaNs are skipped, as fp8.AbsMax skips them.
__device__ __forceinline__ float amax_acc(float m, float v) {
	v = fabsf(v);
	return v > m ? v : m;
}

__device__ __forceinline__ float block_max(float v) {
	__shared__ float part[32];
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	__syncthreads();
	if (lane == 0) part[warp] = v;
	__syncthreads();
	v = lane < (int)(blockDim.x >> 5) ? part[lane] : 0.f;
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

// amax_span is max |x| over this thread's share of x[0..n): elements
// start, start + stride, ... in 16-byte packs of eight where x is aligned,
// four packs in flight per thread (a scalar loop spent its time waiting on
// one load after another: 8 to 28 µs to quantize a decode input of 32K
// values on an H200), then the tail of fewer than eight one by one. A
// maximum is the same in any order, so the result is exactly the scalar
// loop's.
template <class T>
__device__ __forceinline__ float amax_span(const T *x, long long n, long long start, long long stride) {
	float m = 0.f;
	long long done = 0;
	if ((((unsigned long long)x) & 15) == 0) {
		const pack8 *v = (const pack8 *)x;
		const long long nv = n >> 3;
		long long i = start;
		for (; i + 3 * stride < nv; i += 4 * stride) {
			pack8 p[4];
#pragma unroll
			for (int u = 0; u < 4; u++) p[u] = v[i + u * stride];
#pragma unroll
			for (int u = 0; u < 4; u++)
#pragma unroll
				for (int j = 0; j < 8; j++) m = amax_acc(m, pack_get<T>(p[u], j));
		}
		for (; i < nv; i += stride) {
			const pack8 p = v[i];
#pragma unroll
			for (int j = 0; j < 8; j++) m = amax_acc(m, pack_get<T>(p, j));
		}
		done = nv << 3;
	}
	for (long long i = done + start; i < n; i += stride) m = amax_acc(m, to_f32(x[i]));
	return m;
}

// fp8_amax: part[b] = max |x| over block b's share of n elements: the
// partial maxima fp8_quant reduces (no atomics, so nothing to clear).
template <class T>
__device__ __forceinline__ void fp8_amax(const T *x, long long n, float *part) {
	pdl_enter();
	float m = amax_span(x, n, blockIdx.x * (long long)blockDim.x + threadIdx.x, (long long)gridDim.x * blockDim.x);
	m = block_max(m);
	if (threadIdx.x == 0) part[blockIdx.x] = m;
}
extern "C" __global__ void fp8_amax_f16(const f16 *x, long long n, float *part) { fp8_amax<f16>(x, n, part); }
extern "C" __global__ void fp8_amax_bf16(const bf16 *x, long long n, float *part) { fp8_amax<bf16>(x, n, part); }

// fp8_calib_amax: *cell = max(*cell, max |x|) over n elements, NaNs
// skipped (fp8.AbsMax): calibration's running amax of an FP8 GEMM's input
// (static input scales calibrated at load), kept as the float's bits, which
// order as the floats do since none is negative; the cell is zeroed when
// calibration starts. A load-time path: any grid is right.
template <class T>
__device__ __forceinline__ void fp8_calib_amax(const T *x, long long n, u32 *cell) {
	pdl_enter();
	float m = amax_span(x, n, blockIdx.x * (long long)blockDim.x + threadIdx.x, (long long)gridDim.x * blockDim.x);
	m = block_max(m);
	if (threadIdx.x == 0) atomicMax(cell, __float_as_uint(m));
}
extern "C" __global__ void fp8_calib_amax_f16(const f16 *x, long long n, u32 *cell) { fp8_calib_amax<f16>(x, n, cell); }
extern "C" __global__ void fp8_calib_amax_bf16(const bf16 *x, long long n, u32 *cell) { fp8_calib_amax<bf16>(x, n, cell); }

// Modes of fp8_quant's scale.
#define FQ_STATIC 0 // *stat, the checkpoint's
#define FQ_PARTS 1  // amax of the nparts partial maxima fp8_amax wrote
#define FQ_SELF 2   // amax over all rows x k, read by every block itself (small inputs)
#define FQ_ROW 3    // per row: the row's own amax

// fp8_quant: q = E4M3(x · (1/s)) over rows of k, one block per row, s as
// mode says; scales[0] (per tensor) or scales[row] (FQ_ROW) receives s for
// the GEMM. FQ_SELF spares the amax kernel where the whole input is small
// (decode): each block reduces it from L2.
template <class T>
__device__ __forceinline__ void fp8_quant(const T *x, u8 *q, int rows, int k, const float *stat, const float *parts, int nparts, float *scales, int mode) {
	pdl_enter();
	const long long row = blockIdx.x;
	const T *xr = x + row * k;
	float s, m = 0.f;
	switch (mode) {
	case FQ_ROW:
		s = fp8_scale(block_max(amax_span(xr, k, threadIdx.x, blockDim.x)));
		break;
	case FQ_SELF:
		s = fp8_scale(block_max(amax_span(x, (long long)rows * k, threadIdx.x, blockDim.x)));
		break;
	case FQ_PARTS:
		for (int i = threadIdx.x; i < nparts; i += blockDim.x) m = fmaxf(m, parts[i]);
		s = fp8_scale(block_max(m));
		break;
	default:
		s = *stat;
	}
	const bool perRow = mode == FQ_ROW;
	if (threadIdx.x == 0 && (perRow || row == 0)) scales[perRow ? row : 0] = s;
	const float inv = __frcp_rn(s);
	u8 *qr = q + row * k;
	int done = 0;
	if ((k & 7) == 0 && (((unsigned long long)xr) & 15) == 0 && (((unsigned long long)qr) & 7) == 0) {
		// Eight values in, eight codes out (one 16-byte load, one 8-byte
		// store), encoded by e4m3x8: in hardware where the GPU has it, the
		// same codes as f32_to_e4m3's.
		const pack8 *v = (const pack8 *)xr;
		uint2 *o = (uint2 *)qr;
		for (int i = threadIdx.x; i < (k >> 3); i += blockDim.x) {
			const pack8 p = v[i];
			float f[8];
#pragma unroll
			for (int j = 0; j < 8; j++) f[j] = pack_get<T>(p, j);
			o[i] = e4m3x8(f, inv);
		}
		done = k;
	}
	for (int i = done + threadIdx.x; i < k; i += blockDim.x) qr[i] = (u8)f32_to_e4m3(__fmul_rn(to_f32(xr[i]), inv));
}
extern "C" __global__ void fp8_quant_f16(const f16 *x, u8 *q, int rows, int k, const float *stat, const float *parts, int nparts, float *scales, int mode) {
	fp8_quant<f16>(x, q, rows, k, stat, parts, nparts, scales, mode);
}
extern "C" __global__ void fp8_quant_bf16(const bf16 *x, u8 *q, int rows, int k, const float *stat, const float *parts, int nparts, float *scales, int mode) {
	fp8_quant<bf16>(x, q, rows, k, stat, parts, nparts, scales, mode);
}

// Random weights quantized per tensor (model.FP8GEMMs.QuantizeFP8 of a
// Random weight): the float32 values of random_fill (fill.cu), not their
// fp16/bf16 rounding, so that scale and codes are exactly what the CPU
// backend quantizes.
// Elements offset .. offset + n - 1 of the weight; the _at kernels take
// one expert of an Experts stack, quantized with a scale of its own (the
// CPU backend's QuantizeFP8 per expert), its nscales row scales all s.
__device__ __forceinline__ void random_amax(long long n, long long offset, u64 seed, float scale, u32 *amax) {
	pdl_enter();
	float m = 0.f;
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
		m = amax_acc(m, random_value(seed, offset + i, scale));
	m = block_max(m);
	if (threadIdx.x == 0) atomicMax(amax, __float_as_uint(m));
}

__device__ __forceinline__ void random_quant(u8 *q, long long n, long long offset, u64 seed, float scale, const u32 *amax,
	float *scaleOut, int nscales) {
	pdl_enter();
	const float s = fp8_scale(__uint_as_float(*amax));
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < nscales; i += (long long)gridDim.x * blockDim.x)
		scaleOut[i] = s;
	const float inv = __frcp_rn(s);
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
		q[i] = (u8)f32_to_e4m3(__fmul_rn(random_value(seed, offset + i, scale), inv));
}

extern "C" __global__ void fp8_random_amax(long long n, u64 seed, float scale, u32 *amax) {
	random_amax(n, 0, seed, scale, amax);
}
extern "C" __global__ void fp8_random_quant(u8 *q, long long n, u64 seed, float scale, const u32 *amax, float *scaleOut) {
	random_quant(q, n, 0, seed, scale, amax, scaleOut, 1);
}
extern "C" __global__ void fp8_random_amax_at(long long n, long long offset, u64 seed, float scale, u32 *amax) {
	random_amax(n, offset, seed, scale, amax);
}
extern "C" __global__ void fp8_random_quant_at(u8 *q, long long n, long long offset, u64 seed, float scale, const u32 *amax,
	float *scaleOut, int nscales) {
	random_quant(q, n, offset, seed, scale, amax, scaleOut, nscales);
}

// The scales of output (i, j): sx[i] or sx[0], sw[j] or sw[0].
__device__ __forceinline__ float out_scale(const float *sx, int sxRows, const float *sw, int swRows, int i, int j) {
	return sx[sxRows ? i : 0] * sw[swRows ? j : 0];
}

// fp8_gemv: Y[M, N] = (Xq[M, K] Wq[N, K]^T) · scales for M <= 8; one warp
// per output column, each lane 16 codes of the row at a time. K % 16 == 0.
template <class T>
__device__ __forceinline__ void fp8_gemv(const u8 *X, const u8 *W, T *Y, const float *sx, int sxRows, const float *sw, int swRows, int M, int N, int K) {
	__shared__ float lut[256];
	for (int c = threadIdx.x; c < 256; c += blockDim.x) lut[c] = e4m3_to_f32(c);
	pdl_enter();
	__syncthreads();
	const int lane = threadIdx.x & 31;
	const int j = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
	if (j >= N) return;
	float acc[8];
#pragma unroll
	for (int m = 0; m < 8; m++) acc[m] = 0.f;
	const uint4 *wr = (const uint4 *)(W + (long long)j * K);
	for (int c = lane; c < (K >> 4); c += 32) {
		uint4 wv = wr[c];
		const u32 ww[4] = {wv.x, wv.y, wv.z, wv.w};
		float wf[16];
#pragma unroll
		for (int e = 0; e < 16; e++) wf[e] = lut[(ww[e >> 2] >> ((e & 3) * 8)) & 0xffu];
#pragma unroll
		for (int m = 0; m < 8; m++) {
			if (m < M) {
				uint4 xv = ((const uint4 *)(X + (long long)m * K))[c];
				const u32 xx[4] = {xv.x, xv.y, xv.z, xv.w};
#pragma unroll
				for (int e = 0; e < 16; e++) acc[m] += lut[(xx[e >> 2] >> ((e & 3) * 8)) & 0xffu] * wf[e];
			}
		}
	}
#pragma unroll
	for (int m = 0; m < 8; m++) {
		if (m < M) {
			float v = warp_sum(acc[m]);
			if (lane == 0) Y[(long long)m * N + j] = from_f32<T>(v * out_scale(sx, sxRows, sw, swRows, m, j));
		}
	}
}
extern "C" __global__ void fp8_gemv_f16(const u8 *X, const u8 *W, f16 *Y, const float *sx, int sxRows, const float *sw, int swRows, int M, int N, int K) {
	fp8_gemv<f16>(X, W, Y, sx, sxRows, sw, swRows, M, N, K);
}
extern "C" __global__ void fp8_gemv_bf16(const u8 *X, const u8 *W, bf16 *Y, const float *sx, int sxRows, const float *sw, int swRows, int M, int N, int K) {
	fp8_gemv<bf16>(X, W, Y, sx, sxRows, sw, swRows, M, N, K);
}

// fp8_gemm: the same for any M, on 64 x 64 tiles of Y per 256-thread
// block, each thread 4 x 4 outputs, K in steps of 32 decoded into shared
// memory (k-major, so the inner loop reads rows of both). K % 16 == 0.
#define FG_BM 64
#define FG_BN 64
#define FG_BK 32
template <class T>
__device__ __forceinline__ void fp8_gemm(const u8 *X, const u8 *W, T *Y, const float *sx, int sxRows, const float *sw, int swRows, int M, int N, int K) {
	__shared__ float lut[256];
	__shared__ float As[FG_BK][FG_BM + 4], Bs[FG_BK][FG_BN + 4];
	for (int c = threadIdx.x; c < 256; c += blockDim.x) lut[c] = e4m3_to_f32(c);
	pdl_enter();
	const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
	const int i0 = blockIdx.y * FG_BM, j0 = blockIdx.x * FG_BN;
	// Loads: thread tid takes 8 consecutive codes (k) of row tid / 4.
	const int lr = tid >> 2, lk = (tid & 3) * 8;
	float acc[4][4];
#pragma unroll
	for (int a = 0; a < 4; a++)
#pragma unroll
		for (int b = 0; b < 4; b++) acc[a][b] = 0.f;
	for (int k0 = 0; k0 < K; k0 += FG_BK) {
		__syncthreads(); // the lut on the first step; the tiles' readers after
		{
			const int i = i0 + lr, j = j0 + lr, k = k0 + lk;
			uint2 xa = make_uint2(0, 0), wb = make_uint2(0, 0);
			if (i < M && k < K) xa = *(const uint2 *)(X + (long long)i * K + k);
			if (j < N && k < K) wb = *(const uint2 *)(W + (long long)j * K + k);
#pragma unroll
			for (int e = 0; e < 8; e++) {
				As[lk + e][lr] = lut[((e < 4 ? xa.x : xa.y) >> ((e & 3) * 8)) & 0xffu];
				Bs[lk + e][lr] = lut[((e < 4 ? wb.x : wb.y) >> ((e & 3) * 8)) & 0xffu];
			}
		}
		__syncthreads();
#pragma unroll 8
		for (int kk = 0; kk < FG_BK; kk++) {
			float a[4], b[4];
#pragma unroll
			for (int r = 0; r < 4; r++) a[r] = As[kk][ty * 4 + r];
#pragma unroll
			for (int c = 0; c < 4; c++) b[c] = Bs[kk][tx * 4 + c];
#pragma unroll
			for (int r = 0; r < 4; r++)
#pragma unroll
				for (int c = 0; c < 4; c++) acc[r][c] += a[r] * b[c];
		}
	}
#pragma unroll
	for (int r = 0; r < 4; r++) {
		const int i = i0 + ty * 4 + r;
		if (i >= M) continue;
#pragma unroll
		for (int c = 0; c < 4; c++) {
			const int j = j0 + tx * 4 + c;
			if (j < N) Y[(long long)i * N + j] = from_f32<T>(acc[r][c] * out_scale(sx, sxRows, sw, swRows, i, j));
		}
	}
}
extern "C" __global__ void __launch_bounds__(256) fp8_gemm_f16(const u8 *X, const u8 *W, f16 *Y, const float *sx, int sxRows, const float *sw, int swRows, int M, int N, int K) {
	fp8_gemm<f16>(X, W, Y, sx, sxRows, sw, swRows, M, N, K);
}
extern "C" __global__ void __launch_bounds__(256) fp8_gemm_bf16(const u8 *X, const u8 *W, bf16 *Y, const float *sx, int sxRows, const float *sw, int swRows, int M, int N, int K) {
	fp8_gemm<bf16>(X, W, Y, sx, sxRows, sw, swRows, M, N, K);
}
