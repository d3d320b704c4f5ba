// Prefill attention on Hopper's warpgroup MMA, warp specialised (sm_90a):
// the work items, layouts and outputs of attention_wg.cu's two-warpgroup
// blocks (128 query rows, head dimension 128, 64-key tiles, nsplit 1),
// with the loads taken off the threads that multiply.
//
// Why: attention_wg.cu's threads load the next tile, meet at a block-wide
// barrier every tile and wait for each product before the next: a
// warpgroup's tensor cores idle through its softmax, and the kernel runs
// near 400 TFLOP/s of causal work on an H100 where the products alone
// would take about half the time. Here warpgroup 0 is a producer: it
// copies the K and V tiles (cp.async) into NS stages and, over an FP8
// cache, decodes the codes into the 16-bit swizzled tiles there, handing
// each stage over on its "full" mbarrier. Warpgroups 1 and 2 (64 rows
// each) only multiply: each queues S_j = Q K_j^T and O += P_{j-1} V_{j-1}
// together, takes S_j's softmax while P V runs, and frees stage j - 1 on
// its "empty" mbarrier once P V is done (FlashAttention-3's intra-
// warpgroup overlap). The warpgroups never meet after Q is loaded.
//
// The producer arrives on tile j's "full" barrier after it has queued tile
// j + 1's copies (two tiles in flight), so NS must be at least 3: a free
// stage for tile j + 1 needs tile j + 1 - NS released, which the consumers
// do while working on tile j + 2 - NS.
//
// One block a multiprocessor (384 threads, launched at 168 registers each).
// setmaxnreg moves registers from the producer to the consumers, which
// hold Q's fragments too: S = Q K^T then reads only K from shared memory,
// where both operands took the 128 bytes a cycle it serves.
#include "common.cuh"
#include "mma.cuh"
#include "fp8.cuh"
#include "kv_paged.cuh"
#include "wgmma.cuh"
#include "mbar.cuh"
#include "attention_wg.cuh"

// The registers a thread setmaxnreg gives each warpgroup: the producer
// needs few, the consumers hold O, S, P and Q's fragments (about 180).
// 128 x 56 + 256 x 224 is the 384 x 168 a block is launched with.
#define WS_PRODUCER_REGS 56
#define WS_CONSUMER_REGS 224

// ws_mma is the products' type: T, except over an FP8 cache, whose codes
// decode to fp16 in one cvt a pair (to bf16 it takes three more: the
// producer's decode of a tile then outlasted the consumers' products on an
// H100, 5.05 against 4.65 ms a layer at the long chunk); bf16 queries are
// then rounded to fp16 once, scaled by a power of two a row.
template <bool F8, class T> struct ws_mma {
	typedef T U;
	static constexpr bool cvt = false;
};
template <> struct ws_mma<true, bf16> {
	typedef f16 U;
	static constexpr bool cvt = true;
};
template <> struct ws_mma<true, f16> {
	typedef f16 U;
	static constexpr bool cvt = false;
};

