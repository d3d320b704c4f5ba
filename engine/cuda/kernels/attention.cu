// Attention over a KV cache, for prefill chunks and decode tokens alike.
//
// Cache layout: K and V apart, each [slot][kv head][capacity][D] per layer,
// so one sequence's keys of one head are one contiguous run that decode
// streams through once.
//
// kv_write copies the batch's keys and values from the fused QKV rows into
// the cache (slot and position per token). attention then computes, for
// every work item (a run of ntok consecutive tokens of one sequence) and KV
// head (blockIdx.y), the causal softmax(q k^T / sqrt(D)) v of the G query
// heads that share the KV head, over cache positions 0..pos: all ntok x G
// query rows of a block reuse each K/V tile it loads (grouped-query
// sharing). Tiles of 64 positions go through shared memory; scores and the
// running (flash-attention) softmax stay in fp32.
//
// The _paged kernels (kv_write_paged, rope_kv_paged, attention_paged_*)
// take a paged cache instead: cap is then the block size and every cache
// row is found through the slots' block tables (kv_paged.cuh), two
// arguments more at the end.
#include "common.cuh"
#include "attn_split.cuh"
#include "kv_paged.cuh"
#include "fp8.cuh"

// kv_write's F8 form (kv_write_f8 below) writes an FP8 (E4M3) cache: each
// value times the reciprocal of its layer's K or V scale (kinv, vinv,
// rounded once in float32 as the CPU backend's), encoded as
// engine/fp8.Encode does; one byte a value. The attention over such a
// cache is attention_tc_f8.cu's.
template <class T, bool PAGED, bool F8 = false>
__device__ __forceinline__ void kv_write(typename kv_elem<F8, T>::C *kc, typename kv_elem<F8, T>::C *vc, const T *qkv,
	const int *pos, const int *tokSlot, int H, int KV, int D, int W, int cap, const int *tables, int stride,
	float kinv = 1.f, float vinv = 1.f) {
	pdl_enter();
	int t = blockIdx.x;
	int p = pos[t], s = tokSlot[t];
	int cpr = D / 8, n = KV * cpr;
	const T *row = qkv + (long long)t * W;
	for (int i = threadIdx.x; i < 2 * n; i += blockDim.x) {
		bool isv = i >= n;
		int j = isv ? i - n : i;
		int h = j / cpr, c = j - h * cpr;
		const pack8 *src = (const pack8 *)(row + (long long)(H + (isv ? KV : 0) + h) * D) + c;
		auto *dst = (isv ? vc : kc) + kv_row<PAGED>(tables, stride, s, KV, h, cap, p) * D;
		if constexpr (F8) {
			const pack8 x = *src;
			float f[8];
#pragma unroll
			for (int e = 0; e < 8; e++) f[e] = pack_get<T>(x, e);
			((uint2 *)dst)[c] = e4m3x8(f, isv ? vinv : kinv);
		} else {
			((pack8 *)dst)[c] = *src;
		}
	}
}

extern "C" __global__ void kv_write_f16(f16 *kc, f16 *vc, const f16 *qkv, const int *pos, const int *tokSlot,
	int H, int KV, int D, int W, int cap) {
	kv_write<f16, false>(kc, vc, qkv, pos, tokSlot, H, KV, D, W, cap, nullptr, 0);
}
extern "C" __global__ void kv_write_bf16(bf16 *kc, bf16 *vc, const bf16 *qkv, const int *pos, const int *tokSlot,
	int H, int KV, int D, int W, int cap) {
	kv_write<bf16, false>(kc, vc, qkv, pos, tokSlot, H, KV, D, W, cap, nullptr, 0);
}
extern "C" __global__ void kv_write_paged_f16(f16 *kc, f16 *vc, const f16 *qkv, const int *pos, const int *tokSlot,
	int H, int KV, int D, int W, int bs, const int *tables, int stride) {
	kv_write<f16, true>(kc, vc, qkv, pos, tokSlot, H, KV, D, W, bs, tables, stride);
}
extern "C" __global__ void kv_write_paged_bf16(bf16 *kc, bf16 *vc, const bf16 *qkv, const int *pos, const int *tokSlot,
	int H, int KV, int D, int W, int bs, const int *tables, int stride) {
	kv_write<bf16, true>(kc, vc, qkv, pos, tokSlot, H, KV, D, W, bs, tables, stride);
}

