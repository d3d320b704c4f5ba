// bias_add: x[r][c] += bias[c] for the rows of x (GPT-OSS's q/k/v, o and
// router biases). Element-wise, in float32, rounded once.
#include "common.cuh"

template <class T>
__device__ __forceinline__ void bias_add(T *x, const T *bias, long long n, int cols) {
	pdl_enter();
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
		x[i] = from_f32<T>(to_f32(x[i]) + to_f32(bias[i % cols]));
}
extern "C" __global__ void bias_add_f16(f16 *x, const f16 *bias, long long n, int cols) { bias_add<f16>(x, bias, n, cols); }
extern "C" __global__ void bias_add_bf16(bf16 *x, const bf16 *bias, long long n, int cols) {
	bias_add<bf16>(x, bias, n, cols);
}
