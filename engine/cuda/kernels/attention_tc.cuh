// Attention on the tensor cores (mma.sync m16n8k16, fp32 accumulation):
// the same work items, cache layout and outputs as attention.cu's CUDA-core
// kernel, for head dimensions 64 and 128.
//
// Why: the CUDA-core kernel computes q k^T and P V in fp32 through shared
// memory with four block-wide barriers per 64-key tile, so each block is a
// long chain of dependent latencies; at a decode batch of 256 it ran at a
// third of the bandwidth its K/V bytes need. Here every product is a few
// mma instructions per warp, the scores never leave registers, and decode
// blocks need no block-wide barrier until the end.
//
// FlashAttention-2 style, per warp: a warp owns 16 query rows (rows r of a
// block are token r / G, query head r % G of the block's KV head; decode
// blocks pad their G rows to 16) and a set of key tiles of KT keys.
// - S = Q K^T: Q's A fragments are loaded from global memory once, straight
//   into registers; a K tile sits in shared memory as [key][dim], which is
//   exactly the "col" B operand, so it loads with plain ldmatrix.
// - Online softmax in registers: a thread holds two rows (lane / 4 and
//   lane / 4 + 8); row maxima take two quad shuffles; scores are scaled by
//   scale * log2(e) in fp32 so every exponential is one ex2. Row sums stay
//   per thread until the end (each quad's lanes rescale alike).
// - P V: the m16n8 accumulators of two adjacent 8-key score tiles are, as
//   they stand, the m16k16 A fragment of P (rounded to 16 bits); V [key][dim]
//   is the transposed B operand: ldmatrix.trans.
// - K/V tiles stream into shared memory with cp.async, STAGES deep (zero-
//   filled past the last key, so masked keys multiply zeros, never stale
//   cache contents), one barrier per tile among the warps sharing them.
//
// A block has MW x KW warps: MW warps of rows (16 each) share the K/V tiles
// of their key group, and KW key groups take the block's key tiles in turn
// (tile i to group i % KW), each with its own stages, so they never wait for
// one another. Decode blocks (MW = 1: one token's G heads) split their keys
// over KW warps (flash-decoding inside the block) and merge the warps'
// (m, l, O) through shared memory at the end; prefill blocks (MW = 4, KW =
// 1: 64 rows) share every tile among their four warps. Across blocks the
// split of attention.cu is kept (attn_split.cuh): with nsplit > 1 blockIdx.z
// takes a range of whole tiles and the partial results go to part / ml in
// the same layout, merged by attn_combine or the last block.
//
// Short contexts (decode, split launches): an item with at most shortKeys
// keys is done by its first block alone (blockIdx.z = 0, every key, the
// output written directly) and its other blocks return at once. A split
// costs a dependent round trip through global memory (partials, fence,
// counter, the last block's reads), more than a short context's keys do
// when the block's key warps share them; the split count is fixed when a
// decode graph is captured, so the choice is made here, per item.
//
// ROPE (the _rope decode kernels): the launch also does rope_kv's work for
// its own tokens, so that the decode step needs no kernel between the QKV
// projection and the attention. The keys from pos0 on are the items' own
// tokens: each block rotates its rows of Q in registers (the A fragment of
// column c and its rotate-half partner c + D/2 sit in the same thread,
// qa[kk] and qa[kk + D/32]); the block whose key range holds a new key
// fills that key's row of the K/V stage from the QKV row itself (K rotated
// in registers) rather than from the cache, and writes it and the value
// into the cache: exactly one block per (key, KV head), and no other block
// reads that position. Every other key is in the cache from an earlier
// launch, which the kernel before this one (the QKV projection) does not
// write: its first tiles are requested before griddepcontrol.wait, so the
// K/V stream overlaps the end of the projection. The QKV rows are not
// rotated in place (other blocks of the launch read them): nothing reads
// them after the attention.
//
// SW (the _f8t decode kernels over an FP8 cache, _sw over a 16-bit one):
// the products with the roles swapped, S^T = K Q^T and O^T = V^T P^T, so
// that a block's few query rows (a KV head's query heads of one token) are
// mma's n = 8 and the keys and dimensions its m = 16: half the mma of the
// 16-row form and half its output accumulators. P^T's B fragments come
// from the score accumulators by movmatrix; a column's softmax runs across
// lane / 4 (softmax_cols).
//
// PAGED (the _paged kernels): the cache is paged, cap is the block size,
// and every cached key's row is found through the item's slot's block table
// (kv_paged.cuh); masked loads read from the cache's base (zero-filled,
// nothing is read).
#pragma once
#include "common.cuh"
#include "mma.cuh"
#include "attn_split.cuh"
#include "kv_paged.cuh"
#include "fp8.cuh"

// group_sync is the barrier of the MW warps sharing key group kw's tiles:
// a warp's own when it is alone, the block's when every warp shares, a
// named barrier (1 + kw; 0 is __syncthreads') otherwise.
template <int MW, int KW>
__device__ __forceinline__ void group_sync(int kw) {
	if constexpr (MW == 1) {
		__syncwarp();
	} else if constexpr (KW == 1) {
		__syncthreads();
	} else {
		asm volatile("bar.sync %0, %1;" ::"r"(1 + kw), "n"(MW * 32) : "memory");
	}
}

template <class T, int D, int MW, int KW, int KT, int ST, bool ROPE, bool PAGED = false, bool F8 = false, bool REGS = false,
	bool QM = false, bool PM = false, bool SW = false>