#define KV_WRITE_F8(T)                                                                                         \
	extern "C" __global__ void kv_write_f8_##T(u8 *kc, u8 *vc, const T *qkv, const int *pos, const int *tokSlot, \
		int H, int KV, int D, int W, int cap, float kinv, float vinv) {                                        \
		kv_write<T, false, true>(kc, vc, qkv, pos, tokSlot, H, KV, D, W, cap, nullptr, 0, kinv, vinv);            \
	}                                                                                                          \
	extern "C" __global__ void kv_write_paged_f8_##T(u8 *kc, u8 *vc, const T *qkv, const int *pos,             \
		const int *tokSlot, int H, int KV, int D, int W, int bs, float kinv, float vinv, const int *tables,   \
		int stride) {                                                                                          \
		kv_write<T, true, true>(kc, vc, qkv, pos, tokSlot, H, KV, D, W, bs, tables, stride, kinv, vinv);          \
	}
KV_WRITE_F8(f16)
KV_WRITE_F8(bf16)

// rope_kv is rope (kernels/rope.cu) and kv_write in one pass: the query and
// key heads of each token's fused QKV row are rotated in place, and the
// rotated keys and the values are copied into the cache. Each thread takes
// 8 dimensions of one head's first half and the 8 they pair with in the
// second (two 16-byte accesses), or one 16-byte chunk of a value head. The
// angles are the float32 table's [positions, D] rows (cos, then sin), as
// rope reads them; D must be a multiple of 16. The F8 form (rope_kv_f8)
// writes an FP8 cache: the rotated keys as rounded to T in the row, and
// the values, encoded as kv_write_f8 encodes them, so its codes are those
// of rope then kv_write_f8, which read the row back.
template <class T, bool PAGED, bool F8 = false>
__device__ __forceinline__ void rope_kv(T *qkv, typename kv_elem<F8, T>::C *kc, typename kv_elem<F8, T>::C *vc,
	const int *pos, const int *tokSlot, const float *table, int H, int KV, int D, int W, int cap, const int *tables,
	int stride, float kinv = 1.f, float vinv = 1.f) {
	pdl_enter();
	const int t = blockIdx.x;
	const int p = pos[t], s = tokSlot[t];
	const int half = D / 2, hc = half / 8, dc = D / 8;
	const int nrot = (H + KV) * hc, nv = KV * dc;
	T *row = qkv + (long long)t * W;
	const float *tab = table + (long long)p * D;
	for (int i = threadIdx.x; i < nrot + nv; i += blockDim.x) {
		if (i < nrot) {
			const int h = i / hc, c = i - h * hc;
			T *base = row + (long long)h * D + c * 8;
			pack8 a = *(const pack8 *)base, b = *(const pack8 *)(base + half);
			pack8 ra = {}, rb = {};
			const float4 *t4 = (const float4 *)(tab + c * 8), *s4 = (const float4 *)(tab + half + c * 8);
			const float4 cA = t4[0], cB = t4[1], sA = s4[0], sB = s4[1];
			const float cs[8] = {cA.x, cA.y, cA.z, cA.w, cB.x, cB.y, cB.z, cB.w};
			const float sn[8] = {sA.x, sA.y, sA.z, sA.w, sB.x, sB.y, sB.z, sB.w};
#pragma unroll
			for (int e = 0; e < 8; e++) {
				float co = cs[e], si = sn[e];
				float x0 = pack_get<T>(a, e), x1 = pack_get<T>(b, e);
				pack_set<T>(ra, e, x0 * co - x1 * si);
				pack_set<T>(rb, e, x1 * co + x0 * si);
			}
			*(pack8 *)base = ra;
			*(pack8 *)(base + half) = rb;
			if (h >= H) {
				auto *dst = kc + kv_row<PAGED>(tables, stride, s, KV, h - H, cap, p) * D + c * 8;
				if constexpr (F8) {
					float fa[8], fb[8];
#pragma unroll
					for (int e = 0; e < 8; e++) {
						fa[e] = pack_get<T>(ra, e);
						fb[e] = pack_get<T>(rb, e);
					}
					*(uint2 *)dst = e4m3x8(fa, kinv);
					*(uint2 *)(dst + half) = e4m3x8(fb, kinv);
				} else {
					*(pack8 *)dst = ra;
					*(pack8 *)(dst + half) = rb;
				}
			}
		} else {
			const int j = i - nrot, h = j / dc, c = j - h * dc;
			const pack8 x = *((const pack8 *)(row + (long long)(H + KV + h) * D) + c);
			auto *dst = vc + kv_row<PAGED>(tables, stride, s, KV, h, cap, p) * D + c * 8;
			if constexpr (F8) {
				float f[8];
#pragma unroll
				for (int e = 0; e < 8; e++) f[e] = pack_get<T>(x, e);
				*(uint2 *)dst = e4m3x8(f, vinv);
			} else {
				*(pack8 *)dst = x;
			}
		}
	}
}

