// Rotary position embedding, Hugging Face's rotate-half form: dimension i of
// a head pairs with i + D/2. In place on q [tokens, qHeads, D] and
// k [tokens, kvHeads, D], each with its own row stride (in elements) so that
// they may live inside a fused QKV buffer. inv_freq [D/2] is computed on the
// host, which is where default, llama3 and yarn scaling differ; scale
// multiplies cos and sin (yarn's attention factor, 1 otherwise).
#include "common.cuh"

template <class T>
__device__ __forceinline__ void rope(T *q, T *k, const int *pos, const float *inv_freq,
	int qHeads, int kvHeads, int D, long long qStride, long long kStride, float scale) {
	int t = blockIdx.x;
	int half = D / 2;
	int pairs = (qHeads + kvHeads) * half;
	float p = (float)pos[t];
	for (int j = threadIdx.x; j < pairs; j += blockDim.x) {
		int h = j / half, i = j - h * half;
		T *base = h < qHeads ? q + t * qStride + (long long)h * D : k + t * kStride + (long long)(h - qHeads) * D;
		// The angle is rounded to float32 before cos/sin, as in the reference.
		float a = p * inv_freq[i];
		float s, c;
		sincosf(a, &s, &c);
		c *= scale;
		s *= scale;
		float x0 = to_f32(base[i]), x1 = to_f32(base[i + half]);
		base[i] = from_f32<T>(x0 * c - x1 * s);
		base[i + half] = from_f32<T>(x1 * c + x0 * s);
	}
}

extern "C" __global__ void rope_f16(f16 *q, f16 *k, const int *pos, const float *inv_freq,
	int qHeads, int kvHeads, int D, long long qStride, long long kStride, float scale) {
	rope<f16>(q, k, pos, inv_freq, qHeads, kvHeads, D, qStride, kStride, scale);
}
extern "C" __global__ void rope_bf16(bf16 *q, bf16 *k, const int *pos, const float *inv_freq,
	int qHeads, int kvHeads, int D, long long qStride, long long kStride, float scale) {
	rope<bf16>(q, k, pos, inv_freq, qHeads, kvHeads, D, qStride, kStride, scale);
}
