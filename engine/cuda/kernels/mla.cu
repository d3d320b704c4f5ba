// Multi-head latent attention (DeepSeek-V3; engine/model/mla.go has the
// math). The cache holds per (slot, position) one row of [latent | rope key],
// W = L + dr elements in the compute dtype, one layer's rows being
// [slots + 1][capacity][W] (the last slot is the padding rows' scratch).
//
// mla_prep_*: one block per token. It RMS-normalises the latent part of the
// token's ckv row by kvNorm, rotates the rope part of ckv and of each query
// head by the token's position (pairs (2i, 2i+1) when interleaved, else
// (i, i + dr/2); the float32 table row is cos | sin, YaRN's mscale already
// in it) in place, and writes [latent | rope key] into the cache.
//
// mla_attn_*: the absorbed form for every token, prefill included (the
// same attention as the plain form, over the latent cache as one shared
// key/value head). One block per (head, tile of MLA_TT tokens):
//   1. ql = W_UK[h]ᵀ · q_nope for the tile's tokens, W_UK read once a tile;
//   2. per token, its 8 warps split positions 0..pos, each with an online
//      softmax of scale · (ql · c + q_rope · k_rope) and its running sum of
//      p · c (registers: L / 32 values a lane), merged through shared
//      memory into ctx = Σ p · c / Σ p;
//   3. out[h] = W_UV[h] · ctx for the tile's tokens, W_UV read once a tile.
// Everything accumulates in float32; only the cache and out are rounded.
#include "common.cuh"

#define MLA_MAXL 512 // latent width bound: L / 32 accumulators per lane
#define MLA_TT 4     // tokens per attention block
#define MLA_WARPS 8

template <class T>
__device__ __forceinline__ void mla_rotate(T *x, const float *tab, int i, int half, int interleave) {
	int a = interleave ? 2 * i : i, b = interleave ? 2 * i + 1 : i + half;
	float c = tab[i], s = tab[half + i];
	float x0 = to_f32(x[a]), x1 = to_f32(x[b]);
	x[a] = from_f32<T>(x0 * c - x1 * s);
	x[b] = from_f32<T>(x1 * c + x0 * s);
}

template <class T>
__device__ __forceinline__ void mla_prep(T *q, T *ckv, const T *norm, const float *table, T *cache, const int *pos,
	const int *slot, int heads, int dn, int dr, int L, int interleave, float eps, int capacity) {
	pdl_enter();
	const int t = blockIdx.x, W = L + dr, half = dr / 2;
	T *kv = ckv + (long long)t * W;
	const int p = pos[t];
	T *row = cache + ((long long)slot[t] * capacity + p) * W;
	float ss = 0.f;
	for (int i = threadIdx.x; i < L; i += blockDim.x) {
		float v = to_f32(kv[i]);
		ss += v * v;
	}
	ss = block_sum(ss);
	const float r = rsqrtf(ss / (float)L + eps);
	// Each thread rewrites only the elements it read.
	for (int i = threadIdx.x; i < L; i += blockDim.x) {
		T v = from_f32<T>(to_f32(kv[i]) * r * to_f32(norm[i]));
		kv[i] = v;
		row[i] = v;
	}
	const float *tab = table + (long long)p * dr;
	T *qt = q + (long long)t * heads * (dn + dr);
	// Pairs of every query head, then the key's (h == heads).
	for (int j = threadIdx.x; j < (heads + 1) * half; j += blockDim.x) {
		int h = j / half, i = j - h * half;
		mla_rotate(h < heads ? qt + (long long)h * (dn + dr) + dn : kv + L, tab, i, half, interleave);
	}
	__syncthreads(); // the key's pairs were written by other threads
	for (int i = threadIdx.x; i < dr; i += blockDim.x) row[L + i] = kv[L + i];
}

