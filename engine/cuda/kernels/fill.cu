// Random weights on the device, bit for bit the values of model.RandomValue:
// element i of weight (seed, scale) is uniform in [-scale, scale) from
// splitmix64(seed ^ splitmix64(i)), so every backend builds the same model
// where the weight lives, with no host upload. Also fills benchmark operands.
#include "common.cuh"

template <class T>
__device__ __forceinline__ void random_fill(T *out, long long n, u64 seed, long long offset, float scale) {
	pdl_enter();
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
		out[i] = from_f32<T>(random_value(seed, offset + i, scale));
	}
}

extern "C" __global__ void random_fill_f16(f16 *out, long long n, u64 seed, long long offset, float scale) {
	random_fill<f16>(out, n, seed, offset, scale);
}
extern "C" __global__ void random_fill_bf16(bf16 *out, long long n, u64 seed, long long offset, float scale) {
	random_fill<bf16>(out, n, seed, offset, scale);
}

// A slice of a random weight (a split model's shard) where it lives: rows
// rows of cols elements, row r being the full weight's elements from
// src + r * stride, so a rank never builds its share on the host.
template <class T>
__device__ __forceinline__ void random_fill_rows(T *out, long long rows, long long cols, u64 seed, long long src, long long stride,
                                                 float scale) {
	pdl_enter();
	const long long n = rows * cols;
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
		const long long r = i / cols;
		out[i] = from_f32<T>(random_value(seed, src + r * stride + (i - r * cols), scale));
	}
}

extern "C" __global__ void random_fill_rows_f16(f16 *out, long long rows, long long cols, u64 seed, long long src, long long stride,
                                                float scale) {
	random_fill_rows<f16>(out, rows, cols, seed, src, stride, scale);
}
extern "C" __global__ void random_fill_rows_bf16(bf16 *out, long long rows, long long cols, u64 seed, long long src, long long stride,
                                                 float scale) {
	random_fill_rows<bf16>(out, rows, cols, seed, src, stride, scale);
}
