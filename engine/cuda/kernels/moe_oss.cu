// GPT-OSS's experts (engine/model/gptoss.go): what they add to the grouped
// MoE of kernels/moe_group.cu and moe_gemm.cu, run as plain grouped GEMMs
// (engine/cuda/moe_oss.go): the gate/up bias and the clamped SwiGLU
// between them, and the down bias after. Sorted row p (p < hdr[1]) holds
// pair order[p] = t*k + j, whose expert is idx[order[p]].
#include "common.cuh"

// moe_oss_glu: act[p][i] = glu(gu[p][i] + b[e][i], gu[p][F + i] + b[e][F + i])
// with glu(g, u) = (clamp(u, -limit, limit) + 1) * min(g, limit) *
// sigmoid(alpha * min(g, limit)), or silu(g) * u when limit is 0. bias may
// be null.
template <class T>
__device__ __forceinline__ void moe_oss_glu(T *act, const T *gu, const T *bias, const int *hdr, const int *order,
	const int *idx, int F, float limit, float alpha) {
	pdl_enter();
	const long long n = (long long)hdr[1] * F;
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
		const long long p = i / F;
		const int c = (int)(i - p * F);
		float g = to_f32(gu[p * 2 * F + c]), u = to_f32(gu[p * 2 * F + F + c]);
		if (bias) {
			const int a = order[p];
			if (a >= 0) {
				const long long e = idx[a];
				g += to_f32(bias[e * 2 * F + c]);
				u += to_f32(bias[e * 2 * F + F + c]);
			}
		}
		float o;
		if (limit > 0.f) {
			g = fminf(g, limit);
			u = fmaxf(fminf(u, limit), -limit);
			o = (u + 1.f) * g / (1.f + __expf(-alpha * g));
		} else {
			o = g / (1.f + __expf(-g)) * u;
		}
		act[i] = from_f32<T>(o);
	}
}

// moe_oss_row_bias: ys[p][c] += b[e][c], e the expert of sorted row p.
template <class T>
__device__ __forceinline__ void moe_oss_row_bias(T *ys, const T *bias, const int *hdr, const int *order, const int *idx,
	int H) {
	pdl_enter();
	const long long n = (long long)hdr[1] * H;
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
		const long long p = i / H;
		const int c = (int)(i - p * H), a = order[p];
		if (a >= 0) ys[i] = from_f32<T>(to_f32(ys[i]) + to_f32(bias[(long long)idx[a] * H + c]));
	}
}

#define MOE_OSS(T)                                                                                                     \
	extern "C" __global__ void moe_oss_glu_##T(T *act, const T *gu, const T *bias, const int *hdr, const int *order,   \
		const int *idx, int F, float limit, float alpha) {                                                             \
		moe_oss_glu<T>(act, gu, bias, hdr, order, idx, F, limit, alpha);                                               \
	}                                                                                                                  \
	extern "C" __global__ void moe_oss_row_bias_##T(T *ys, const T *bias, const int *hdr, const int *order,            \
		const int *idx, int H) {                                                                                       \
		moe_oss_row_bias<T>(ys, bias, hdr, order, idx, H);                                                             \
	}
MOE_OSS(f16)
MOE_OSS(bf16)
