// MoE routing: each token's k experts and their weights, and the per-expert
// token counts of one layer (the expert-load statistics).
//
// Learned routing (moe_route_*): one warp per token row; the logits of a row
// are spread over the lanes (expert lane + 32 i), so E <= 32 * MOE_ROUTE_PER_LANE.
// The k experts are chosen by k rounds of a warp-wide argmax, largest first,
// the lowest expert index first among equal logits: exactly engine/cpu's
// topK. Selection is done on the logits for every method (softmax is
// monotonic, so it picks what selecting on the probabilities picks, except
// where two different logits round to one probability: a tie the checks
// treat as such). Weights, by method:
//   0 softmax-topk-renorm (Mixtral): softmax over all experts, the k chosen
//     probabilities renormalised to sum to 1;
//   1 topk-softmax (GPT-OSS, Qwen3-MoE): softmax over the k chosen logits;
//   2 softmax-topk: the chosen probabilities as they are.
//
// Forced routing (moe_route_forced_*): the experts come from a table the
// model filled (perfect / uniform / zipf), each with weight 1/k.
//
// Padding rows of a decode graph bucket (slot == pad_slot) get expert -1
// and weight 0: they are not counted and the expert GEMMs skip them, so the
// load and the expert work are the real tokens' only.
#include "common.cuh"

#define MOE_ROUTE_PER_LANE 8

// Programmatic dependent launch: wait for the kernel before (its writes
// visible), then let the next one be scheduled. Spelled out here rather than
// taken from common.cuh so this family does not depend on when that header
// gained it.
__device__ __forceinline__ void moe_pdl_enter() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.wait;" ::: "memory");
	asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// moe_better orders (value, index) pairs: larger value first, then lower
// index; NaN after every number (a strict total order, so every lane of a
// butterfly reduction ends with the same pair).
__device__ __forceinline__ bool moe_better(float v, int i, float bv, int bi) {
	if (bi < 0) return true;
	bool vn = v != v, bn = bv != bv;
	if (vn != bn) return bn;
	if (!vn && v != bv) return v > bv;
	return i < bi;
}

__device__ __forceinline__ bool moe_counted(const int *slot, int pad_slot, int r) {
	return slot == nullptr || slot[r] != pad_slot;
}

// hist is the block's shared histogram; flushed to counts once per block.
__device__ __forceinline__ void moe_hist_flush(int *hist, int *counts, int E) {
	__syncthreads();
	if (counts)
		for (int e = threadIdx.x; e < E; e += blockDim.x)
			if (hist[e]) atomicAdd(counts + e, hist[e]);
}

