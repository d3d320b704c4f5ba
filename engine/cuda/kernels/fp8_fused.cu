// FP8 GEMM inputs quantized by the kernel that produces them (dtype fp8
// with a static per-tensor input scale: a checkpoint's input_scale, or one
// calibrated at load), as TensorRT-LLM fuses the quantization into RMSNorm
// and SwiGLU: the E4M3 codes are written instead of the fp16/bf16 output,
// which the GEMM would only have read to quantize it.
//
//   fp8_rmsnorm:     q = E4M3(RMSNorm(x) * w · (1/s))
//   fp8_add_rmsnorm: residual += x (written back), then q as above of it
//   fp8_swiglu:      q = E4M3(silu(gate) * up · (1/s))
//
// s is the float32 the scale pointer holds. The codes are bit for bit
// those of the unfused path, the plain kernel (rmsnorm.cu, swiglu.cu) then
// fp8_quant's static mode (fp8.cu): the value is computed by the same code
// (rmsnorm.cuh, swiglu.cuh; the norms with the plain kernel's block size,
// so the sum of squares is added up in the same order) and rounded to T,
// as the unfused path stores it, and that T value is what gets quantized,
// times the reciprocal rounded once (__frcp_rn), encoded by f32_to_e4m3.
// Quantizing the unrounded float32 instead would differ from the unfused
// path wherever T's rounding crosses an E4M3 rounding boundary.
#include "common.cuh"
#include "fp8.cuh"
#include "rmsnorm.cuh"
#include "swiglu.cuh"

// e4m3_pack8 is the 8 codes of a chunk of T values times inv: fp8_quant's
// arithmetic, the first code in the low byte.
template <class T> __device__ __forceinline__ uint2 e4m3_pack8(const pack8 &p, float inv) {
	float f[8];
#pragma unroll
	for (int e = 0; e < 8; e++) f[e] = pack_get<T>(p, e);
	return e4m3x8(f, inv);
}

// store_codes writes a chunk of the normalised row as 8 codes (one 8-byte
// store; the row's codes start at a multiple of 8 bytes since hidden is).
template <class T> struct store_codes {
	uint2 *q;
	float inv;
	__device__ __forceinline__ void operator()(int i, const pack8 &o) const { q[i] = e4m3_pack8<T>(o, inv); }
};

// fp8_rmsnorm: one block per row, the block size rmsnorm.cu's
// (rmsnormBlock); q is [rows, hidden] codes.
template <class T, bool ADD>
__device__ __forceinline__ void fp8_rmsnorm(u8 *q, pack8 *residual, const pack8 *x, const pack8 *w, int hidden, float eps,
	const float *scale) {
	pdl_enter();
	const store_codes<T> st{(uint2 *)(q + blockIdx.x * (long long)hidden), __frcp_rn(*scale)};
	rmsnorm_row<T, ADD>(residual, x, w, hidden, eps, st);
}

extern "C" __global__ void fp8_rmsnorm_f16(u8 *q, const pack8 *x, const pack8 *w, int hidden, float eps, const float *scale) {
	fp8_rmsnorm<f16, false>(q, nullptr, x, w, hidden, eps, scale);
}
extern "C" __global__ void fp8_rmsnorm_bf16(u8 *q, const pack8 *x, const pack8 *w, int hidden, float eps, const float *scale) {
	fp8_rmsnorm<bf16, false>(q, nullptr, x, w, hidden, eps, scale);
}
extern "C" __global__ void fp8_add_rmsnorm_f16(u8 *q, pack8 *residual, const pack8 *x, const pack8 *w, int hidden, float eps,
	const float *scale) {
	fp8_rmsnorm<f16, true>(q, residual, x, w, hidden, eps, scale);
}
extern "C" __global__ void fp8_add_rmsnorm_bf16(u8 *q, pack8 *residual, const pack8 *x, const pack8 *w, int hidden, float eps,
	const float *scale) {
	fp8_rmsnorm<bf16, true>(q, residual, x, w, hidden, eps, scale);
}

// fp8_swiglu: q[r, i] for r < rows, i < F, codes [rows, F]; gate and up
// rows ld elements apart, as swiglu.cu (its grid too): 16-byte loads of
// each, an 8-byte store of 8 codes.
template <class T>
__device__ __forceinline__ void fp8_swiglu(u8 *q, const T *gate, const T *up, int rows, int F, long long ld, const float *scale) {
	pdl_enter();
	const float inv = __frcp_rn(*scale);
	const int f8 = F / 8, c = blockIdx.x * blockDim.x + threadIdx.x;
	if (c >= f8) return;
	uint2 *out = (uint2 *)q;
	for (long long r = blockIdx.y; r < rows; r += gridDim.y) {
		pack8 g = *(const pack8 *)(gate + r * ld + c * 8);
		pack8 u = *(const pack8 *)(up + r * ld + c * 8);
		out[r * f8 + c] = e4m3_pack8<T>(swiglu8<T>(g, u), inv);
	}
}

extern "C" __global__ void fp8_swiglu_f16(u8 *q, const f16 *gate, const f16 *up, int rows, int F, long long ld, const float *scale) {
	fp8_swiglu<f16>(q, gate, up, rows, F, ld, scale);
}
extern "C" __global__ void fp8_swiglu_bf16(u8 *q, const bf16 *gate, const bf16 *up, int rows, int F, long long ld, const float *scale) {
	fp8_swiglu<bf16>(q, gate, up, rows, F, ld, scale);
}