extern "C" __global__ void rope_kv_f16(f16 *qkv, f16 *kc, f16 *vc, const int *pos, const int *tokSlot,
	const float *table, int H, int KV, int D, int W, int cap) {
	rope_kv<f16, false>(qkv, kc, vc, pos, tokSlot, table, H, KV, D, W, cap, nullptr, 0);
}
extern "C" __global__ void rope_kv_bf16(bf16 *qkv, bf16 *kc, bf16 *vc, const int *pos, const int *tokSlot,
	const float *table, int H, int KV, int D, int W, int cap) {
	rope_kv<bf16, false>(qkv, kc, vc, pos, tokSlot, table, H, KV, D, W, cap, nullptr, 0);
}
extern "C" __global__ void rope_kv_paged_f16(f16 *qkv, f16 *kc, f16 *vc, const int *pos, const int *tokSlot,
	const float *table, int H, int KV, int D, int W, int bs, const int *tables, int stride) {
	rope_kv<f16, true>(qkv, kc, vc, pos, tokSlot, table, H, KV, D, W, bs, tables, stride);
}
extern "C" __global__ void rope_kv_paged_bf16(bf16 *qkv, bf16 *kc, bf16 *vc, const int *pos, const int *tokSlot,
	const float *table, int H, int KV, int D, int W, int bs, const int *tables, int stride) {
	rope_kv<bf16, true>(qkv, kc, vc, pos, tokSlot, table, H, KV, D, W, bs, tables, stride);
}

#define ROPE_KV_F8(T)                                                                                             \
	extern "C" __global__ void rope_kv_f8_##T(T *qkv, u8 *kc, u8 *vc, const int *pos, const int *tokSlot,            \
		const float *table, int H, int KV, int D, int W, int cap, float kinv, float vinv) {                           \
		rope_kv<T, false, true>(qkv, kc, vc, pos, tokSlot, table, H, KV, D, W, cap, nullptr, 0, kinv, vinv);          \
	}                                                                                                             \
	extern "C" __global__ void rope_kv_paged_f8_##T(T *qkv, u8 *kc, u8 *vc, const int *pos, const int *tokSlot,      \
		const float *table, int H, int KV, int D, int W, int bs, float kinv, float vinv, const int *tables,          \
		int stride) {                                                                                             \
		rope_kv<T, true, true>(qkv, kc, vc, pos, tokSlot, table, H, KV, D, W, bs, tables, stride, kinv, vinv);        \
	}
