// Random weights on the device, bit for bit the values of model.RandomValue:
// element i of weight (seed, scale) is uniform in [-scale, scale) from
// splitmix64(seed ^ splitmix64(i)), so every backend builds the same model
// where the weight lives, with no host upload. Also fills benchmark operands.
#include "common.cuh"

__device__ __forceinline__ u64 splitmix64(u64 x) {
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

template <class T>
__device__ __forceinline__ void random_fill(T *out, long long n, u64 seed, long long offset, float scale) {
	pdl_enter();
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
		u64 r = splitmix64(seed ^ splitmix64((u64)(offset + i)));
		float u = (float)(r >> 40) * (1.f / 16777216.f); // exact: 24 bits
		// 2u - 1 is exact too, so the product is the one rounding, as in Go.
		out[i] = from_f32<T>(__fmul_rn(2.f * u - 1.f, scale));
	}
}

extern "C" __global__ void random_fill_f16(f16 *out, long long n, u64 seed, long long offset, float scale) {
	random_fill<f16>(out, n, seed, offset, scale);
}
extern "C" __global__ void random_fill_bf16(bf16 *out, long long n, u64 seed, long long offset, float scale) {
	random_fill<bf16>(out, n, seed, offset, scale);
}
