// DeepSeek-V3's grouped sigmoid routing (RoutingSigmoidGroupTopK*), as
// engine/cpu's groupRouteRow computes it, one warp per token row (experts
// lane + 32 i, so E <= 32 * RG_PER_LANE):
//   score = sigmoid(logit); choice = score + correction bias (the choice
//   only); each group's score is the sum of its two best choices (its one
//   for groups of one expert); the topk_group best groups are kept (lowest
//   group index among equals); the k best choices of their experts, largest
//   first, lowest index among equals; weights the unbiased scores of the
//   chosen, renormalised (sum + 1e-20) when renorm, times scale.
//
// Forced routing (route_grouped_forced_*): the experts come from the table
// the model filled (perfect / uniform / zipf), slot j weighted fw[j] (the
// method's weights for the replacement logits), with moe_route's drift of
// the window start under graph replay.
//
// Padding rows of a decode graph bucket (slot == pad_slot) get expert -1
// and weight 0 and are not counted; counts gets one per routed pair.
#include "common.cuh"

#define RG_PER_LANE 8

// rg_better: larger value first, lower index among equals, NaN last: one
// total order, so every lane of a butterfly ends with the same pair.
__device__ __forceinline__ bool rg_better(float v, int i, float bv, int bi) {
	if (bi < 0) return true;
	bool vn = v != v, bn = bv != bv;
	if (vn != bn) return bn;
	if (!vn && v != bv) return v > bv;
	return i < bi;
}

__device__ __forceinline__ bool rg_counted(const int *slot, int pad_slot, int r) {
	return slot == nullptr || slot[r] != pad_slot;
}

__device__ __forceinline__ void rg_flush(int *hist, int *counts, int E) {
	__syncthreads();
	if (counts)
		for (int e = threadIdx.x; e < E; e += blockDim.x)
			if (hist[e]) atomicAdd(counts + e, hist[e]);
}

template <class T>
__device__ __forceinline__ void route_grouped(const T *logits, const T *bias, int *idx, T *wts, int *counts,
	const int *slot, int pad_slot, int rows, int E, int G, int topkg, int k, int renorm, float scale) {
	pdl_enter();
	extern __shared__ int hist[];                   // [E]
	float *choice_s = (float *)(hist + E);           // [warps][E]
	for (int e = threadIdx.x; e < E; e += blockDim.x) hist[e] = 0;
	__syncthreads();
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
	const int epg = E / G;
	float *ch = choice_s + warp * E;
	for (int r = blockIdx.x * warps + warp; r < rows; r += gridDim.x * warps) {
		int *ri = idx + (long long)r * k;
		T *rw = wts + (long long)r * k;
		if (!rg_counted(slot, pad_slot, r)) {
			for (int j = lane; j < k; j += 32) {
				ri[j] = -1;
				rw[j] = from_f32<T>(0.f);
			}
			continue;
		}
		float sc[RG_PER_LANE], cv[RG_PER_LANE];
#pragma unroll
		for (int i = 0; i < RG_PER_LANE; i++) {
			int e = lane + 32 * i;
			sc[i] = 0.f;
			cv[i] = 0.f;
			if (e < E) {
				sc[i] = 1.f / (1.f + expf(-to_f32(logits[(long long)r * E + e])));
				cv[i] = sc[i] + to_f32(bias[e]);
				ch[e] = cv[i];
			}
		}
		__syncwarp();
		// Lane g scores group g, in expert order as the CPU does.
		float gs = -__int_as_float(0x7f800000);
		if (lane < G) {
			float first = gs, second = gs;
			for (int e = lane * epg; e < (lane + 1) * epg; e++) {
				float v = ch[e];
				if (v > first) {
					second = first;
					first = v;
				} else if (v > second) {
					second = v;
				}
			}
			if (epg == 1) second = 0.f;
			gs = first + second;
		}
		__syncwarp();
		// The kept groups: topkg rounds of an argmax over the lanes.
		unsigned kept = 0;
		for (int j = 0; j < topkg; j++) {
			float bv = 0.f;
			int bi = -1;
			if (lane < G && !(kept >> lane & 1u)) {
				bv = gs;
				bi = lane;
			}
#pragma unroll
			for (int o = 16; o > 0; o >>= 1) {
				float ov = __shfl_xor_sync(0xffffffffu, bv, o);
				int oi = __shfl_xor_sync(0xffffffffu, bi, o);
				if (oi >= 0 && rg_better(ov, oi, bv, bi)) {
					bv = ov;
					bi = oi;
				}
			}
			if (bi >= 0) kept |= 1u << bi;
		}
		// The k experts: rounds of a warp-wide argmax over kept groups.
		unsigned taken = 0;
		float sels = 0.f;
		int sele = -1;
		for (int j = 0; j < k; j++) {
			float bv = 0.f;
			int bi = -1;
#pragma unroll
			for (int i = 0; i < RG_PER_LANE; i++) {
				int e = lane + 32 * i;
				if (e < E && (kept >> (e / epg) & 1u) && !(taken >> i & 1u) && rg_better(cv[i], e, bv, bi)) {
					bv = cv[i];
					bi = e;
				}
			}
#pragma unroll
			for (int o = 16; o > 0; o >>= 1) {
				float ov = __shfl_xor_sync(0xffffffffu, bv, o);
				int oi = __shfl_xor_sync(0xffffffffu, bi, o);
				if (oi >= 0 && rg_better(ov, oi, bv, bi)) {
					bv = ov;
					bi = oi;
				}
			}
			float s = 0.f;
#pragma unroll
			for (int i = 0; i < RG_PER_LANE; i++)
				if (bi == lane + 32 * i) s = sc[i];
			s = __shfl_sync(0xffffffffu, s, bi & 31);
			if (bi >= 0 && (bi & 31) == lane) taken |= 1u << (bi >> 5);
			if (lane == j) {
				sels = s;
				sele = bi;
			}
		}
		// The sum in slot order, as the CPU adds them.
		float sum = 0.f;
		for (int j = 0; j < k; j++) sum += __shfl_sync(0xffffffffu, sels, j);
		if (lane < k) {
			float w = sels;
			if (renorm) w /= sum + 1e-20f;
			ri[lane] = sele;
			rw[lane] = from_f32<T>(w * scale);
			if (sele >= 0) atomicAdd(hist + sele, 1);
		}
		__syncwarp(); // ch is rewritten by the next row
	}
	rg_flush(hist, counts, E);
}

