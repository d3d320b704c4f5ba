// Device-side random fill for benchmarks: uniform in [lo, hi) from a hash of
// (seed, index), so large operands need no host upload and differ per seed.
#include "common.cuh"

__device__ __forceinline__ u64 splitmix64(u64 x) {
	x += 0x9E3779B97F4A7C15ull;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

template <class T>
__device__ __forceinline__ void fill_uniform(T *out, long long n, u64 seed, float lo, float hi) {
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
		float u = (float)(splitmix64(seed ^ (u64)i * 0xD6E8FEB86659FD93ull) >> 40) * (1.f / 16777216.f);
		out[i] = from_f32<T>(lo + (hi - lo) * u);
	}
}

extern "C" __global__ void fill_uniform_f16(f16 *out, long long n, u64 seed, float lo, float hi) {
	fill_uniform<f16>(out, n, seed, lo, hi);
}
extern "C" __global__ void fill_uniform_bf16(bf16 *out, long long n, u64 seed, float lo, float hi) {
	fill_uniform<bf16>(out, n, seed, lo, hi);
}