template <class T>
__device__ __forceinline__ void mla_attn(T *out, const T *q, const T *kvb, const T *cache, const int *pos,
	const int *slot, int tokens, int heads, int dn, int dr, int dv, int L, float scale_log2, int capacity) {
	pdl_enter();
	extern __shared__ float sm[];
	const int h = blockIdx.x, t0 = blockIdx.y * MLA_TT;
	const int nt = min(MLA_TT, tokens - t0);
	const int W = L + dr, qw = heads * (dn + dr);
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	float *qn = sm;                        // [MLA_TT][dn]
	float *ql = qn + MLA_TT * dn;          // [MLA_TT][L]
	float *qr = ql + MLA_TT * L;           // [MLA_TT][dr]
	float *ctx = qr + MLA_TT * dr;         // [MLA_TT][L]
	float *wacc = ctx + MLA_TT * L;        // [MLA_WARPS][L]
	float *wm = wacc + MLA_WARPS * L;      // [MLA_WARPS]
	float *wl = wm + MLA_WARPS;            // [MLA_WARPS]
	const T *wuk = kvb + (long long)h * (dn + dv) * L;
	const T *wuv = wuk + (long long)dn * L;

	for (int j = threadIdx.x; j < MLA_TT * (dn + dr); j += blockDim.x) {
		int tt = j / (dn + dr), i = j - tt * (dn + dr);
		float v = tt < nt ? to_f32(q[(long long)(t0 + tt) * qw + (long long)h * (dn + dr) + i]) : 0.f;
		if (i < dn)
			qn[tt * dn + i] = v;
		else
			qr[tt * dr + i - dn] = v;
	}
	__syncthreads();
	// 1. ql[tt][l] = Σ_i q_nope[tt][i] · W_UK[i][l].
	for (int l = threadIdx.x; l < L; l += blockDim.x) {
		float acc[MLA_TT];
#pragma unroll
		for (int tt = 0; tt < MLA_TT; tt++) acc[tt] = 0.f;
#pragma unroll 8 // loads in flight ahead of their FMAs
		for (int i = 0; i < dn; i++) {
			float w = to_f32(wuk[(long long)i * L + l]);
#pragma unroll
			for (int tt = 0; tt < MLA_TT; tt++) acc[tt] += qn[tt * dn + i] * w;
		}
#pragma unroll
		for (int tt = 0; tt < MLA_TT; tt++) ql[tt * L + l] = acc[tt];
	}
	__syncthreads();

	// 2. Attention over the latent cache, token by token.
	const int nl = (L + 31) / 32;
	for (int tt = 0; tt < nt; tt++) {
		const int t = t0 + tt, n = pos[t] + 1;
		const T *base = cache + (long long)slot[t] * capacity * W;
		float m = -__int_as_float(0x7f800000), sum = 0.f;
		float acc[MLA_MAXL / 32];
#pragma unroll
		for (int j = 0; j < MLA_MAXL / 32; j++) acc[j] = 0.f;
		for (int p = warp; p < n; p += MLA_WARPS) {
			const T *row = base + (long long)p * W;
			float c[MLA_MAXL / 32];
			float d = 0.f;
#pragma unroll
			for (int j = 0; j < MLA_MAXL / 32; j++) {
				int e = lane + 32 * j;
				c[j] = j < nl && e < L ? to_f32(row[e]) : 0.f;
				if (j < nl && e < L) d += ql[tt * L + e] * c[j];
			}
			for (int i = lane; i < dr; i += 32) d += qr[tt * dr + i] * to_f32(row[L + i]);
			d = warp_sum(d) * scale_log2;
			float mn = fmaxf(m, d);
			float corr = exp2f(m - mn), e = exp2f(d - mn);
			sum = sum * corr + e;
#pragma unroll
			for (int j = 0; j < MLA_MAXL / 32; j++) acc[j] = acc[j] * corr + e * c[j];
			m = mn;
		}
#pragma unroll
		for (int j = 0; j < MLA_MAXL / 32; j++) {
			int e = lane + 32 * j;
			if (j < nl && e < L) wacc[warp * L + e] = acc[j];
		}
		if (lane == 0) {
			wm[warp] = m;
			wl[warp] = sum;
		}
		__syncthreads();
		// Warps that saw no position have m = -inf and weigh nothing;
		// warp 0 always has position 0.
		float M = wm[0];
		for (int w = 1; w < MLA_WARPS; w++) M = fmaxf(M, wm[w]);
		float tot = 0.f;
		for (int w = 0; w < MLA_WARPS; w++) tot += wl[w] * exp2f(wm[w] - M);
		const float inv = 1.f / tot;
		for (int e = threadIdx.x; e < L; e += blockDim.x) {
			float v = 0.f;
			for (int w = 0; w < MLA_WARPS; w++) v += wacc[w * L + e] * exp2f(wm[w] - M);
			ctx[tt * L + e] = v * inv;
		}
		__syncthreads(); // wacc, wm and wl are reused by the next token
	}

	// 3. out[tt][i] = Σ_l W_UV[i][l] · ctx[tt][l], a warp per output.
	for (int i = warp; i < dv; i += MLA_WARPS) {
		float acc[MLA_TT];
#pragma unroll
		for (int tt = 0; tt < MLA_TT; tt++) acc[tt] = 0.f;
#pragma unroll 4
		for (int l = lane; l < L; l += 32) {
			float w = to_f32(wuv[(long long)i * L + l]);
#pragma unroll
			for (int tt = 0; tt < MLA_TT; tt++) acc[tt] += w * ctx[tt * L + l];
		}
#pragma unroll
		for (int tt = 0; tt < MLA_TT; tt++) {
			float v = warp_sum(acc[tt]);
			if (lane == 0 && tt < nt) out[(long long)(t0 + tt) * heads * dv + (long long)h * dv + i] = from_f32<T>(v);
		}
	}
}