template <class T, bool F8, bool PAGED, int NS>
__device__ __forceinline__ void attention_ws(T *out, const T *qkv, const typename kv_elem<F8, T>::C *kc,
	const typename kv_elem<F8, T>::C *vc, const int4 *items, int H, int KV, int W, int cap, float scale, int nsplit,
	const int *tables, int stride, float ksc, float vsc) {
#ifdef XR_WGMMA
	static_assert(NS >= 3, "the producer's lag of one tile needs three stages");
	typedef typename kv_elem<F8, T>::C C;
	typedef typename ws_mma<F8, T>::U U;
	constexpr bool QCVT = ws_mma<F8, T>::cvt;
	constexpr int D = 128, KT = 64, ROWS = 128;
	constexpr int TILE = KT * D * 2; // a swizzled 16-bit tile: 16 KB
	constexpr int STAGE = 2 * TILE;  // K, then V
	constexpr int RAW = KT * D;      // a tile of codes: 8 KB
	constexpr int QB = ROWS * D * 2;
	constexpr float LOG2E = 1.4426950408889634f;
	const float ninf = -__int_as_float(0x7f800000);
	if (nsplit != 1 || !(ksc > 0.f)) asm volatile("trap;"); // softmax needs sl2 > 0
	pdl_enter();
	extern __shared__ unsigned char smem[];
	// [Q: two halves of 64 rows][NS stages: K, V][F8: two stages of codes:
	// K, V][full[NS], empty[NS]][QCVT: a scale a query row]
	const u32 base = (smem_u32(smem) + 1023u) & ~1023u;
	const u32 sq = base, sst = base + QB, sraw = sst + NS * STAGE;
	const u32 sbar = sraw + (F8 ? 2 * 2 * RAW : 0), full = sbar, empty = sbar + 8 * NS, sqs = sbar + 16 * NS;
	unsigned char *const gbase = smem + (base - smem_u32(smem));

	const int tid = threadIdx.x, wg = tid >> 7, wtid = tid & 127;
	const int4 it = items[blockIdx.x];
	const int t0 = it.x, ntok = it.y, slot = it.z, pos0 = it.w;
	const int h = blockIdx.y, G = H / KV, R = ntok * G;
	const int keyEnd = pos0 + ntok;
	const int ntiles = (keyEnd + KT - 1) / KT;

	if (tid == 0) {
#pragma unroll
		for (int s = 0; s < NS; s++) {
			mbar_init(full + 8 * s, 128);
			mbar_init(empty + 8 * s, 2);
		}
		asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
	}
	__syncthreads();

	if (wg == 0) {
		asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(WS_PRODUCER_REGS));
		// The producer. Its chunks of a tile are rows rr + RS i of K and
		// of V (the same rows: one address a row, looked up once a tile),
		// 16-byte chunk cc of each: 16-bit, 8 rows x 2 (K, V) at rr =
		// wtid / 16, cc = wtid % 16; codes, 4 rows x 2 at rr = wtid / 8,
		// cc = wtid % 8.
		constexpr int CPR = F8 ? 8 : 16, RS = 128 / CPR, NR = KT / RS;
		const int rr = wtid / CPR, cc = wtid % CPR;
		const long long hoff = ((long long)slot * KV + h) * cap * D;
		long long roff[NR];
		auto rows = [&](int j) {
#pragma unroll
			for (int i = 0; i < NR; i++) {
				const int key = min(j * KT + rr + RS * i, keyEnd - 1); // past the end: zero-filled, any row
				if constexpr (PAGED) {
					roff[i] = kv_row<true>(tables, stride, slot, KV, h, cap, key) * D;
				} else {
					roff[i] = hoff + (long long)key * D;
				}
			}
		};
		if constexpr (!F8) {
			// Straight into the stage, swizzled.
			for (int j = 0; j < ntiles; j++) {
				rows(j);
				const int st = j % NS;
				mbar_wait(empty + 8 * st, ((j / NS) & 1) ^ 1);
				const u32 sk = sst + st * STAGE;
#pragma unroll
				for (int i = 0; i < NR; i++) {
					const int r = rr + RS * i;
					const bool ok = j * KT + r < keyEnd;
					cp_async16(sk + swz(r, cc), kc + roff[i] + cc * 8, ok);
					cp_async16(sk + TILE + swz(r, cc), vc + roff[i] + cc * 8, ok);
				}
				cp_async_commit();
				if (j > 0) {
					cp_async_wait<1>();
					asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
					mbar_arrive(full + 8 * ((j - 1) % NS));
				}
			}
			cp_async_wait<0>();
			asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
			mbar_arrive(full + 8 * ((ntiles - 1) % NS));
		} else {
			// Codes into one of two raw stages (rows of 128 bytes), decoded
			// by the thread that copied them, so that its own cp.async wait
			// is the only one.
			auto loadraw = [&](int j) {
				rows(j);
				const u32 raw = sraw + (j & 1) * 2 * RAW;
#pragma unroll
				for (int i = 0; i < NR; i++) {
					const int r = rr + RS * i;
					const bool ok = j * KT + r < keyEnd;
					cp_async16(raw + r * 128 + cc * 16, kc + roff[i] + cc * 16, ok);
					cp_async16(raw + RAW + r * 128 + cc * 16, vc + roff[i] + cc * 16, ok);
				}
			};
			loadraw(0);
			cp_async_commit();
			for (int j = 0; j < ntiles; j++) {
				if (j + 1 < ntiles) loadraw(j + 1);
				cp_async_commit(); // empty past the last tile: wait<1> stays right
				cp_async_wait<1>();
				const int st = j % NS;
				mbar_wait(empty + 8 * st, ((j / NS) & 1) ^ 1);
				const unsigned char *raw = gbase + (sraw - base) + (j & 1) * 2 * RAW;
				unsigned char *dst = gbase + (sst - base) + st * STAGE;
#pragma unroll
				for (int i = 0; i < 2 * NR; i++) {
					const int isv = i / NR, r = rr + RS * (i % NR);
					pack8 lo, hi;
					e4m3x16<U>(*(const uint4 *)(raw + isv * RAW + r * 128 + cc * 16), lo, hi);
					*(pack8 *)(dst + isv * TILE + swz(r, 2 * cc)) = lo;
					*(pack8 *)(dst + isv * TILE + swz(r, 2 * cc + 1)) = hi;
				}
				asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
				mbar_arrive(full + 8 * st);
			}
		}
		return;
	}

	// A consumer: warpgroup cw's 64 rows.
	asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(WS_CONSUMER_REGS));
	const int cw = wg - 1, warp = (tid >> 5) & 3, lane = tid & 31;
