// Rotary position embedding, Hugging Face's rotate-half form: dimension i of
// a head pairs with i + D/2. In place on q [tokens, qHeads, D] and
// k [tokens, kvHeads, D], each with its own row stride (in elements) so that
// both can live inside a fused QKV row. The angles come from a float32 table
// [positions, D] (model.RopeTable): cos in the first half, sin in the second,
// already scaled; default, llama3 and yarn scaling differ only in the table.
#include "common.cuh"

template <class T>
__device__ __forceinline__ void rope(T *q, T *k, const int *pos, const float *table,
	int qHeads, int kvHeads, int D, long long qStride, long long kStride) {
	pdl_enter();
	int t = blockIdx.x;
	int half = D / 2;
	int pairs = (qHeads + kvHeads) * half;
	const float *tab = table + (long long)pos[t] * D;
	for (int j = threadIdx.x; j < pairs; j += blockDim.x) {
		int h = j / half, i = j - h * half;
		T *base = h < qHeads ? q + t * qStride + (long long)h * D : k + t * kStride + (long long)(h - qHeads) * D;
		float c = tab[i], s = tab[half + i];
		float x0 = to_f32(base[i]), x1 = to_f32(base[i + half]);
		base[i] = from_f32<T>(x0 * c - x1 * s);
		base[i + half] = from_f32<T>(x1 * c + x0 * s);
	}
}

extern "C" __global__ void rope_f16(f16 *q, f16 *k, const int *pos, const float *table,
	int qHeads, int kvHeads, int D, long long qStride, long long kStride) {
	rope<f16>(q, k, pos, table, qHeads, kvHeads, D, qStride, kStride);
}
extern "C" __global__ void rope_bf16(bf16 *q, bf16 *k, const int *pos, const float *table,
	int qHeads, int kvHeads, int D, long long qStride, long long kStride) {
	rope<bf16>(q, k, pos, table, qHeads, kvHeads, D, qStride, kStride);
}