#define MLA(T)                                                                                                         \
	extern "C" __global__ void mla_prep_##T(T *q, T *ckv, const T *norm, const float *table, T *cache, const int *pos,  \
		const int *slot, int heads, int dn, int dr, int L, int interleave, float eps, int capacity) {                   \
		mla_prep<T>(q, ckv, norm, table, cache, pos, slot, heads, dn, dr, L, interleave, eps, capacity);               \
	}                                                                                                                  \
	extern "C" __global__ void __launch_bounds__(32 * MLA_WARPS) mla_attn_##T(T *out, const T *q, const T *kvb,        \
		const T *cache, const int *pos, const int *slot, int tokens, int heads, int dn, int dr, int dv, int L,         \
		float scale_log2, int capacity) {                                                                              \
		mla_attn<T>(out, q, kvb, cache, pos, slot, tokens, heads, dn, dr, dv, L, scale_log2, capacity);                \
	}
MLA(f16)
MLA(bf16)

// The split path for up to a few hundred rows (decode, small chunks): three
// kernels over float32 workspaces, so that each cache row is read once per
// 16 heads rather than once per head, and the positions of one token are
// split over several blocks when the batch alone cannot fill the GPU
// (flash-decoding).
//   mla_absorb_*: ql [tokens][heads][L] = W_UK[h]ᵀ · q_nope, one block per
//     (head, MLA_AT tokens): W_UK read once per tile.
//   mla_split_*: one block per (token, 16 heads, split): the split's
//     positions in tiles of MLA_PT rows staged in shared memory, each warp
//     two heads with their online softmax; writes the partial [acc[L] | m |
//     sum] of every (token, head, split) to part.
//   mla_split_out_*: one block per (head, MLA_OT tokens): merges the splits
//     into ctx (shared memory), then out = W_UV[h] · ctx, W_UV read once per
//     tile.
#define MLA_AT 16
#define MLA_PT 8
#define MLA_HG 16
#define MLA_OT 16

template <class T>
__device__ __forceinline__ void mla_absorb(float *ql, const T *q, const T *kvb, int tokens, int heads, int dn, int dr,
	int dv, int L) {
	pdl_enter();
	extern __shared__ float qn[]; // [MLA_AT][dn]
	const int h = blockIdx.x, t0 = blockIdx.y * MLA_AT, nt = min(MLA_AT, tokens - t0);
	const int qw = heads * (dn + dr);
	for (int j = threadIdx.x; j < MLA_AT * dn; j += blockDim.x) {
		int tt = j / dn, i = j - tt * dn;
		qn[j] = tt < nt ? to_f32(q[(long long)(t0 + tt) * qw + (long long)h * (dn + dr) + i]) : 0.f;
	}
	__syncthreads();
	const T *wuk = kvb + (long long)h * (dn + dv) * L;
	for (int l = threadIdx.x; l < L; l += blockDim.x) {
		float acc[MLA_AT];
#pragma unroll
		for (int tt = 0; tt < MLA_AT; tt++) acc[tt] = 0.f;
#pragma unroll 8 // loads in flight ahead of their FMAs
		for (int i = 0; i < dn; i++) {
			float w = to_f32(wuk[(long long)i * L + l]);
#pragma unroll
			for (int tt = 0; tt < MLA_AT; tt++) acc[tt] += qn[tt * dn + i] * w;
		}
#pragma unroll
		for (int tt = 0; tt < MLA_AT; tt++)
			if (tt < nt) ql[((long long)(t0 + tt) * heads + h) * L + l] = acc[tt];
	}
}

