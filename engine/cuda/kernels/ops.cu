// Small element-wise and row ops of the forward pass: the final residual
// add, gathering the rows that are sampled, and Qwen3's per-head qk-norm.
#include "common.cuh"

// add: dst[i] += src[i] over n8 16-byte chunks.
template <class T>
__device__ __forceinline__ void add(pack8 *dst, const pack8 *src, long long n8) {
	pdl_enter();
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n8; i += (long long)gridDim.x * blockDim.x) {
		pack8 a = dst[i], b = src[i];
#pragma unroll
		for (int e = 0; e < 8; e++) pack_set<T>(a, e, pack_get<T>(a, e) + pack_get<T>(b, e));
		dst[i] = a;
	}
}
extern "C" __global__ void add_f16(pack8 *dst, const pack8 *src, long long n8) { add<f16>(dst, src, n8); }
extern "C" __global__ void add_bf16(pack8 *dst, const pack8 *src, long long n8) { add<bf16>(dst, src, n8); }

// gather_rows: out[j] = x[rows[j]], cols8 chunks per row; one block per j.
extern "C" __global__ void gather_rows(pack8 *out, const pack8 *x, const int *rows, int cols8) {
	pdl_enter();
	long long src = rows[blockIdx.x];
	for (int i = threadIdx.x; i < cols8; i += blockDim.x) out[(long long)blockIdx.x * cols8 + i] = x[src * cols8 + i];
}

// head_norm: RMSNorm over D of each query head (scale qw) and key head
// (scale kw) of every token's fused QKV row, in place. One warp per head;
// blockIdx.x is the token.
template <class T>
__device__ __forceinline__ void head_norm(T *qkv, const T *qw, const T *kw, int H, int KV, int D, int W, float eps) {
	pdl_enter();
	int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	T *row = qkv + (long long)blockIdx.x * W;
	for (int h = warp; h < H + KV; h += blockDim.x >> 5) {
		T *x = row + (long long)h * D;
		const T *w = h < H ? qw : kw;
		float ss = 0.f;
		for (int d = lane; d < D; d += 32) {
			float v = to_f32(x[d]);
			ss += v * v;
		}
		float r = rsqrtf(warp_sum(ss) / (float)D + eps);
		for (int d = lane; d < D; d += 32) x[d] = from_f32<T>(to_f32(x[d]) * r * to_f32(w[d]));
	}
}
extern "C" __global__ void head_norm_f16(f16 *qkv, const f16 *qw, const f16 *kw, int H, int KV, int D, int W, float eps) {
	head_norm<f16>(qkv, qw, kw, H, KV, D, W, eps);
}
extern "C" __global__ void head_norm_bf16(bf16 *qkv, const bf16 *qw, const bf16 *kw, int H, int KV, int D, int W, float eps) {
	head_norm<bf16>(qkv, qw, kw, H, KV, D, W, eps);
}