#pragma unroll
	for (int i = 0; i < 64 * 16 / 128; i++) {
		const int c = wtid + i * 128, r = c >> 4, ch = c & 15, row = cw * 64 + r;
		const int tok = row / G, jh = row - tok * G;
		const bool ok = row < R;
		const T *s = ok ? qkv + (long long)(t0 + tok) * W + (h * G + jh) * D + ch * 8 : qkv;
		cp_async16(sq + cw * (64 * D * 2) + swz(r, ch), s, ok);
	}
	cp_async_commit();
	cp_async_wait<0>();
	if constexpr (QCVT) {
		// Two threads a row, 64 values each: a power of two 2^e that brings
		// the row's largest magnitude under 2^14, then fp16 in place.
		asm volatile("bar.sync %0, 128;" ::"r"(1 + cw) : "memory");
		const int r = wtid >> 1, hf = wtid & 1;
		unsigned char *q16 = gbase + cw * (64 * D * 2);
		pack8 v[8];
		float amax = 0.f;
#pragma unroll
		for (int c = 0; c < 8; c++) {
			v[c] = *(const pack8 *)(q16 + swz(r, hf * 8 + c));
#pragma unroll
			for (int i = 0; i < 4; i++) {
				const float2 f = unpack2(v[c].w[i], T{});
				amax = fmaxf(amax, fmaxf(fabsf(f.x), fabsf(f.y)));
			}
		}
		amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
		const int e = max(0, (int)((__float_as_uint(amax) >> 23) & 0xff) - 127 - 13);
		const float inv = __uint_as_float((u32)(127 - e) << 23);
#pragma unroll
		for (int c = 0; c < 8; c++) {
#pragma unroll
			for (int i = 0; i < 4; i++) {
				const float2 f = unpack2(v[c].w[i], T{});
				v[c].w[i] = pack2(f.x * inv, f.y * inv, U{});
			}
			*(pack8 *)(q16 + swz(r, hf * 8 + c)) = v[c];
		}
		if (hf == 0) *(float *)(gbase + (sqs - base) + (cw * 64 + r) * 4) = __uint_as_float((u32)(127 + e) << 23);
	}
	asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
	asm volatile("bar.sync %0, 128;" ::"r"(1 + cw) : "memory");

	float o[64], s[8][4];
#pragma unroll
	for (int i = 0; i < 64; i++) o[i] = 0.f;