__device__ __forceinline__ void attention_tc(T *out, const T *qkv, typename kv_elem<F8, T>::C *kc,
	typename kv_elem<F8, T>::C *vc, const int4 *items, int H, int KV, int W, int cap, float scale, float *part,
	float *ml, int nsplit, int *counters, int rowsMax, const float *table, int shortKeys,
	const int *tables = nullptr, int stride = 0, float ksc = 1.f, float vsc = 1.f) {
	static_assert(!ROPE || MW == 1, "RoPE is folded into decode blocks only");
	static_assert(!REGS || (F8 && MW == 1), "codes converted in registers: decode blocks over an FP8 cache");
	static_assert(!QM || (REGS && D % 32 == 0), "Q K^T on the E4M3 tensor cores: _f8r decode blocks");
	static_assert(!PM || QM, "P V on the E4M3 tensor cores: with Q K^T there");
	static_assert(!SW || (MW == 1 && (REGS || !F8) && !(ROPE && F8) && !QM && KW > 1 && KT % 16 == 0),
		"swapped products: _t and _f8t decode blocks of several key warps");
	typedef typename kv_elem<F8, T>::C C;
	// Without ROPE the cache holds this launch's own keys, written by the
	// kernel before: nothing may be read before it is done.
	if constexpr (!ROPE) pdl_enter();
	constexpr int LDS = D + 8;     // padded row: the 8 rows of an ldmatrix phase hit distinct banks
	constexpr int CPR = D / 8;     // 16-byte chunks per row
	constexpr int TILE = KT * LDS; // elements of one K or V tile
	constexpr int NG = MW * 32;    // threads of a key group
	constexpr int NS = KT / 8;     // 8-key score tiles
	constexpr int NO = D / 8;      // 8-wide output tiles
	constexpr int LOADS = KT * CPR / NG;
	static_assert(D % 16 == 0 && KT % 16 == 0 && ST >= 2 && KT * CPR % NG == 0, "shape");
	// F8: a group's stages hold E4M3 tiles (RAW bytes each, rows of RS).
	// Without REGS each tile in turn is decoded into one pair of 16-bit
	// tiles (DEC bytes) that the mma read; with REGS (decode blocks: a warp
	// alone reads its tiles) the mma operands are loaded from the codes by
	// ldmatrix and converted in registers (e4m3_bits), no decoded tile, and
	// the rows are padded by 16 bytes so that an ldmatrix phase's 8 rows
	// fall on distinct banks.
	constexpr int RS = REGS ? D + 16 : D;
	constexpr int RAW = KT * RS;
	constexpr int DEC = F8 && !REGS ? 2 * TILE * (int)sizeof(T) : 0;
	constexpr int GROUP = F8 ? DEC + ST * 2 * RAW : ST * 2 * TILE * (int)sizeof(T);
	// REGS: the order of the head dimension inside each 16-wide step of
	// Q K^T is permuted so that a thread's B operand is four adjacent codes
	// of one key (one 32-bit ldmatrix element, dims 4 q4 .. 4 q4 + 3); Q's A
	// fragments follow (the dot product does not care in which order), and
	// the output tiles of P V are split into even and odd dimensions.
	constexpr int QO = REGS ? 4 : 2, HO = REGS ? 2 : 8;
	constexpr float LOG2E = 1.4426950408889634f, LN2 = 0.6931471805599453f;
	const float ninf = -__int_as_float(0x7f800000);
	extern __shared__ __align__(16) unsigned char smem[];

	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	const int mw = warp % MW, kw = warp / MW, gt = mw * 32 + lane;
	// This group's [ST][K tile, V tile]; under F8 its decoded [K tile, V
	// tile] (not with REGS), then its [ST][K, V] E4M3 tiles (raw).
	T *const stages = (T *)(smem + kw * GROUP);
	unsigned char *const raw = smem + kw * GROUP + DEC;
	// Under F8 the scores and the output take the scales (and the
	// decoder's mul, F8MUL); new keys and values are encoded times their
	// reciprocals.
	const float kinv = F8 ? __frcp_rn(ksc) : 1.f, vinv = F8 ? __frcp_rn(vsc) : 1.f;

	// The items are the batch layout, copied in before the step's first
	// kernel: readable before the wait.
	const int4 it = items[blockIdx.x];
	const int t0 = it.x, ntok = it.y, slot = it.z, pos0 = it.w;
	const int h = blockIdx.y, G = H / KV, R = ntok * G;
	C *kh = kc + ((long long)slot * KV + h) * cap * D;
	C *vh = vc + ((long long)slot * KV + h) * cap * D;

	int keyBeg = 0, keyEnd = pos0 + ntok; // keys 0..pos0+ntok-1 exist
	const bool split = nsplit > 1 && keyEnd > shortKeys;
	if (nsplit > 1 && !split && blockIdx.z != 0) return; // a short context: block 0 does it all
	if (split) {
		const int chunk = ((keyEnd + nsplit - 1) / nsplit + KT - 1) / KT * KT;
		keyBeg = blockIdx.z * chunk;
		keyEnd = min(keyEnd, keyBeg + chunk);
	}
	const int ntiles = keyEnd > keyBeg ? (keyEnd - keyBeg + KT - 1) / KT : 0;
	const int mine = ntiles > kw ? (ntiles - kw + KW - 1) / KW : 0; // this group's tiles

	// own fills row kr of a K/V stage with new key `key` (>= pos0, under
	// ROPE) from its token's QKV row, and writes it to the cache: the
	// thread of chunk ch < D/16 rotates K's chunks ch and ch + D/16 (as
	// rope_kv: the rounded projection, rotated in fp32, rounded again), and
	// every thread copies its chunk of V. Without a stage (dk null) it
	// writes the cache only.
	auto own = [&](int key, int kr, int ch, unsigned char *dk, unsigned char *dv) {
		const T *src = qkv + (long long)(t0 + key - pos0) * W;
		const pack8 v = *(const pack8 *)(src + (H + KV + h) * D + ch * 8);
		// The key's row of the cache, K's and V's.
		long long crow = (long long)key * D;
		C *kb = kh, *vb = vh;
		if constexpr (PAGED) {
			crow = kv_row<true>(tables, stride, slot, KV, h, cap, key) * D;
			kb = kc;
			vb = vc;
		}
		if constexpr (F8) {
			float f[8];
#pragma unroll
			for (int e = 0; e < 8; e++) f[e] = pack_get<T>(v, e);
			const uint2 q = e4m3x8(f, vinv);
			if (dv) *(uint2 *)(dv + kr * RS + ch * 8) = q;
			*(uint2 *)(vb + crow + ch * 8) = q;
		} else {
			if (dv) *(pack8 *)((T *)dv + kr * LDS + ch * 8) = v;
			*(pack8 *)(vb + crow + ch * 8) = v;
		}
		if (ch < CPR / 2) {
			const T *ks = src + (H + h) * D + ch * 8;
			const pack8 a = *(const pack8 *)ks, b = *(const pack8 *)(ks + D / 2);
			const float4 *c4 = (const float4 *)(table + (long long)key * D + ch * 8);
			const float4 *s4 = (const float4 *)(table + (long long)key * D + D / 2 + ch * 8);
			const float4 cA = c4[0], cB = c4[1], sA = s4[0], sB = s4[1];
			const float cs[8] = {cA.x, cA.y, cA.z, cA.w, cB.x, cB.y, cB.z, cB.w};
			const float sn[8] = {sA.x, sA.y, sA.z, sA.w, sB.x, sB.y, sB.z, sB.w};
			float fa[8], fb[8];
#pragma unroll
			for (int e = 0; e < 8; e++) {
				const float x0 = pack_get<T>(a, e), x1 = pack_get<T>(b, e);
				fa[e] = x0 * cs[e] - x1 * sn[e];
				fb[e] = x1 * cs[e] + x0 * sn[e];
			}
			if constexpr (F8) {
				// Encoded from the rotation in float32, as the CPU backend
				// encodes its keys.
				const uint2 qa = e4m3x8(fa, kinv), qb = e4m3x8(fb, kinv);
				if (dk) {
					*(uint2 *)(dk + kr * RS + ch * 8) = qa;
					*(uint2 *)(dk + kr * RS + D / 2 + ch * 8) = qb;
				}
				*(uint2 *)(kb + crow + ch * 8) = qa;
				*(uint2 *)(kb + crow + D / 2 + ch * 8) = qb;
			} else {
				pack8 ra = {}, rb = {};
#pragma unroll
				for (int e = 0; e < 8; e++) {
					pack_set<T>(ra, e, fa[e]);
					pack_set<T>(rb, e, fb[e]);
				}
				if (dk) {
					*(pack8 *)((T *)dk + kr * LDS + ch * 8) = ra;
					*(pack8 *)((T *)dk + kr * LDS + D / 2 + ch * 8) = rb;
				}
				*(pack8 *)(kb + crow + ch * 8) = ra;
				*(pack8 *)(kb + crow + D / 2 + ch * 8) = rb;
			}
		}
	};
	// load queues the group's j-th tile into stage j % ST: the cached keys
	// (cached) through cp.async, zero-filled past the last key; under ROPE
	// the new keys of the first ST - 1 tiles (fresh) through own, which
	// must wait for the QKV rows. The new keys of later tiles are in the
	// cache by then (own_early) and come with the cached ones.
	auto load = [&](int j, bool cached, bool fresh) {
		const int k0 = keyBeg + (kw + j * KW) * KT;
		const bool early = ROPE && j >= ST - 1;
		unsigned char *dk, *dv; // the stage's K and V tiles
		if constexpr (F8) {
			dk = raw + (j % ST) * 2 * RAW;
			dv = dk + RAW;
		} else {
			dk = (unsigned char *)(stages + (j % ST) * 2 * TILE);
			dv = dk + TILE * (int)sizeof(T);
		}
		// The cached keys in chunks of 16 bytes, one cp.async each (through
		// L2 only): 8 values of T, or 16 codes (half the copies of 8-code
		// ones, and no line kept in L1 for a stream read once).
		constexpr int VC = F8 ? 16 : 8, CC = D / VC, NC = KT * CC;
		if (cached) {
			const C *kb = PAGED ? kc : kh, *vb = PAGED ? vc : vh;
#pragma unroll
			for (int i = 0; i < (NC + NG - 1) / NG; i++) {
				const int c = gt + i * NG, kr = c / CC, cc = c - kr * CC, key = k0 + kr;
				const bool ok = key < keyEnd;
				if ((NC % NG != 0 && c >= NC) || (ROPE && !early && ok && key >= pos0)) continue;
				long long off; // masked keys read nothing: from the cache's base
				if constexpr (PAGED) {
					off = ok ? kv_row<true>(tables, stride, slot, KV, h, cap, key) * D + cc * VC : 0;
				} else {
					off = ok ? (long long)key * D + cc * VC : 0;
				}
				// Its place in the stage: rows of LDS values, or of RS codes.
				const u32 sk = F8 ? smem_u32(dk + kr * RS + cc * VC) : smem_u32((T *)dk + kr * LDS + cc * VC);
				const u32 sv = F8 ? smem_u32(dv + kr * RS + cc * VC) : smem_u32((T *)dv + kr * LDS + cc * VC);
				cp_async16(sk, kb + off, ok);
				cp_async16(sv, vb + off, ok);
			}
		}
		// Under ROPE the tile's new keys, through own in chunks of 8 values.
		if constexpr (ROPE) {
			if (fresh && !early && k0 + KT > pos0 && k0 < keyEnd) {
#pragma unroll
				for (int i = 0; i < LOADS; i++) {
					const int c = gt + i * NG, kr = c / CPR, ch = c - kr * CPR, key = k0 + kr;
					if (key < keyEnd && key >= pos0) own(key, kr, ch, dk, dv);
				}
			}
		}
	};
	// own_early writes the new keys of the tiles the main loop will load
	// (the group's j >= ST - 1) into the cache now, by the group that
	// loads them (the loop's group_sync orders these writes before its
	// copies): their QKV and table reads overlap the queries', not a
	// tile's turn in the pipeline.
	auto own_early = [&]() {
		for (int key = max(pos0, keyBeg); key < keyEnd; key++) {
			const int t = (key - keyBeg) / KT;
			if (t % KW != kw || t / KW < ST - 1) continue;
			for (int ch = gt; ch < CPR; ch += NG) own(key, 0, ch, nullptr, nullptr);
		}
	};
	// The first tiles' copies go out before the queries are read, so the
	// two latencies overlap (under ROPE, before the wait too).
#pragma unroll
	for (int s = 0; s < ST - 1; s++) {
		if (s < mine) load(s, true, false);
		cp_async_commit();
	}

	// This thread's rows of the warp's 16, and their A fragments of Q
	// (rows past R are zeros).
	const int g4 = lane >> 2, q4 = lane & 3;
	const int r0 = mw * 16 + g4, r1 = r0 + 8;
	const bool active = mw * 16 < R; // a warp with no real rows only helps copy
	// Under ROPE: the angles of this thread's Q elements, [row r0 / r1][16-
	// column step kk of the first half][columns +0 / +8], cos and sin (the
	// table is a weight: read before the wait); then the wait, then the new
	// keys of the tiles already queued.
	constexpr int QH = ROPE && !QM ? D / 32 : 1;
	float2 qcos[2][QH][2], qsin[2][QH][2];
	// QM: the same for the E4M3 fragments' elements, [row][32-column block
	// b of the first half][16-column half][4 columns].
	constexpr int QB = QM ? D / 32 : 1, QBR = ROPE && QM ? D / 64 : 1;
	float4 qc8[2][QBR][2], qs8[2][QBR][2];
	if constexpr (ROPE && QM) {
#pragma unroll
		for (int i = 0; i < 2; i++) {
			const int row = i ? r1 : r0;
			const int p = pos0 + min(row / G, ntok - 1);
			const float *tb = table + (long long)p * D + q4 * 4;
#pragma unroll
			for (int b = 0; b < QBR; b++)
#pragma unroll
				for (int hf = 0; hf < 2; hf++) {
					qc8[i][b][hf] = *(const float4 *)(tb + b * 32 + hf * 16);
					qs8[i][b][hf] = *(const float4 *)(tb + D / 2 + b * 32 + hf * 16);
				}
		}
		pdl_enter();
#pragma unroll
		for (int s = 0; s < ST - 1; s++)
			if (s < mine) load(s, false, true);
		own_early();
	} else if constexpr (ROPE) {
#pragma unroll
		for (int i = 0; i < 2; i++) {
			const int row = i ? r1 : r0;
			const int p = pos0 + min(row / G, ntok - 1); // rows past R: any valid position (their Q is zero)
			const float *tb = table + (long long)p * D + q4 * QO;
#pragma unroll
			for (int kk = 0; kk < QH; kk++)
#pragma unroll
				for (int hi = 0; hi < 2; hi++) {
					qcos[i][kk][hi] = *(const float2 *)(tb + kk * 16 + hi * HO);
					qsin[i][kk][hi] = *(const float2 *)(tb + D / 2 + kk * 16 + hi * HO);
				}
		}
		pdl_enter();
#pragma unroll
		for (int s = 0; s < ST - 1; s++)
			if (s < mine) load(s, false, true);
		own_early();
	}
	// QM: each row of Q times 448 over its largest magnitude (qsc[i] undoes
	// it), split into two E4M3 terms (e4m3x4_split), the m16n8k32 A
	// fragments of both: qh[b][j], ql[b][j] hold row (j & 1 ? r1 : r0),
	// columns b * 32 + (j >> 1) * 16 + q4 * 4 .. + 3, in their natural order
	// (the cached keys' order: no permutation). The rotation, under ROPE, is
	// rope_kv's (fp32, rounded to T), as below; the split keeps about 8
	// significant bits of each element, bf16's 8 and 3 fewer than fp16's.
	u32 qh[QB][4], ql[QB][4];
	float qsc[2] = {1.f, 1.f};
	if constexpr (QM) {
		float x[2][QB][2][4];
#pragma unroll
		for (int i = 0; i < 2; i++) {
			const int row = i ? r1 : r0, tok = row / G, j = row - tok * G;
			const T *q = qkv + (long long)(t0 + tok) * W + (h * G + j) * D + q4 * 4;
#pragma unroll
			for (int b = 0; b < QB; b++)
#pragma unroll
				for (int hf = 0; hf < 2; hf++) {
					const uint2 v = row < R ? *(const uint2 *)(q + b * 32 + hf * 16) : make_uint2(0u, 0u);
					const float2 a = unpack2(v.x, T{}), c = unpack2(v.y, T{});
					x[i][b][hf][0] = a.x;
					x[i][b][hf][1] = a.y;
					x[i][b][hf][2] = c.x;
					x[i][b][hf][3] = c.y;
				}
		}
		if constexpr (ROPE) {
			// Column c of the first half and its partner c + D / 2 are block
			// b and b + D / 64 of the same thread.
#pragma unroll
			for (int i = 0; i < 2; i++)
#pragma unroll
				for (int b = 0; b < QBR; b++)
#pragma unroll
					for (int hf = 0; hf < 2; hf++) {
						const float cs[4] = {qc8[i][b][hf].x, qc8[i][b][hf].y, qc8[i][b][hf].z, qc8[i][b][hf].w};
						const float sn[4] = {qs8[i][b][hf].x, qs8[i][b][hf].y, qs8[i][b][hf].z, qs8[i][b][hf].w};
#pragma unroll
						for (int e = 0; e < 4; e++) {
							const float x0 = x[i][b][hf][e], x1 = x[i][b + QBR][hf][e];
							x[i][b][hf][e] = to_f32(from_f32<T>(x0 * cs[e] - x1 * sn[e]));
							x[i][b + QBR][hf][e] = to_f32(from_f32<T>(x1 * cs[e] + x0 * sn[e]));
						}
					}
		}
#pragma unroll
		for (int i = 0; i < 2; i++) {
			float amax = 0.f;
#pragma unroll
			for (int b = 0; b < QB; b++)
#pragma unroll
				for (int hf = 0; hf < 2; hf++)
#pragma unroll
					for (int e = 0; e < 4; e++) amax = fmaxf(amax, fabsf(x[i][b][hf][e]));
			amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1)); // the row's quad
			amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
			const float inv = amax > 0.f ? FP8_MAX / amax : 0.f;
			qsc[i] = amax / FP8_MAX;
#pragma unroll
			for (int b = 0; b < QB; b++)
#pragma unroll
				for (int hf = 0; hf < 2; hf++) {
					float y[4];
#pragma unroll
					for (int e = 0; e < 4; e++) y[e] = x[i][b][hf][e] * inv;
					e4m3x4_split(y, qh[b][i + 2 * hf], ql[b][i + 2 * hf]);
				}
		}
	}
	u32 qa[QM ? 1 : D / 16][4];
	if constexpr (!QM) {
		auto qrow = [&](int r) {
			const int tok = r / G, j = r - tok * G;
			return qkv + (long long)(t0 + tok) * W + (h * G + j) * D + q4 * QO;
		};
		const T *q0 = qrow(r0), *q1 = qrow(r1);
		const bool ok0 = r0 < R, ok1 = r1 < R;
#pragma unroll
		for (int kk = 0; kk < D / 16; kk++) {
			qa[kk][0] = ok0 ? *(const u32 *)(q0 + kk * 16) : 0u;
			qa[kk][1] = ok1 ? *(const u32 *)(q1 + kk * 16) : 0u;
			qa[kk][2] = ok0 ? *(const u32 *)(q0 + kk * 16 + HO) : 0u;
			qa[kk][3] = ok1 ? *(const u32 *)(q1 + kk * 16 + HO) : 0u;
		}
	}
	if constexpr (ROPE && !QM) {
		// qa[kk][j] holds row (j & 1 ? r1 : r0), columns kk * 16 + q4 * QO
		// (+ HO for j >= 2) and the next; its partner, D / 2 further, is
		// qa[kk + D / 32][j]. Rotated in fp32, rounded as rope_kv stores.
#pragma unroll
		for (int kk = 0; kk < QH; kk++)
#pragma unroll
			for (int j = 0; j < 4; j++) {
				const float2 x0 = unpack2(qa[kk][j], T{}), x1 = unpack2(qa[kk + QH][j], T{});
				const float2 c = qcos[j & 1][kk][j >> 1], sn = qsin[j & 1][kk][j >> 1];
				qa[kk][j] = pack2(x0.x * c.x - x1.x * sn.x, x0.y * c.y - x1.y * sn.y, T{});
				qa[kk + QH][j] = pack2(x1.x * c.x + x0.x * sn.x, x1.y * c.y + x0.y * sn.y, T{});
			}
	}

	// SW: O^T, D / 16 m16n8 tiles (rows dimensions, columns queries), half
	// the accumulators of O's NO tiles of 16 rows.
	constexpr int NOA = SW ? D / 16 : NO;
	float o[NOA][4];