ROPE_KV_F8(f16)
ROPE_KV_F8(bf16)

#define ATT_NT 128
#define ATT_KT 64

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}


// items are int4 {first batch row, tokens, slot, position of the first row}.
// With nsplit > 1 (decode with few blocks: flash-decoding), blockIdx.z
// takes one of nsplit ranges of the keys (whole tiles) and writes its
// unnormalised output and (max, sum) per row to part / ml (attn_split.cuh);
// attn_combine or the last block merges the ranges.

template <class T, int D, int ROWS, bool PAGED = false>
__device__ __forceinline__ void attention(T *out, const T *qkv, const T *kc, const T *vc, const int4 *items,
	int H, int KV, int W, int cap, float scale, float *part, float *ml, int nsplit, int *counters,
	const int *tables = nullptr, int stride = 0) {
	pdl_enter();
	constexpr int NT = ATT_NT, KT = ATT_KT;
	constexpr int DW = D / 2;         // 32-bit words per K/V row
	constexpr int LDK = DW + 2;       // padded (8-byte reads): lanes reading different keys hit different banks
	constexpr int LDS = KT + 4;       // score row stride: 16-byte aligned rows
	constexpr int SR = ROWS / (NT / KT);  // score rows per thread
	constexpr int RSTEP = NT / DW;    // output rows apart for one thread
	constexpr int ORN = ROWS / RSTEP; // output rows per thread
	static_assert(NT % DW == 0 && ROWS % RSTEP == 0, "shape");
	extern __shared__ float sm[];
	float *Qs = sm;                   // [ROWS][D], pre-scaled
	float *Ss = Qs + ROWS * D;        // [ROWS][LDS]: scores, then probabilities
	float *Ms = Ss + ROWS * LDS;      // running max
	float *Ls = Ms + ROWS;            // running sum
	float *As = Ls + ROWS;            // this tile's rescale factor
	u32 *Ks = (u32 *)(As + ROWS);     // [KT][LDK]
	u32 *Vs = Ks + KT * LDK;          // [KT][DW]

	const int4 it = items[blockIdx.x];
	const int t0 = it.x, ntok = it.y, slot = it.z, pos0 = it.w;
	const int h = blockIdx.y, G = H / KV;
	const int R = ntok * G;
	const int tid = threadIdx.x;
	const T *kh = kc + ((long long)slot * KV + h) * cap * D;
	const T *vh = vc + ((long long)slot * KV + h) * cap * D;

	int keyBeg = 0, keyEnd = pos0 + ntok; // keys 0..pos0+ntok-1 exist
	if (nsplit > 1) {
		int chunk = ((keyEnd + nsplit - 1) / nsplit + KT - 1) / KT * KT;
		keyBeg = blockIdx.z * chunk;
		keyEnd = min(keyEnd, keyBeg + chunk);
	}
	// K/V tiles go through registers, all of a tile's 16-byte loads issued
	// at once. Prefill blocks (many rows) of heads up to 64 wide are
	// software-pipelined: the next tile's loads fly while this one's scores
	// and products are computed. Decode blocks and wider heads load a tile
	// just before it is used: fewer registers, so that every block of a
	// large batch is resident at once and the blocks hide each other's
	// loads.
	constexpr int KC = KT * (D / 8), KN = (KC + NT - 1) / NT;
	constexpr bool PIPE = KN <= 4 && ROWS > 16;
	// The first tile's loads go out with the queries' where registers allow.
	constexpr int QC = ROWS * (D / 8), QN = (QC + NT - 1) / NT;
	constexpr bool EARLY = QN + 2 * KN <= 12;
	pack8 kreg[KN], vreg[KN];
	auto fetch = [&](int k0) {
		const int nk = min(KT, keyEnd - k0);
#pragma unroll
		for (int j = 0; j < KN; j++) {
			const int i = tid + j * NT, kr = i / (D / 8), ch = i - kr * (D / 8);
			kreg[j] = pack8{};
			vreg[j] = pack8{};
			if (i < KC && kr < nk) {
				if constexpr (PAGED) {
					const long long row = kv_row<true>(tables, stride, slot, KV, h, cap, k0 + kr) * D;
					kreg[j] = ((const pack8 *)(kc + row))[ch];
					vreg[j] = ((const pack8 *)(vc + row))[ch];
				} else {
					kreg[j] = ((const pack8 *)(kh + (long long)(k0 + kr) * D))[ch];
					vreg[j] = ((const pack8 *)(vh + (long long)(k0 + kr) * D))[ch];
				}
			}
		}
	};
	// Queries, 16 bytes per thread and all of a thread's loads issued
	// before the first store.
	{
		pack8 qp[QN];
#pragma unroll
		for (int j = 0; j < QN; j++) {
			const int i = tid + j * NT, r = i / (D / 8), ch = i - r * (D / 8);
			qp[j] = pack8{};
			if (i < QC && r < R) {
				const int tok = r / G, g = r - tok * G;
				qp[j] = ((const pack8 *)(qkv + (long long)(t0 + tok) * W + (h * G + g) * D))[ch];
			}
		}
		if (EARLY && keyBeg < keyEnd) fetch(keyBeg);
#pragma unroll
		for (int j = 0; j < QN; j++) {
			const int i = tid + j * NT, r = i / (D / 8), ch = i - r * (D / 8);
			if (i < QC) {
#pragma unroll
				for (int e = 0; e < 8; e++) Qs[r * D + ch * 8 + e] = pack_get<T>(qp[j], e) * scale;
			}
		}
	}
	for (int r = tid; r < ROWS; r += NT) {
		Ms[r] = -__int_as_float(0x7f800000);
		Ls[r] = 0.f;
	}
	float o[ORN][2];
#pragma unroll
	for (int i = 0; i < ORN; i++) o[i][0] = o[i][1] = 0.f;

	const int c = tid % KT, rs = tid / KT;
	const int dw = tid % DW, orow = tid / DW;
	const int warp = tid >> 5, lane = tid & 31;
	for (int k0 = keyBeg; k0 < keyEnd; k0 += KT) {
		const int nk = min(KT, keyEnd - k0);
		if (!PIPE && (k0 != keyBeg || !EARLY)) fetch(k0);
		__syncthreads(); // the previous tile's readers are done
#pragma unroll
		for (int j = 0; j < KN; j++) {
			const int i = tid + j * NT, kr = i / (D / 8), ch = i - kr * (D / 8);
			if (i < KC) {
#pragma unroll
				for (int e = 0; e < 4; e++) {
					Ks[kr * LDK + ch * 4 + e] = kreg[j].w[e];
					Vs[kr * DW + ch * 4 + e] = vreg[j].w[e];
				}
			}
		}
		if (PIPE && k0 + KT < keyEnd) fetch(k0 + KT);
		__syncthreads();
		// Scores: thread (key c, row set rs) takes rows rs, rs + 2, ...
		{
			float acc[SR];
#pragma unroll
			for (int i = 0; i < SR; i++) acc[i] = 0.f;
			// Four dimensions a step: one 8-byte read of the key, one
			// 16-byte (broadcast) read of each query row.
#pragma unroll 4
			for (int w = 0; w < D / 4; w++) {
				uint2 kw = *(const uint2 *)&Ks[c * LDK + 2 * w];
				float2 k01 = unpack2(kw.x, T{}), k23 = unpack2(kw.y, T{});
#pragma unroll
				for (int i = 0; i < SR; i++) {
					int r = rs + i * (NT / KT);
					float4 q = *(const float4 *)&Qs[r * D + 4 * w];
					acc[i] += q.x * k01.x + q.y * k01.y + q.z * k23.x + q.w * k23.y;
				}
			}
			const int kpos = k0 + c;
#pragma unroll
			for (int i = 0; i < SR; i++) {
				int r = rs + i * (NT / KT);
				int qpos = pos0 + r / G;
				Ss[r * LDS + c] = (r < R && kpos <= qpos && c < nk) ? acc[i] : -__int_as_float(0x7f800000);
			}
		}
		__syncthreads();
		// Online softmax, one warp per row.
		for (int r = warp; r < R; r += NT / 32) {
			float s0 = Ss[r * LDS + lane], s1 = Ss[r * LDS + lane + 32];
			float mold = Ms[r];
			float mnew = fmaxf(mold, warp_max(fmaxf(s0, s1)));
			const float ninf = -__int_as_float(0x7f800000);
			float p0 = mnew == ninf ? 0.f : __expf(s0 - mnew);
			float p1 = mnew == ninf ? 0.f : __expf(s1 - mnew);
			float alpha = mold == ninf ? 0.f : __expf(mold - mnew);
			float sum = warp_sum(p0 + p1);
			Ss[r * LDS + lane] = p0;
			Ss[r * LDS + lane + 32] = p1;
			if (lane == 0) {
				Ms[r] = mnew;
				Ls[r] = Ls[r] * alpha + sum;
				As[r] = alpha;
			}
		}
		__syncthreads();
		// O = O * alpha + P V: thread (word dw, rows orow, orow + RSTEP, ...).
#pragma unroll
		for (int i = 0; i < ORN; i++) {
			int r = orow + i * RSTEP;
			float a = r < R ? As[r] : 0.f;
			o[i][0] *= a;
			o[i][1] *= a;
		}
		// Four keys a step: one 16-byte (broadcast) read of each row's
		// probabilities. Keys past nk have p = 0 and zeroed values.
		const int nk4 = (nk + 3) & ~3;
		for (int k = 0; k < nk4; k += 4) {
			float2 v0 = unpack2(Vs[k * DW + dw], T{}), v1 = unpack2(Vs[(k + 1) * DW + dw], T{});
			float2 v2 = unpack2(Vs[(k + 2) * DW + dw], T{}), v3 = unpack2(Vs[(k + 3) * DW + dw], T{});
#pragma unroll
			for (int i = 0; i < ORN; i++) {
				float4 p = *(const float4 *)&Ss[(orow + i * RSTEP) * LDS + k];
				o[i][0] += p.x * v0.x + p.y * v1.x + p.z * v2.x + p.w * v3.x;
				o[i][1] += p.x * v0.y + p.y * v1.y + p.z * v2.y + p.w * v3.y;
			}
		}
	}
	__syncthreads();
	if (nsplit > 1) {
		long long base = ((long long)(blockIdx.x * KV + h) * nsplit + blockIdx.z) * ROWS;
#pragma unroll
		for (int i = 0; i < ORN; i++) {
			int r = orow + i * RSTEP;
			if (r < R) *(float2 *)&part[(base + r) * D + 2 * dw] = make_float2(o[i][0], o[i][1]);
		}
		for (int r = tid; r < R; r += NT) *(float2 *)&ml[(base + r) * 2] = make_float2(Ms[r], Ls[r]);
		if (!counters) return; // attn_combine merges the ranges
		if (!split_last(counters + blockIdx.x * KV + h, nsplit)) return;
		combine_rows<T>(out, part, ml, t0, R, h, H, KV, D, ROWS, nsplit, (long long)(blockIdx.x * KV + h) * nsplit * ROWS);
		return;
	}
#pragma unroll
	for (int i = 0; i < ORN; i++) {
		int r = orow + i * RSTEP;
		if (r < R) {
			int tok = r / G, j = r - tok * G;
			float inv = 1.f / Ls[r];
			u32 lo = from_f32<T>(o[i][0] * inv).x, hi = from_f32<T>(o[i][1] * inv).x;
			*(u32 *)&out[(long long)(t0 + tok) * H * D + (h * G + j) * D + 2 * dw] = lo | (hi << 16);
		}
	}
}