template <class T>
__device__ __forceinline__ void mla_split(float *part, const float *ql, const T *q, const T *cache, const int *pos,
	const int *slot, int heads, int dn, int dr, int L, float scale_log2, int capacity, int splits) {
	pdl_enter();
	extern __shared__ float crow[]; // [MLA_PT][W]
	const int t = blockIdx.x, s = blockIdx.z, W = L + dr, nl = (L + 31) / 32;
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	const int n = pos[t] + 1, chunk = (n + splits - 1) / splits;
	const int p0 = min(n, s * chunk), p1 = min(n, p0 + chunk);
	const T *base = cache + (long long)slot[t] * capacity * W;
	float qlr[2][MLA_MAXL / 32], qrr[2][4], acc[2][MLA_MAXL / 32], m[2], sum[2];
	int hs[2];
#pragma unroll
	for (int j = 0; j < 2; j++) {
		int h = blockIdx.y * MLA_HG + warp * 2 + j;
		hs[j] = h < heads ? h : -1;
		m[j] = -__int_as_float(0x7f800000);
		sum[j] = 0.f;
		const float *qh = ql + ((long long)t * heads + max(h, 0)) * L;
		const T *qrh = q + (long long)t * heads * (dn + dr) + (long long)max(h, 0) * (dn + dr) + dn;
#pragma unroll
		for (int jj = 0; jj < MLA_MAXL / 32; jj++) {
			int e = lane + 32 * jj;
			qlr[j][jj] = hs[j] >= 0 && jj < nl && e < L ? qh[e] : 0.f;
			acc[j][jj] = 0.f;
		}
#pragma unroll
		for (int jj = 0; jj < 4; jj++) {
			int e = lane + 32 * jj;
			qrr[j][jj] = hs[j] >= 0 && e < dr ? to_f32(qrh[e]) : 0.f;
		}
	}
	for (int pt = p0; pt < p1; pt += MLA_PT) {
		const int np = min(MLA_PT, p1 - pt);
		__syncthreads(); // the previous tile is consumed
		for (int j = threadIdx.x; j < np * W; j += blockDim.x) {
			int pp = j / W, e = j - pp * W;
			crow[j] = to_f32(base[(long long)(pt + pp) * W + e]);
		}
		__syncthreads();
		// A tile's scores at once (independent dot products and
		// butterflies), then one rescaling of the running sums per tile.
		// Rows pp >= np hold stale values and are never used.
#pragma unroll
		for (int j = 0; j < 2; j++) {
			if (hs[j] < 0) continue; // the same for the whole warp
			float d[MLA_PT];
#pragma unroll
			for (int pp = 0; pp < MLA_PT; pp++) d[pp] = 0.f;
#pragma unroll
			for (int jj = 0; jj < MLA_MAXL / 32; jj++) {
				if (jj < nl && lane + 32 * jj < L) {
					const float qv = qlr[j][jj];
#pragma unroll
					for (int pp = 0; pp < MLA_PT; pp++) d[pp] += qv * crow[pp * W + lane + 32 * jj];
				}
			}
#pragma unroll
			for (int jj = 0; jj < 4; jj++) {
				if (lane + 32 * jj < dr) {
					const float qv = qrr[j][jj];
#pragma unroll
					for (int pp = 0; pp < MLA_PT; pp++) d[pp] += qv * crow[pp * W + L + lane + 32 * jj];
				}
			}
#pragma unroll
			for (int o = 16; o > 0; o >>= 1)
#pragma unroll
				for (int pp = 0; pp < MLA_PT; pp++) d[pp] += __shfl_xor_sync(0xffffffffu, d[pp], o);
			float mt = m[j];
#pragma unroll
			for (int pp = 0; pp < MLA_PT; pp++) {
				d[pp] *= scale_log2;
				if (pp < np) mt = fmaxf(mt, d[pp]);
			}
			const float corr = exp2f(m[j] - mt);
			sum[j] *= corr;
#pragma unroll
			for (int jj = 0; jj < MLA_MAXL / 32; jj++) acc[j][jj] *= corr;
#pragma unroll
			for (int pp = 0; pp < MLA_PT; pp++) {
				if (pp < np) {
					const float e = exp2f(d[pp] - mt);
					sum[j] += e;
#pragma unroll
					for (int jj = 0; jj < MLA_MAXL / 32; jj++)
						if (jj < nl && lane + 32 * jj < L) acc[j][jj] += e * crow[pp * W + lane + 32 * jj];
				}
			}
			m[j] = mt;
		}
	}
#pragma unroll
	for (int j = 0; j < 2; j++) {
		if (hs[j] < 0) continue;
		float *o = part + (((long long)t * heads + hs[j]) * splits + s) * (L + 2);
#pragma unroll
		for (int jj = 0; jj < MLA_MAXL / 32; jj++)
			if (jj < nl && lane + 32 * jj < L) o[lane + 32 * jj] = acc[j][jj];
		if (lane == 0) {
			o[L] = m[j];
			o[L + 1] = sum[j];
		}
	}
}

