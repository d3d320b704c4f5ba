// SwiGLU: out[t, i] = silu(gate[t, i]) * up[t, i], silu(g) = g / (1 + e^-g).
// gate and up rows are ld elements apart, so they can be the two halves of
// one fused gate_up projection (ld = 2F) or separate buffers (ld = F).
#include "common.cuh"
#include "swiglu.cuh"

// The grid's x spans a row's 16-byte chunks and y the rows (striding past
// gridDim.y): no division per chunk, where a flat index's 64-bit one cost
// about as many instructions as SwiGLU itself.
template <class T>
__device__ __forceinline__ void swiglu(pack8 *out, const T *gate, const T *up, int rows, int F, long long ld) {
	pdl_enter();
	const int f8 = F / 8, c = blockIdx.x * blockDim.x + threadIdx.x;
	if (c >= f8) return;
	for (long long r = blockIdx.y; r < rows; r += gridDim.y) {
		pack8 g = *(const pack8 *)(gate + r * ld + c * 8);
		pack8 u = *(const pack8 *)(up + r * ld + c * 8);
		out[r * f8 + c] = swiglu8<T>(g, u);
	}
}

extern "C" __global__ void swiglu_f16(pack8 *out, const f16 *gate, const f16 *up, int rows, int F, long long ld) {
	swiglu<f16>(out, gate, up, rows, F, ld);
}
extern "C" __global__ void swiglu_bf16(pack8 *out, const bf16 *gate, const bf16 *up, int rows, int F, long long ld) {
	swiglu<bf16>(out, gate, up, rows, F, ld);
}