#pragma unroll
	for (int d = 0; d < NOA; d++) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.f;
	float m[2] = {ninf, ninf}, l[2] = {0.f, 0.f}; // running max (log2 units) and sum per row
	constexpr float F8MUL = REGS ? e4m3_bits<T>::mul : e4m3_h16<T>::mul;
	const float sl2 = scale * LOG2E * (F8 ? ksc * (QM ? 1.f : F8MUL) : 1.f);
	// A row's scale: QM's Q rows carry their own.
	const float sr[2] = {sl2 * qsc[0], sl2 * qsc[1]};
	// Row r sees keys up to its own position (causal) and below keyEnd; a
	// tile past the warp's first row's limit needs masking.
	const int lim0 = min(keyEnd - 1, pos0 + r0 / G), lim1 = min(keyEnd - 1, pos0 + r1 / G);
	const int wlim = min(keyEnd - 1, pos0 + mw * 16 / G);
	// SW: a thread's queries are columns 2 q4 and the next.
	const int limc[2] = {min(keyEnd - 1, pos0 + (2 * q4) / G), min(keyEnd - 1, pos0 + (2 * q4 + 1) / G)};

	for (int j = 0; j < mine; j++) {
		cp_async_wait<ST - 2>();
		group_sync<MW, KW>(kw); // tile j landed for the group; its stage of tile j - 1 is free
		if (j + ST - 1 < mine) load(j + ST - 1, true, true);
		cp_async_commit();
		// Tile j's codes (REGS: read by ldmatrix below).
		const unsigned char *const rk = raw + (j % ST) * 2 * RAW, *const rv = rk + RAW;
		if constexpr (F8 && !REGS) {
			// Tile j's codes into the group's decoded tiles, 16 a thread at
			// a time (every warp of the group is past tile j - 1: the sync
			// above), then a sync before they are read.
			constexpr int P16 = KT * D / 16; // 16-code pieces of a tile
			for (int i = gt; i < 2 * P16; i += NG) {
				const int isv = i >= P16, q = i - isv * P16, r = q / (D / 16), c16 = q - r * (D / 16);
				pack8 lo, hi;
				e4m3x16<T>(*(const uint4 *)(rk + isv * RAW + r * RS + c16 * 16), lo, hi);
				T *dst = stages + isv * TILE + r * LDS + c16 * 16;
				*(pack8 *)dst = lo;
				*(pack8 *)(dst + 8) = hi;
			}
			group_sync<MW, KW>(kw);
		}
		if (!active) continue;
		const T *ks = F8 ? stages : stages + (j % ST) * 2 * TILE, *vs = ks + TILE;
		const int k0 = keyBeg + (kw + j * KW) * KT;
		if constexpr (SW) {
			// The products with the roles swapped, so that a decode item's
			// few query rows are mma's n = 8, not 16 rows of m:
			// S^T = K Q^T, keys as the A operand (m16) straight from the
			// codes, the queries Q^T as B (qa[kk][0] and qa[kk][2]: query
			// g4's dims 4 q4 .. 4 q4 + 3 of step kk, the head dimension
			// permuted within each step as for REGS); then O^T += V^T P^T,
			// V^T's A fragments from the codes by ldmatrix.trans (the rows
			// of an m tile are its even dims, then its odd ones), P^T's B
			// fragments from the scores by movmatrix. Each code is still
			// converted once; half the mma of REGS and half its output
			// accumulators.
			constexpr int MT = KT / 16;
			float st[MT][4];
#pragma unroll
			for (int t = 0; t < MT; t++) st[t][0] = st[t][1] = st[t][2] = st[t][3] = 0.f;
			if constexpr (!F8) {
				// 16-bit (the _t kernels): K's m16 x k16 A fragments by plain
				// ldmatrix (keys +0 / +8 x dims +0 / +8 of the step), the
				// head dimension in its natural order.
#pragma unroll
				for (int t = 0; t < MT; t++)
#pragma unroll
					for (int kk = 0; kk < D / 16; kk++) {
						u32 a[4];
						ldmatrix_x4(a, smem_u32(ks + (t * 16 + (lane & 15)) * LDS + kk * 16 + (lane >> 4) * 8));
						const u32 b[2] = {qa[kk][0], qa[kk][2]};
						mma(st[t], a, b, T{});
					}
			} else {
#pragma unroll
				for (int t = 0; t < MT; t++)
#pragma unroll
					for (int kk = 0; kk < D / 16; kk += 2) {
						// Keys +0 / +8 of the m tile x dims of steps kk, kk + 1;
						// a thread's word is its key's dims 4 q4 .. 4 q4 + 3.
						u32 c[4];
						ldmatrix_x4(c, smem_u32(rk + (t * 16 + ((lane >> 3) & 1) * 8 + (lane & 7)) * RS + (kk + (lane >> 4)) * 16));
#pragma unroll
						for (int x = 0; x < 2; x++) {
							const u32 a[4] = {e4m3_bits<T>::template two<0, 1>(c[2 * x]), e4m3_bits<T>::template two<0, 1>(c[2 * x + 1]),
								e4m3_bits<T>::template two<2, 3>(c[2 * x]), e4m3_bits<T>::template two<2, 3>(c[2 * x + 1])};
							const u32 b[2] = {qa[kk + x][0], qa[kk + x][2]};
							mma(st[t], a, b, T{});
						}
					}
			}
			const bool edge = k0 + KT - 1 > wlim;
#pragma unroll
			for (int t = 0; t < MT; t++)
#pragma unroll
				for (int e = 0; e < 4; e++) {
					float v = st[t][e] * sl2;
					if (edge && k0 + t * 16 + g4 + 8 * (e >> 1) > limc[e & 1]) v = ninf;
					st[t][e] = v;
				}
			float alpha[2];
			softmax_cols<MT>(st, m, l, alpha);
#pragma unroll
			for (int d = 0; d < NOA; d++) {
				o[d][0] *= alpha[0];
				o[d][1] *= alpha[1];
				o[d][2] *= alpha[0];
				o[d][3] *= alpha[1];
			}
#pragma unroll
			for (int t = 0; t < MT; t++) {
				// P^T's 8 x 8 blocks of keys +0 and +8, transposed: query
				// g4's keys 2 q4 and the next, B's k rows.
				const u32 pb[2] = {movmatrix_trans(pack2(st[t][0], st[t][1], T{})), movmatrix_trans(pack2(st[t][2], st[t][3], T{}))};
				if constexpr (!F8) {
					// V^T's A fragments by ldmatrix.trans of the keys +0 / +8 x
					// dims +0 / +8 blocks: output tile c's rows are dims 16 c ..
					// 16 c + 15 in order.
#pragma unroll
					for (int c = 0; c < D / 16; c++) {
						u32 a[4];
						ldmatrix_x4_trans(a, smem_u32(vs + (t * 16 + (lane & 7) + ((lane >> 4) & 1) * 8) * LDS + c * 16 + ((lane >> 3) & 1) * 8));
						mma(o[c], a, pb, T{});
					}
				} else {
#pragma unroll
					for (int c = 0; c < D / 16; c += 2) {
						// Keys +0 / +8 x dims 16 c .. 16 c + 31, transposed: a
						// thread's word is dims 2 g4, 2 g4 + 1 of keys 2 q4 and
						// the next (bytes: key 2 q4's pair, then the next key's).
						u32 v[4];
						ldmatrix_x4_trans(v, smem_u32(rv + (t * 16 + ((lane >> 3) & 1) * 8 + (lane & 7)) * RS + (c + (lane >> 4)) * 16));
#pragma unroll
						for (int hb = 0; hb < 2; hb++) {
							const u32 lo = v[2 * hb], hi = v[2 * hb + 1];
							const u32 a[4] = {e4m3_bits<T>::template two<0, 2>(lo), e4m3_bits<T>::template two<1, 3>(lo),
								e4m3_bits<T>::template two<0, 2>(hi), e4m3_bits<T>::template two<1, 3>(hi)};
							mma(o[c + hb], a, pb, T{});
						}
					}
				}
			}
		} else {
			float s[NS][4];
#pragma unroll
			for (int n = 0; n < NS; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
			if constexpr (QM) {
				// The same ldmatrix as below, each block of codes as it stands a
				// B operand of m16n8k32 (a thread's element is its key's columns
				// 4 q4 .. 4 q4 + 3 of a 16-column half): keys n with columns
				// b * 32 .. + 31 are {c[0], c[2]}, keys n + 1 {c[1], c[3]}; each
				// times both terms of Q.
#pragma unroll
				for (int b = 0; b < D / 32; b++)
#pragma unroll
					for (int n = 0; n < NS; n += 2) {
						u32 c[4];
						ldmatrix_x4(c, smem_u32(rk + (n * 8 + ((lane >> 3) & 1) * 8 + (lane & 7)) * RS + (2 * b + (lane >> 4)) * 16));
						const u32 b0[2] = {c[0], c[2]}, b1[2] = {c[1], c[3]};
						mma_e4m3(s[n], qh[b], b0);
						mma_e4m3(s[n], ql[b], b0);
						mma_e4m3(s[n + 1], qh[b], b1);
						mma_e4m3(s[n + 1], ql[b], b1);
					}
			} else if constexpr (REGS) {
				// Four 8-key x 16-dim blocks of codes an ldmatrix: keys n, n + 1
				// (8 each) x dims kk, kk + 1 (16 each); a thread's element is
				// its key's dims 4 q4 .. 4 q4 + 3, the B operand's two pairs.
#pragma unroll
				for (int kk = 0; kk < D / 16; kk += 2)
#pragma unroll
					for (int n = 0; n < NS; n += 2) {
						u32 c[4];
						ldmatrix_x4(c, smem_u32(rk + (n * 8 + ((lane >> 3) & 1) * 8 + (lane & 7)) * RS + (kk + (lane >> 4)) * 16));
#pragma unroll
						for (int x = 0; x < 4; x++) {
							const u32 b[2] = {e4m3_bits<T>::template two<0, 1>(c[x]), e4m3_bits<T>::template two<2, 3>(c[x])};
							mma(s[n + (x & 1)], qa[kk + (x >> 1)], b, T{});
						}
					}
			} else {
#pragma unroll
				for (int kk = 0; kk < D / 16; kk++) {
#pragma unroll
					for (int n = 0; n < NS; n += 2) {
						u32 b[4];
						ldmatrix_x4(b, smem_u32(ks + (n * 8 + (lane & 7) + ((lane >> 4) << 3)) * LDS + kk * 16 + ((lane >> 3) & 1) * 8));
						mma(s[n], qa[kk], b, T{});
						mma(s[n + 1], qa[kk], b + 2, T{});
					}
				}
			}
			const bool edge = k0 + KT - 1 > wlim;
#pragma unroll
			for (int n = 0; n < NS; n++)
#pragma unroll
				for (int e = 0; e < 4; e++) {
					float v = s[n][e] * sr[e >> 1];
					if (edge && k0 + n * 8 + q4 * 2 + (e & 1) > (e < 2 ? lim0 : lim1)) v = ninf;
					s[n][e] = v;
				}
			float alpha[2];
			softmax_tile<NS>(s, m, l, alpha);
#pragma unroll
			for (int d = 0; d < NO; d++) {
				o[d][0] *= alpha[0];
				o[d][1] *= alpha[0];
				o[d][2] *= alpha[1];
				o[d][3] *= alpha[1];
			}
			// O += P V, 16 keys a step.
#pragma unroll
			for (int kk = 0; kk < KT / 16; kk++) {
				u32 pa[4] = {pack2(s[2 * kk][0], s[2 * kk][1], T{}), pack2(s[2 * kk][2], s[2 * kk][3], T{}),
					pack2(s[2 * kk + 1][0], s[2 * kk + 1][1], T{}), pack2(s[2 * kk + 1][2], s[2 * kk + 1][3], T{})};
				if constexpr (REGS) {
					// Four 8-key x 16-dim blocks, transposed: keys +0, +8 x dims
					// c, c + 1; a thread's element is keys 2 q4, 2 q4 + 1 of two
					// adjacent dims (bytes: key 2 q4's pair, then the next key's).
					// Output tile 2 c holds block c's even dims, 2 c + 1 its odd.
					// PM: m16n8k32 with both halves of k the same 16 keys: A's
					// first half P times 448 as E4M3 codes, its second the
					// remainders (e4m3x4_split), B's halves the same value codes,
					// so one mma adds (hi + lo) V. A thread's P elements are keys
					// 2 q4, 2 q4 + 1 of score tiles 2 kk and 2 kk + 1, as they
					// stand (k 4 q4 .. 4 q4 + 3 taken as those keys), and its
					// value codes for them bytes 0, 2 of keys +0's and of keys
					// +8's elements for the even dim, bytes 1, 3 for the odd.
					u32 p8[4];
					if constexpr (PM) {
#pragma unroll
						for (int i = 0; i < 2; i++) {
							const float y[4] = {s[2 * kk][2 * i] * FP8_MAX, s[2 * kk][2 * i + 1] * FP8_MAX,
								s[2 * kk + 1][2 * i] * FP8_MAX, s[2 * kk + 1][2 * i + 1] * FP8_MAX};
							e4m3x4_split(y, p8[i], p8[2 + i]);
						}
					}
#pragma unroll
					for (int c = 0; c < D / 16; c += 2) {
						u32 v[4];
						ldmatrix_x4_trans(v, smem_u32(rv + (kk * 16 + ((lane >> 3) & 1) * 8 + (lane & 7)) * RS + (c + (lane >> 4)) * 16));
#pragma unroll
						for (int hb = 0; hb < 2; hb++) {
							const u32 lo = v[2 * hb], hi = v[2 * hb + 1];
							if constexpr (PM) {
								const u32 ev = __byte_perm(lo, hi, 0x6420), od = __byte_perm(lo, hi, 0x7531);
								const u32 be[2] = {ev, ev}, bo[2] = {od, od};
								mma_e4m3(o[2 * (c + hb)], p8, be);
								mma_e4m3(o[2 * (c + hb) + 1], p8, bo);
							} else {
								const u32 be[2] = {e4m3_bits<T>::template two<0, 2>(lo), e4m3_bits<T>::template two<0, 2>(hi)};
								const u32 bo[2] = {e4m3_bits<T>::template two<1, 3>(lo), e4m3_bits<T>::template two<1, 3>(hi)};
								mma(o[2 * (c + hb)], pa, be, T{});
								mma(o[2 * (c + hb) + 1], pa, bo, T{});
							}
						}
					}
				} else {
#pragma unroll
					for (int d = 0; d < NO; d += 2) {
						u32 b[4];
						ldmatrix_x4_trans(b, smem_u32(vs + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * LDS + d * 8 + (lane >> 4) * 8));
						mma(o[d], pa, b, T{});
						mma(o[d + 1], pa, b + 2, T{});
					}
				}
			}
		}
	}
	cp_async_wait<0>(); // only empty groups can be left, but the stages are reused below
	if constexpr (F8) {
		// PM: the values are the codes' own, P was times 448.
		const float vm = PM ? vsc * (1.f / FP8_MAX) : vsc * F8MUL;
#pragma unroll
		for (int d = 0; d < NOA; d++) {
			o[d][0] *= vm;
			o[d][1] *= vm;
			o[d][2] *= vm;
			o[d][3] *= vm;
		}
	}
#pragma unroll
	for (int i = 0; i < 2; i++) {
		if constexpr (SW) { // a column's keys are across lane / 4
			l[i] += __shfl_xor_sync(0xffffffffu, l[i], 4);
			l[i] += __shfl_xor_sync(0xffffffffu, l[i], 8);
			l[i] += __shfl_xor_sync(0xffffffffu, l[i], 16);
		} else {
			l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
			l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
		}
	}

	// Pair d of row i (0: r0, 1: r1) of this thread's O and its first
	// column: columns d * 8 + q4 * 2 and the next; under REGS, output tile
	// 2 c held block c's even dims and 2 c + 1 its odd, so a thread's pairs
	// are columns c * 16 + q4 * 4 + {0, 1} and {2, 3}.
	auto pairAt = [&](int d, int i, int &col) -> float2 {
		if constexpr (REGS) {
			const int c = d >> 1, hf = d & 1;
			col = c * 16 + q4 * 4 + hf * 2;
			return make_float2(o[2 * c][2 * i + hf], o[2 * c + 1][2 * i + hf]);
		} else {
			col = d * 8 + q4 * 2;
			return make_float2(o[d][2 * i], o[d][2 * i + 1]);
		}
	};
	const long long base = ((long long)(blockIdx.x * KV + h) * nsplit + blockIdx.z) * rowsMax;
	if constexpr (KW == 1) {
		// Each warp holds its rows' final (m, l, O): written straight out.
#pragma unroll
		for (int i = 0; i < 2; i++) {
			const int r = i ? r1 : r0;
			if (r >= R) continue;
			if (split) {
				float *p = part + (base + r) * D;
#pragma unroll
				for (int d = 0; d < NO; d++) {
					int col;
					const float2 v = pairAt(d, i, col);
					*(float2 *)(p + col) = v;
				}
				if (q4 == 0) *(float2 *)&ml[(base + r) * 2] = make_float2(m[i] * LN2, l[i]);
			} else {
				const int tok = r / G, jh = r - tok * G;
				T *dst = out + (long long)(t0 + tok) * H * D + (h * G + jh) * D;
				const float inv = 1.f / l[i];
#pragma unroll
				for (int d = 0; d < NO; d++) {
					int col;
					const float2 v = pairAt(d, i, col);
					*(u32 *)(dst + col) = pack2(v.x * inv, v.y * inv, T{});
				}
			}
		}
	} else {
		// The key groups merge through shared memory: each warp leaves its
		// (m, l, O) in its group's stages, then the block combines them as
		// split partials are combined (attn_split.cuh).
		constexpr int LDO = D + 4;           // floats per row of O
		constexpr int MERGE = 16 * LDO + 32; // floats per warp: O, then (m, l) per row
		static_assert(MW * MERGE * 4 <= GROUP, "merge area larger than the stages");
		group_sync<MW, KW>(kw); // the group is done reading its stages
		float *mg = (float *)(smem + kw * GROUP) + mw * MERGE;
		if constexpr (SW) {
			// Query 2 q4 + i's two dims of O^T's rows g4 and g4 + 8 of tile
			// d, as rows of the same layout: dims 16 d + 2 g4 and the next
			// under REGS (_f8t), 16 d + g4 and 16 d + 8 + g4 over a 16-bit
			// cache (_t).
#pragma unroll
			for (int i = 0; i < 2; i++) {
				const int rl = 2 * q4 + i;
#pragma unroll
				for (int d = 0; d < NOA; d++) {
					if constexpr (REGS) {
						*(float2 *)&mg[rl * LDO + d * 16 + 2 * g4] = make_float2(o[d][i], o[d][2 + i]);
					} else {
						mg[rl * LDO + d * 16 + g4] = o[d][i];
						mg[rl * LDO + d * 16 + 8 + g4] = o[d][2 + i];
					}
				}
				if (g4 == 0) *(float2 *)&mg[16 * LDO + rl * 2] = make_float2(m[i], l[i]);
			}
		} else {
#pragma unroll
			for (int i = 0; i < 2; i++) {
				const int rl = g4 + 8 * i;
#pragma unroll
				for (int d = 0; d < NO; d++) {
					int col;
					const float2 v = pairAt(d, i, col);
					*(float2 *)&mg[rl * LDO + col] = v;
				}
				if (q4 == 0) *(float2 *)&mg[16 * LDO + rl * 2] = make_float2(m[i], l[i]);
			}
		}
		__syncthreads();
		for (int i = tid; i < R * (D / 2); i += blockDim.x) {
			const int r = i / (D / 2), d = (i - r * (D / 2)) * 2;
			const float *src = (const float *)smem + (r >> 4) * MERGE;
			const int rl = r & 15;
			float mz[KW], M = ninf;
#pragma unroll
			for (int z = 0; z < KW; z++) {
				mz[z] = src[z * (GROUP / 4) + 16 * LDO + rl * 2];
				M = fmaxf(M, mz[z]);
			}
			float L = 0.f, O0 = 0.f, O1 = 0.f;
			if (M != ninf) {
#pragma unroll
				for (int z = 0; z < KW; z++) {
					const float *g = src + z * (GROUP / 4);
					const float e = ex2(mz[z] - M);
					const float2 oz = *(const float2 *)&g[rl * LDO + d];
					L += g[16 * LDO + rl * 2 + 1] * e;
					O0 += oz.x * e;
					O1 += oz.y * e;
				}
			}
			if (split) {
				*(float2 *)&part[(base + r) * D + d] = make_float2(O0, O1);
				if (d == 0) *(float2 *)&ml[(base + r) * 2] = make_float2(M * LN2, L);
			} else {
				const int tok = r / G, jh = r - tok * G;
				const float inv = 1.f / L;
				*(u32 *)(out + (long long)(t0 + tok) * H * D + (h * G + jh) * D + d) = pack2(O0 * inv, O1 * inv, T{});
			}
		}
	}
	if (split && counters && split_last(counters + blockIdx.x * KV + h, nsplit))
		combine_rows<T>(out, part, ml, t0, R, h, H, KV, D, rowsMax, nsplit, (long long)(blockIdx.x * KV + h) * nsplit * rowsMax);
}
