// GPT-OSS's attention (engine/model/gptoss.go): attention sinks and
// sliding windows, over a ring KV cache.
//
// Cache layout per layer: K and V apart, each [slot][kv head][lcap][D] with
// position p at p % lcap, lcap the layer's capacity (its window on a
// sliding layer). The layer's keys of positions before the sequence's
// first new token come from the cache, the batch's own from the fused QKV
// rows; the batch's keys and values are written to the ring afterwards
// (kv_ring_write), so a chunk longer than the window overwrites nothing it
// still needs.
//
// attn_sinks: block (item, query head), one warp per token of the item
// (the batch layout's attention items: first row, tokens, slot, position of
// the first row). Each lane holds D/32 dimensions of the query and of the
// output; positions lo..p go by one at a time, the score summed over the
// warp, with a running (online) softmax in fp32 whose denominator starts
// at the sink's exp(sink - m) instead of 0. Padding rows (slot = the
// scratch slot) compute garbage nobody reads.
#include "common.cuh"

#define SINK_MAX_EPL 8 // D <= 256

template <class T>
__device__ __forceinline__ void attn_sinks(T *out, const T *qkv, const T *kc, const T *vc, const T *sinks,
	const int4 *itemsS, int nS, const int4 *itemsL, int nL, int H, int KV, int D, int W, int lcap, int window,
	float scale) {
	pdl_enter();
	const int it = blockIdx.x, h = blockIdx.y;
	const bool small = it < nS;
	const int4 *items = small ? itemsS : itemsL;
	const int ii = small ? it : it - nS;
	if (ii >= (small ? nS : nL)) return;
	const int4 item = items[ii];
	const int first = item.x, ntok = item.y, slot = item.z, ipast = item.w;
	// The sequence's first new position: a prefill chunk split over
	// adjacent large items starts at the earliest of them. The backend
	// lays a sequence's items out last first (pack.go), so its earlier
	// chunks follow this one; the items before it are searched too, for a
	// layout first to last.
	int past = ipast;
	if (!small) {
		int f = first;
		for (int dir = -1; dir <= 1; dir += 2) {
			for (int j = ii + dir; j >= 0 && j < nL; j += dir) {
				int4 pr = items[j];
				if (pr.z != slot || pr.x + pr.y != f || pr.w + pr.y != past) break;
				f = pr.x;
				past = pr.w;
			}
		}
	}
	const int G = H / KV, kh = h / G;
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
	const int epl = (D + 31) / 32; // lane + 32 e < D
	const T *kbase = kc + ((long long)slot * KV + kh) * lcap * D;
	const T *vbase = vc + ((long long)slot * KV + kh) * lcap * D;
	const float sink = sinks ? to_f32(sinks[h]) : 0.f;
	for (int t = warp; t < ntok; t += nw) {
		const int row = first + t, p = ipast + t;
		const int lo = window > 0 ? max(0, p - window + 1) : 0;
		float q[SINK_MAX_EPL], acc[SINK_MAX_EPL];
		const T *qr = qkv + (long long)row * W + h * D;
#pragma unroll
		for (int e = 0; e < SINK_MAX_EPL; e++) {
			q[e] = e < epl && lane + 32 * e < D ? to_f32(qr[lane + 32 * e]) * scale : 0.f;
			acc[e] = 0.f;
		}
		float m = sinks ? sink : __int_as_float(0xff800000); // -inf
		float l = sinks ? 1.f : 0.f;
		for (int j = lo; j <= p; j++) {
			const T *kr, *vr;
			if (j < past) {
				long long o = (long long)(j % lcap) * D;
				kr = kbase + o;
				vr = vbase + o;
			} else {
				const T *r = qkv + (long long)(row - (p - j)) * W;
				kr = r + (H + kh) * D;
				vr = r + (H + KV + kh) * D;
			}
			float s = 0.f;
#pragma unroll
			for (int e = 0; e < SINK_MAX_EPL; e++)
				if (e < epl && lane + 32 * e < D) s += q[e] * to_f32(kr[lane + 32 * e]);
			s = warp_sum(s);
			const float mn = fmaxf(m, s);
			const float a = __expf(m - mn), pj = __expf(s - mn);
			l = l * a + pj;
#pragma unroll
			for (int e = 0; e < SINK_MAX_EPL; e++)
				if (e < epl && lane + 32 * e < D) acc[e] = acc[e] * a + pj * to_f32(vr[lane + 32 * e]);
			m = mn;
		}
		T *o = out + (long long)row * H * D + h * D;
		const float inv = 1.f / l;
#pragma unroll
		for (int e = 0; e < SINK_MAX_EPL; e++)
			if (e < epl && lane + 32 * e < D) o[lane + 32 * e] = from_f32<T>(acc[e] * inv);
	}
}

// kv_ring_write: block t copies token t's keys and values into the ring at
// (slot, kv head, pos % lcap), one 16-byte chunk per thread, unless the
// batch holds its sequence's position pos + lcap too, which takes the same
// place: blocks run in any order, and the latest position must win.
template <class T>
__device__ __forceinline__ void kv_ring_write(T *kc, T *vc, const T *qkv, const int *pos, const int *tokSlot, int H,
	int KV, int D, int W, int lcap) {
	pdl_enter();
	const int t = blockIdx.x;
	const int t2 = t + lcap; // a sequence's rows hold consecutive positions
	if (t2 < (int)gridDim.x && tokSlot[t2] == tokSlot[t] && pos[t2] == pos[t] + lcap) return;
	const int p = pos[t] % lcap, s = tokSlot[t];
	const int cpr = D / 8, n = KV * cpr;
	const T *row = qkv + (long long)t * W;
	for (int i = threadIdx.x; i < 2 * n; i += blockDim.x) {
		const bool isv = i >= n;
		const int j = isv ? i - n : i;
		const int h = j / cpr, c = j - h * cpr;
		const pack8 *src = (const pack8 *)(row + (long long)(H + (isv ? KV : 0) + h) * D) + c;
		T *dst = (isv ? vc : kc) + (((long long)s * KV + h) * lcap + p) * D;
		((pack8 *)dst)[c] = *src;
	}
}

#define ATTN_SINKS(T)                                                                                                  \
	extern "C" __global__ void attn_sinks_##T(T *out, const T *qkv, const T *kc, const T *vc, const T *sinks,          \
		const int4 *itemsS, int nS, const int4 *itemsL, int nL, int H, int KV, int D, int W, int lcap, int window,     \
		float scale) {                                                                                                 \
		attn_sinks<T>(out, qkv, kc, vc, sinks, itemsS, nS, itemsL, nL, H, KV, D, W, lcap, window, scale);             \
	}                                                                                                                  \
	extern "C" __global__ void kv_ring_write_##T(T *kc, T *vc, const T *qkv, const int *pos, const int *tokSlot,       \
		int H, int KV, int D, int W, int lcap) {                                                                       \
		kv_ring_write<T>(kc, vc, qkv, pos, tokSlot, H, KV, D, W, lcap);                                                \
	}
ATTN_SINKS(f16)
ATTN_SINKS(bf16)