template <class T>
__device__ __forceinline__ void moe_route(const T *logits, int *idx, T *wts, int *counts, const int *slot, int pad_slot,
	int rows, int E, int k, int method) {
	moe_pdl_enter();
	extern __shared__ int hist[];
	for (int e = threadIdx.x; e < E; e += blockDim.x) hist[e] = 0;
	__syncthreads();
	const int lane = threadIdx.x & 31;
	const int warps = blockDim.x >> 5;
	for (int r = blockIdx.x * warps + (threadIdx.x >> 5); r < rows; r += gridDim.x * warps) {
		int *ri = idx + (long long)r * k;
		T *rw = wts + (long long)r * k;
		if (!moe_counted(slot, pad_slot, r)) {
			for (int j = lane; j < k; j += 32) {
				ri[j] = -1;
				rw[j] = from_f32<T>(0.f);
			}
			continue;
		}
		float v[MOE_ROUTE_PER_LANE];
		float mx = -__int_as_float(0x7f800000);
#pragma unroll
		for (int i = 0; i < MOE_ROUTE_PER_LANE; i++) {
			int e = lane + 32 * i;
			v[i] = e < E ? to_f32(logits[(long long)r * E + e]) : -__int_as_float(0x7f800000);
			mx = fmaxf(mx, v[i]);
		}
#pragma unroll
		for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
		float sum = 0.f;
		if (method != 1) {
#pragma unroll
			for (int i = 0; i < MOE_ROUTE_PER_LANE; i++)
				if (lane + 32 * i < E) sum += expf(v[i] - mx);
			sum = warp_sum(sum);
		}
		unsigned taken = 0; // bit i: expert lane + 32 i already chosen
		float selv = 0.f;   // lane j < k keeps the j-th chosen logit
		int sele = -1;
		for (int j = 0; j < k; j++) {
			float bv = 0.f;
			int bi = -1;
#pragma unroll
			for (int i = 0; i < MOE_ROUTE_PER_LANE; i++) {
				int e = lane + 32 * i;
				if (e < E && !(taken >> i & 1u) && moe_better(v[i], e, bv, bi)) {
					bv = v[i];
					bi = e;
				}
			}
#pragma unroll
			for (int o = 16; o > 0; o >>= 1) {
				float ov = __shfl_xor_sync(0xffffffffu, bv, o);
				int oi = __shfl_xor_sync(0xffffffffu, bi, o);
				if (oi >= 0 && moe_better(ov, oi, bv, bi)) {
					bv = ov;
					bi = oi;
				}
			}
			if ((bi & 31) == lane) taken |= 1u << (bi >> 5);
			if (lane == j) {
				selv = bv;
				sele = bi;
			}
		}
		// Lane j < k holds choice j; weights as engine/cpu computes them.
		float w = 0.f;
		if (lane < k) w = method == 1 ? expf(selv - mx) : expf(selv - mx) / sum;
		float wsum = warp_sum(w);
		if (lane < k) {
			if (method != 2) w /= wsum;
			ri[lane] = sele;
			rw[lane] = from_f32<T>(w);
			atomicAdd(hist + sele, 1);
		}
	}
	moe_hist_flush(hist, counts, E);
}

// Forced routing. With drift (a graph replays this launch with the row it
// was captured with), the window start moves on the device instead: the
// cell is advanced by a linear congruential step on every launch and the
// start is (row + state) mod period. One block, so the cell is read before
// and written after every use.
template <class T>
__device__ __forceinline__ void moe_route_forced(const int *table, int row, unsigned *drift, int period, int *idx, T *wts,
	int *counts, const int *slot, int pad_slot, int rows, int E, int k) {
	moe_pdl_enter();
	extern __shared__ int hist[];
	for (int e = threadIdx.x; e < E; e += blockDim.x) hist[e] = 0;
	unsigned state = 0;
	if (drift && period > 0) {
		state = *drift;
		row = (int)(((unsigned long long)row + (state >> 1)) % (unsigned long long)period);
	}
	__syncthreads();
	const T w = from_f32<T>(1.f / (float)k);
	const long long n = (long long)rows * k;
	for (long long i = threadIdx.x; i < n; i += blockDim.x) {
		int r = (int)(i / k);
		if (!moe_counted(slot, pad_slot, r)) {
			idx[i] = -1;
			wts[i] = from_f32<T>(0.f);
			continue;
		}
		int e = table[(long long)row * k + i];
		idx[i] = e;
		wts[i] = w;
		if (e >= 0 && e < E) atomicAdd(hist + e, 1);
	}
	moe_hist_flush(hist, counts, E);
	if (drift && period > 0 && threadIdx.x == 0) *drift = state * 1664525u + 1013904223u;
}

#define MOE_ROUTE(T)                                                                                                   \
	extern "C" __global__ void moe_route_##T(const T *logits, int *idx, T *wts, int *counts, const int *slot,          \
		int pad_slot, int rows, int E, int k, int method) {                                                            \
		moe_route<T>(logits, idx, wts, counts, slot, pad_slot, rows, E, k, method);                                    \
	}                                                                                                                  \
	extern "C" __global__ void moe_route_forced_##T(const int *table, int row, unsigned *drift, int period, int *idx,  \
		T *wts, int *counts, const int *slot, int pad_slot, int rows, int E, int k) {                                   \
		moe_route_forced<T>(table, row, drift, period, idx, wts, counts, slot, pad_slot, rows, E, k);                  \
	}
MOE_ROUTE(f16)
MOE_ROUTE(bf16)