#pragma unroll
	for (int i = 0; i < 32; i++) s[i / 4][i % 4] = 0.f;
	float m[2] = {ninf, ninf}, l[2] = {0.f, 0.f};
	constexpr float F8MUL = F8 ? e4m3_h16<U>::mul : 1.f;
	const float sl2 = scale * LOG2E * (F8 ? ksc * F8MUL : 1.f);
	const int g4 = lane >> 2, q4 = lane & 3;
	const int r0 = cw * 64 + warp * 16 + g4, r1 = r0 + 8;
	// Each row's score scale: sl2, times its queries' scale under QCVT.
	float sr[2] = {sl2, sl2};
	if constexpr (QCVT) {
		sr[0] *= *(const float *)(gbase + (sqs - base) + r0 * 4);
		sr[1] *= *(const float *)(gbase + (sqs - base) + r1 * 4);
	}
	const int lim0 = min(keyEnd - 1, pos0 + r0 / G), lim1 = min(keyEnd - 1, pos0 + r1 / G);
	const int wlim = min(keyEnd - 1, pos0 + (cw * 64 + warp * 16) / G);
	u32 pa[4][4], qa[8][4];
	wg_load_qa(qa, gbase + cw * (64 * D * 2), warp * 16 + g4, q4);
	float alpha[2];

	// softmax takes S_j into the online softmax: masked past each row's
	// causal limit, the row maxima taken over the unscaled scores (sl2 >
	// 0), the scale folded into the exponent's FMA. It leaves the
	// exponentials in s and O's factor in alpha; m is in log2 units.
	auto softmax = [&](int j) {
		const int k0 = j * KT;
		if (k0 + KT - 1 > wlim) {
#pragma unroll
			for (int n = 0; n < 8; n++)
#pragma unroll
				for (int e = 0; e < 4; e++)
					if (k0 + n * 8 + q4 * 2 + (e & 1) > (e < 2 ? lim0 : lim1)) s[n][e] = ninf;
		}
		float mx[2] = {ninf, ninf}, mu[2], ps[2] = {0.f, 0.f};
#pragma unroll
		for (int n = 0; n < 8; n++) {
			mx[0] = fmaxf(mx[0], fmaxf(s[n][0], s[n][1]));
			mx[1] = fmaxf(mx[1], fmaxf(s[n][2], s[n][3]));
		}
#pragma unroll
		for (int i = 0; i < 2; i++) {
			mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
			mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
			const float mn = fmaxf(m[i], mx[i] * sr[i]);
			mu[i] = mn == ninf ? 0.f : mn;
			alpha[i] = ex2(m[i] - mu[i]);
			m[i] = mn;
		}
#pragma unroll
		for (int n = 0; n < 8; n++)
#pragma unroll
			for (int e = 0; e < 4; e++) {
				s[n][e] = ex2(fmaf(s[n][e], sr[e >> 1], -mu[e >> 1]));
				ps[e >> 1] += s[n][e];
			}
		l[0] = l[0] * alpha[0] + ps[0];
		l[1] = l[1] * alpha[1] + ps[1];
	};
	// rescale_pack rescales O (its P V done; skipped where no row of the
	// warp has a new maximum, as in most tiles past the first few) and
	// rounds P into the A fragments of the next P V.
	auto rescale_pack = [&]() {
		if (!__all_sync(0xffffffffu, alpha[0] == 1.f && alpha[1] == 1.f)) wg_rescale(o, alpha);
		wg_pack_p<U>(pa, s);
	};
	auto qk = [&](u32 sk) { wg_qk_r<U>(s, qa, wg_desc(sk)); };
	auto pv = [&](u32 sv) { wg_pv<U>(o, pa, sv); };

	mbar_wait(full, 0);
	qk(sst);
	wg_wait<0>();
	wg_pin<32>(&s[0][0]);
	softmax(0);
	rescale_pack();
	for (int j = 1; j < ntiles; j++) {
		const int st = j % NS, sp = (j - 1) % NS;
		mbar_wait(full + 8 * st, (j / NS) & 1);
		qk(sst + st * STAGE);
		pv(sst + sp * STAGE + TILE);
		wg_wait<1>(); // S_j
		wg_pin<32>(&s[0][0]);
		softmax(j);
		wg_wait<0>(); // P_{j-1} V_{j-1}
		wg_pin<64>(o);
		if (wtid == 0) mbar_arrive(empty + 8 * sp);
		rescale_pack();
	}
	pv(sst + ((ntiles - 1) % NS) * STAGE + TILE);
	wg_wait<0>();
	wg_pin<64>(o);

	wg_store_o(out, o, l, F8 ? vsc * F8MUL : 1.f, r0, r1, R, G, t0, H, h, q4); // O in U's decode scale
#else
	asm volatile("trap;");
#endif
}

// Kernels attention_ws_<T>_d128_m8[_paged][_f8]: attention_wg.cu's
// arguments (part, ml, counters, rowsMax, table and shortKeys unused).
// WS_STAGES is attention.go's attnWSStages.
#define WS_STAGES 3
#define ATTN_WS(T, F8, PAGED, SUF)                                                                              \
	extern "C" __global__ void __launch_bounds__(384, 1) attention_ws_##T##_d128_m8##SUF(T *out, const T *qkv,  \
		const typename kv_elem<F8, T>::C *kc, const typename kv_elem<F8, T>::C *vc, const int4 *items, int H,      \
		int KV, int W, int cap, float scale, float *part, float *ml, int nsplit, int *counters, int rowsMax,       \
		const float *table, int shortKeys ATTN_WG_TAIL_##PAGED##_##F8) {                                           \
		attention_ws<T, F8, PAGED, WS_STAGES>(out, qkv, kc, vc, items, H, KV, W, cap, scale, nsplit,               \
			ATTN_WG_ARGS_##PAGED##_##F8);                                                                          \
	}
#define ATTN_WS_ALL(T) ATTN_WS(T, 0, 0, ) ATTN_WS(T, 0, 1, _paged) ATTN_WS(T, 1, 0, _f8) ATTN_WS(T, 1, 1, _paged_f8)
ATTN_WS_ALL(f16)
ATTN_WS_ALL(bf16)