// Decode blocks of up to 64-wide heads are kept to 64 registers a thread:
// 8 resident blocks per multiprocessor, so a batch of 256 x 4 heads runs
// in one wave.
#define ATT_MINB(D, ROWS) (((ROWS) == 8 && (D) <= 64) ? 8 : 1)
#define ATTN(T, D, ROWS)                                                                                        \
	extern "C" __global__ void __launch_bounds__(ATT_NT, ATT_MINB(D, ROWS)) attention_##T##_d##D##_r##ROWS(     \
		T *out, const T *qkv,                                                                                   \
		const T *kc, const T *vc, const int4 *items, int H, int KV, int W, int cap, float scale, float *part,     \
		float *ml, int nsplit, int *counters) {                                                                 \
		attention<T, D, ROWS>(out, qkv, kc, vc, items, H, KV, W, cap, scale, part, ml, nsplit, counters);       \
	}
#define ATTN_D(T, D) ATTN(T, D, 8) ATTN(T, D, 16) ATTN(T, D, 64)
ATTN(f16, 16, 16) ATTN(f16, 16, 64) ATTN_D(f16, 32) ATTN_D(f16, 64) ATTN_D(f16, 128)
ATTN(bf16, 16, 16) ATTN(bf16, 16, 64) ATTN_D(bf16, 32) ATTN_D(bf16, 64) ATTN_D(bf16, 128)