template <class T>
__device__ __forceinline__ void mla_split_out(T *out, const float *part, const T *kvb, int tokens, int heads, int dn,
	int dv, int L, int splits) {
	pdl_enter();
	extern __shared__ float ctx[]; // [MLA_OT][L]
	const int h = blockIdx.x, t0 = blockIdx.y * MLA_OT, nt = min(MLA_OT, tokens - t0);
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
	for (int j = threadIdx.x; j < MLA_OT * L; j += blockDim.x) {
		int tt = j / L, e = j - tt * L;
		float v = 0.f;
		if (tt < nt) {
			// Split 0 always holds position 0: M is finite, and empty
			// splits (m = -inf) weigh nothing.
			const float *pr = part + ((long long)(t0 + tt) * heads + h) * splits * (L + 2);
			float M = pr[L];
			for (int s = 1; s < splits; s++) M = fmaxf(M, pr[s * (L + 2) + L]);
			float tot = 0.f;
			for (int s = 0; s < splits; s++) {
				float w = exp2f(pr[s * (L + 2) + L] - M);
				tot += pr[s * (L + 2) + L + 1] * w;
				v += pr[s * (L + 2) + e] * w;
			}
			v /= tot;
		}
		ctx[j] = v;
	}
	__syncthreads();
	const T *wuv = kvb + (long long)h * (dn + dv) * L + (long long)dn * L;
	for (int i = warp; i < dv; i += warps) {
		float acc[MLA_OT];
#pragma unroll
		for (int tt = 0; tt < MLA_OT; tt++) acc[tt] = 0.f;
#pragma unroll 4
		for (int l = lane; l < L; l += 32) {
			float w = to_f32(wuv[(long long)i * L + l]);
#pragma unroll
			for (int tt = 0; tt < MLA_OT; tt++) acc[tt] += w * ctx[tt * L + l];
		}
#pragma unroll
		for (int tt = 0; tt < MLA_OT; tt++) {
			float v = warp_sum(acc[tt]);
			if (lane == 0 && tt < nt) out[(long long)(t0 + tt) * heads * dv + (long long)h * dv + i] = from_f32<T>(v);
		}
	}
}

#define MLA_SPLIT(T)                                                                                                   \
	extern "C" __global__ void mla_absorb_##T(float *ql, const T *q, const T *kvb, int tokens, int heads, int dn,       \
		int dr, int dv, int L) {                                                                                       \
		mla_absorb<T>(ql, q, kvb, tokens, heads, dn, dr, dv, L);                                                       \
	}                                                                                                                  \
	extern "C" __global__ void __launch_bounds__(32 * MLA_HG / 2) mla_split_##T(float *part, const float *ql,          \
		const T *q, const T *cache, const int *pos, const int *slot, int heads, int dn, int dr, int L,                 \
		float scale_log2, int capacity, int splits) {                                                                  \
		mla_split<T>(part, ql, q, cache, pos, slot, heads, dn, dr, L, scale_log2, capacity, splits);                   \
	}                                                                                                                  \
	extern "C" __global__ void mla_split_out_##T(T *out, const float *part, const T *kvb, int tokens, int heads,       \
		int dn, int dv, int L, int splits) {                                                                           \
		mla_split_out<T>(out, part, kvb, tokens, heads, dn, dv, L, splits);                                            \
	}
MLA_SPLIT(f16)
MLA_SPLIT(bf16)