template <class T>
__device__ __forceinline__ void route_grouped_forced(const int *table, int row, unsigned *drift, int period,
	const float *fw, int *idx, T *wts, int *counts, const int *slot, int pad_slot, int rows, int E, int k) {
	pdl_enter();
	extern __shared__ int hist[];
	for (int e = threadIdx.x; e < E; e += blockDim.x) hist[e] = 0;
	unsigned state = 0;
	if (drift && period > 0) {
		state = *drift;
		row = (int)(((unsigned long long)row + (state >> 1)) % (unsigned long long)period);
	}
	__syncthreads();
	const long long n = (long long)rows * k;
	for (long long i = threadIdx.x; i < n; i += blockDim.x) {
		int r = (int)(i / k), j = (int)(i - (long long)r * k);
		if (!rg_counted(slot, pad_slot, r)) {
			idx[i] = -1;
			wts[i] = from_f32<T>(0.f);
			continue;
		}
		int e = table[(long long)row * k + i];
		idx[i] = e;
		wts[i] = from_f32<T>(fw[j]);
		if (e >= 0 && e < E) atomicAdd(hist + e, 1);
	}
	rg_flush(hist, counts, E);
	if (drift && period > 0 && threadIdx.x == 0) *drift = state * 1664525u + 1013904223u;
}

#define ROUTE_GROUPED(T)                                                                                               \
	extern "C" __global__ void route_grouped_##T(const T *logits, const T *bias, int *idx, T *wts, int *counts,        \
		const int *slot, int pad_slot, int rows, int E, int G, int topkg, int k, int renorm, float scale) {            \
		route_grouped<T>(logits, bias, idx, wts, counts, slot, pad_slot, rows, E, G, topkg, k, renorm, scale);         \
	}                                                                                                                  \
	extern "C" __global__ void route_grouped_forced_##T(const int *table, int row, unsigned *drift, int period,         \
		const float *fw, int *idx, T *wts, int *counts, const int *slot, int pad_slot, int rows, int E, int k) {       \
		route_grouped_forced<T>(table, row, drift, period, fw, idx, wts, counts, slot, pad_slot, rows, E, k);          \
	}
ROUTE_GROUPED(f16)
ROUTE_GROUPED(bf16)