// The same over a paged cache: cap is the block size, tables and stride
// the block tables (kv_paged.cuh).
#define ATTN_P(T, D, ROWS)                                                                                      \
	extern "C" __global__ void __launch_bounds__(ATT_NT, ATT_MINB(D, ROWS)) attention_paged_##T##_d##D##_r##ROWS( \
		T *out, const T *qkv,                                                                                   \
		const T *kc, const T *vc, const int4 *items, int H, int KV, int W, int bs, float scale, float *part,      \
		float *ml, int nsplit, int *counters, const int *tables, int stride) {                                  \
		attention<T, D, ROWS, true>(out, qkv, kc, vc, items, H, KV, W, bs, scale, part, ml, nsplit, counters,   \
			tables, stride);                                                                                    \
	}
#define ATTN_P_D(T, D) ATTN_P(T, D, 8) ATTN_P(T, D, 16) ATTN_P(T, D, 64)
ATTN_P(f16, 16, 16) ATTN_P(f16, 16, 64) ATTN_P_D(f16, 32) ATTN_P_D(f16, 64) ATTN_P_D(f16, 128)
ATTN_P(bf16, 16, 16) ATTN_P(bf16, 16, 64) ATTN_P_D(bf16, 32) ATTN_P_D(bf16, 64) ATTN_P_D(bf16, 128)

// attn_combine merges the nsplit partial results of each (item, KV head)
// block of a split attention launch (combine_rows); rowsMax is the launch's
// rows per block.
template <class T>
__device__ __forceinline__ void attn_combine(T *out, const float *part, const float *ml, const int4 *items,
	int H, int KV, int D, int rowsMax, int nsplit) {
	pdl_enter();
	const int4 it = items[blockIdx.x];
	const int h = blockIdx.y, R = it.y * (H / KV);
	combine_rows<T>(out, part, ml, it.x, R, h, H, KV, D, rowsMax, nsplit, (long long)(blockIdx.x * KV + h) * nsplit * rowsMax);
}
extern "C" __global__ void attn_combine_f16(f16 *out, const float *part, const float *ml, const int4 *items,
	int H, int KV, int D, int rowsMax, int nsplit) {
	attn_combine<f16>(out, part, ml, items, H, KV, D, rowsMax, nsplit);
}
extern "C" __global__ void attn_combine_bf16(bf16 *out, const float *part, const float *ml, const int4 *items,
	int H, int KV, int D, int rowsMax, int nsplit) {
	attn_combine<bf16>(out, part, ml, items, H, KV, D, rowsMax, nsplit);
}
