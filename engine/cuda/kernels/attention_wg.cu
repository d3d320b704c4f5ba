// Prefill attention on Hopper's warpgroup MMA (sm_90a): the work items,
// cache layouts and outputs of attention_tc.cuh's prefill blocks (MW = 4
// or 8 row warps, one key group, nsplit 1), head dimension 128, with
// wgmma.mma_async in place of mma.sync.
//
// Why: attention_tc's prefill blocks load every K and V fragment into
// registers with ldmatrix before each mma.sync, and reach at best a
// quarter of the tensor cores' rate on an H100 (BenchmarkAttention's
// prefill-D128 scenarios: 130-240 TFLOP/s of causal work; these kernels
// 230-395). A warpgroup's wgmma reads its B operand from shared memory
// itself and multiplies 64 rows by a whole tile per instruction.
//
// A block is WGS warpgroups (64 query rows each: rows r are token r / G,
// query head r % G of the block's KV head, as attention_tc) sharing the
// K and V tiles of 64 keys, double buffered. Every tile is stored in the
// 128-byte swizzle of the own GEMMs (wgmma.cuh): [key][64 dims] rows of
// 128 bytes, the head dimension in two 8 KB halves, 16-byte chunk c of row
// r at chunk c ^ (r % 8). The same bytes serve both products:
// - S = Q K^T (m64n64k16, both operands K-major from shared memory): Q is
//   A (loaded once), the K tile is B as the GEMMs' W tiles are;
// - O += P V (m64n128k16): P is A from registers (the S accumulators of
//   two 8-key column blocks are, rounded to 16 bits, the A fragment of
//   16 keys, as mma.sync's are), the V tile is B read MN-major
//   (imm-trans-b): eight keys of 64 dims form a 1024-byte core group,
//   groups along the keys 1024 bytes apart (the stride offset), the
//   second half of the dims 8 KB on (the leading offset).
// Online softmax in registers as attention_tc: a thread holds rows
// lane / 4 and lane / 4 + 8 of its warp's 16, in log2 units.
//
// F8: the stages hold E4M3 codes (rows of 128 bytes); each tile in turn is
// decoded by the whole block into one pair of swizzled 16-bit tiles, the
// scales applied to the scores and the output as attention_tc's F8 path.
// The decoding runs under the products (V_j under S_j, K_{j+1} under
// P V_j): decoding between them, with the tensor cores idle, made these
// kernels 15 % slower on the long chunks (BenchmarkAttention, H100).
//
// E8 (the _f8e kernels, XRUN_CUDA_ATTN_WG_E4M3): the products on the E4M3
// tensor cores (k32). Q is rounded once to E4M3 codes with a scale per row;
// the key codes are B of S = Q K^T as they land (loaded into the swizzle);
// the value codes are transposed to K-major V^T under S_j (8-bit wgmma
// reads B K-major only), in a key order that lets P's A fragment take the S
// accumulators where they stand; P is rounded to E4M3 times 256 (its
// subnormals reach 2^-17), l summed unrounded. One E4M3 rounding of Q and
// of P move the outputs by about 2-3 % on random data (TestAttnRefsE4M3),
// which is why it is opt-in.
//
// On other architectures the kernels trap (compiled so that the family
// builds everywhere); the launcher takes them on sm_90 only.
#include "common.cuh"
#include "mma.cuh"
#include "fp8.cuh"
#include "kv_paged.cuh"
#include "wgmma.cuh"
#include "attention_wg.cuh"

template <class T, int WGS, bool F8, bool PAGED, bool E8 = false>
__device__ __forceinline__ void attention_wg(T *out, const T *qkv, const typename kv_elem<F8, T>::C *kc,
	const typename kv_elem<F8, T>::C *vc, const int4 *items, int H, int KV, int W, int cap, float scale, int nsplit,
	const int *tables, int stride, float ksc, float vsc) {
#ifdef XR_WGMMA
	typedef typename kv_elem<F8, T>::C C;
	constexpr int D = 128, KT = 64, NT = 128 * WGS, ROWS = 64 * WGS;
	constexpr int TILE = KT * D * 2;   // a swizzled 16-bit tile: 16 KB
	constexpr int RAW = KT * D;        // a tile of codes: 8 KB
	constexpr int QB = ROWS * D * 2;   // Q
	constexpr float LOG2E = 1.4426950408889634f;
	const float ninf = -__int_as_float(0x7f800000);
	if (nsplit != 1) asm volatile("trap;"); // the launcher never splits these
	pdl_enter();
	extern __shared__ unsigned char smem[];
	// [Q][stage 0: K, V][stage 1: K, V]; under F8 the stages hold codes
	// and a decoded K, V pair follows.
	const u32 base = (smem_u32(smem) + 1023u) & ~1023u;
	const u32 sq = base, st0 = base + QB;
	constexpr int STAGE = F8 ? 2 * RAW : 2 * TILE;
	const u32 sdec = st0 + 2 * STAGE;
	// E8 (E4M3 products): [Q, then V^T][Q's codes][stages of codes][Q's
	// row scales]; st0 follows Q's codes.
	constexpr int QB8 = ROWS * D; // Q's codes
	const u32 sq8 = base + QB, st8 = sq8 + QB8, sqs = st8 + 2 * STAGE;
	unsigned char *const gbase = smem + (base - smem_u32(smem));

	const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31;
	const int4 it = items[blockIdx.x];
	const int t0 = it.x, ntok = it.y, slot = it.z, pos0 = it.w;
	const int h = blockIdx.y, G = H / KV, R = ntok * G;
	const C *kh = kc + ((long long)slot * KV + h) * cap * D;
	const C *vh = vc + ((long long)slot * KV + h) * cap * D;
	const int keyEnd = pos0 + ntok; // the block's last row's position, plus one
	const int ntiles = (keyEnd + KT - 1) / KT;

	// load queues tile j's K and V into stage j % 2.
	auto load = [&](int j) {
		const int k0 = j * KT;
		const u32 sk = (E8 ? st8 : st0) + (j & 1) * STAGE, sv = sk + STAGE / 2;
		constexpr int CPR = F8 ? 8 : 16; // 16-byte chunks a row
#pragma unroll
		for (int i = 0; i < KT * CPR / NT; i++) {
			const int c = tid + i * NT, kr = c / CPR, ch = c % CPR, key = k0 + kr;
			const bool ok = key < keyEnd;
			constexpr int VC = F8 ? 16 : 8;
			long long off;
			if constexpr (PAGED) {
				off = ok ? kv_row<true>(tables, stride, slot, KV, h, cap, key) * D + ch * VC : 0;
			} else {
				off = ok ? (long long)key * D + ch * VC : 0;
			}
			const C *kb = PAGED ? kc : kh, *vb = PAGED ? vc : vh;
			// Codes: plain rows of 128 bytes (under E8 the keys' in the
			// 128-byte swizzle, B of the E4M3 products as they land);
			// 16-bit values: swizzled.
			const u32 o = F8 ? (u32)(kr * 128 + ch * 16) : swz(kr, ch);
			cp_async16(sk + (E8 ? (u32)(kr * 128 + ((ch ^ (kr & 7)) << 4)) : o), kb + off, ok);
			cp_async16(sv + o, vb + off, ok);
		}
	};
	// Q, zero rows past R, then the first tile.
#pragma unroll
	for (int i = 0; i < ROWS * 16 / NT; i++) {
		const int c = tid + i * NT, r = c >> 4, ch = c & 15;
		const int tok = r / G, jh = r - tok * G;
		const bool ok = r < R;
		const T *src = ok ? qkv + (long long)(t0 + tok) * W + (h * G + jh) * D + ch * 8 : qkv;
		cp_async16(sq + (r >> 6) * (64 * D * 2) + swz(r & 63, ch), src, ok);
	}
	if (ntiles > 0) load(0);
	cp_async_commit();

	float o[64], s[8][4];
#pragma unroll
	for (int i = 0; i < 64; i++) o[i] = 0.f;
#pragma unroll
	for (int i = 0; i < 32; i++) s[i / 4][i % 4] = 0.f;
	float m[2] = {ninf, ninf}, l[2] = {0.f, 0.f};
	constexpr float F8MUL = F8 ? e4m3_h16<T>::mul : 1.f;
	constexpr float PSC = 256.f; // E8: P's scale before its rounding to E4M3
	// Under E8 the key codes meet the tensor cores as stored: no F8MUL.
	const float sl2 = scale * LOG2E * (E8 ? ksc : F8 ? ksc * F8MUL : 1.f);
	const int g4 = lane >> 2, q4 = lane & 3;
	const int r0 = wg * 64 + warp * 16 + g4, r1 = r0 + 8;
	const int lim0 = min(keyEnd - 1, pos0 + r0 / G), lim1 = min(keyEnd - 1, pos0 + r1 / G);
	const int wlim = min(keyEnd - 1, pos0 + (wg * 64 + warp * 16) / G);
	const u32 qa = sq + wg * (64 * D * 2);

	// scores_j masks tile j's scores past each row's causal limit, takes
	// them into the online softmax, rescales O and rounds P into the A
	// fragments of the P V product.
	u32 pa[4][4];
	// softmax scales tile j's scores by c0 (row r0) and c1 (r1), masks and
	// exponentiates them and rescales O: scores' part before the rounding.
	auto softmax = [&](int j, float c0, float c1) {
		const int k0 = j * KT;
		// s[n][e]: row (e < 2 ? r0 : r1), key k0 + 8n + 2 q4 + (e & 1).
		const bool edge = k0 + KT - 1 > wlim;
#pragma unroll
		for (int n = 0; n < 8; n++)
#pragma unroll
			for (int e = 0; e < 4; e++) {
				float v = s[n][e] * (e < 2 ? c0 : c1);
				if (edge && k0 + n * 8 + q4 * 2 + (e & 1) > (e < 2 ? lim0 : lim1)) v = ninf;
				s[n][e] = v;
			}
		float alpha[2];
		softmax_tile<8>(s, m, l, alpha);
		wg_rescale(o, alpha);
	};
	auto scores = [&](int j) {
		softmax(j, sl2, sl2);
		wg_pack_p<T>(pa, s);
	};
	auto qk = [&](u32 sk) { wg_qk<T>(s, wg_desc(qa), wg_desc(sk)); };
	auto pv = [&](u32 sv) { wg_pv<T>(o, pa, sv); };

	if constexpr (E8) {
		static_assert(F8 && NT == 2 * ROWS, "E8: an FP8 cache; two threads a query row");
		// Q's rows to E4M3 codes, a scale each (absmax / 448), two threads
		// a row; then Q's 16-bit tile holds V^T.
		cp_async_wait<0>();
		__syncthreads();
		{
			const int r = tid >> 1, hf = tid & 1;
			const unsigned char *q16 = gbase + (r >> 6) * (64 * D * 2);
			float x[64];
#pragma unroll
			for (int c = 0; c < 8; c++) {
				const pack8 v = *(const pack8 *)(q16 + swz(r & 63, hf * 8 + c));
#pragma unroll
				for (int i = 0; i < 4; i++) {
					const float2 f = unpack2(v.w[i], T{});
					x[c * 8 + 2 * i] = f.x;
					x[c * 8 + 2 * i + 1] = f.y;
				}
			}
			float amax = 0.f;
#pragma unroll
			for (int i = 0; i < 64; i++) amax = fmaxf(amax, fabsf(x[i]));
			amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
			const float inv = amax > 0.f ? __fdiv_rn(448.f, amax) : 0.f;
			unsigned char *q8 = gbase + (sq8 - base) + (r >> 6) * (64 * 128) + (r & 63) * 128;
#pragma unroll
			for (int i = 0; i < 4; i++) {
				const uint2 lo = e4m3x8(x + 16 * i, inv), hi = e4m3x8(x + 16 * i + 8, inv);
				*(uint4 *)(q8 + (((hf * 4 + i) ^ (r & 7)) << 4)) = make_uint4(lo.x, lo.y, hi.x, hi.y);
			}
			if (hf == 0) *(float *)(gbase + (sqs - base) + r * 4) = amax > 0.f ? __fdiv_rn(amax, 448.f) : 0.f;
		}
		asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
		__syncthreads();
		const float c0 = sl2 * *(const float *)(gbase + (sqs - base) + r0 * 4);
		const float c1 = sl2 * *(const float *)(gbase + (sqs - base) + r1 * 4);
		const u32 qa8 = sq8 + wg * (64 * 128);
		unsigned char *const vt = gbase; // V^T: 128 dims x 64 keys, rows of 128 bytes
		// transpose writes V_j's codes (plain rows of 128 bytes at raw) as
		// V^T, K-major for the E4M3 P V: row n (a dim) holds the tile's 64
		// keys in its first 64 bytes, in the 128-byte swizzle (chunk c at
		// c ^ (n % 8)). Key position p of each 32-key step holds key
		// 16 (p / 16) + 8 ((p % 4) / 2) + 2 ((p % 16) / 4) + p % 2: P's
		// fragment (pa8) then takes the S accumulators as they stand. A
		// unit is 4 keys x 4 dims, four 32-bit reads, eight byte permutes,
		// four writes; a warp's 32 units are 8 dim groups x 4 key groups.
		auto transpose = [&](const unsigned char *raw) {
#pragma unroll
			for (int i = 0; i < 512 / NT; i++) {
				const int u = tid + i * NT, w = u >> 5, ln = u & 31;
				const int n0 = 4 * ((w & 3) * 8 + (ln & 7)), p0 = 4 * ((w >> 2) * 4 + (ln >> 3));
				const int pp = p0 & 31, k = (p0 & 32) + 16 * (pp >> 4) + 2 * ((pp & 15) >> 2);
				const u32 a = *(const u32 *)(raw + k * 128 + n0), b = *(const u32 *)(raw + (k + 1) * 128 + n0);
				const u32 c = *(const u32 *)(raw + (k + 8) * 128 + n0), d = *(const u32 *)(raw + (k + 9) * 128 + n0);
				const u32 ab0 = __byte_perm(a, b, 0x5140), ab1 = __byte_perm(a, b, 0x7362);
				const u32 cd0 = __byte_perm(c, d, 0x5140), cd1 = __byte_perm(c, d, 0x7362);
				const u32 out[4] = {__byte_perm(ab0, cd0, 0x5410), __byte_perm(ab0, cd0, 0x7632), __byte_perm(ab1, cd1, 0x5410),
					__byte_perm(ab1, cd1, 0x7632)};
#pragma unroll
				for (int jn = 0; jn < 4; jn++) {
					const int n = n0 + jn;
					*(u32 *)(vt + n * 128 + (((p0 >> 4) ^ (n & 7)) << 4) + (p0 & 15)) = out[jn];
				}
			}
			asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
		};
		// pa8[t]: P times PSC as E4M3, the A fragment of keys 32t..32t+31
		// (score blocks 4t..4t+3) in transpose's key order.
		u32 pa8[2][4];
		auto pack = [&]() {
#pragma unroll
			for (int t = 0; t < 2; t++)
#pragma unroll
				for (int e = 0; e < 2; e++) {
					pa8[t][e] = e4m3x2_cvt(s[4 * t][2 * e] * PSC, s[4 * t][2 * e + 1] * PSC) |
						e4m3x2_cvt(s[4 * t + 1][2 * e] * PSC, s[4 * t + 1][2 * e + 1] * PSC) << 16;
					pa8[t][2 + e] = e4m3x2_cvt(s[4 * t + 2][2 * e] * PSC, s[4 * t + 2][2 * e + 1] * PSC) |
						e4m3x2_cvt(s[4 * t + 3][2 * e] * PSC, s[4 * t + 3][2 * e + 1] * PSC) << 16;
				}
		};
		for (int j = 0; j < ntiles; j++) {
			cp_async_wait<0>();
			asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
			__syncthreads(); // tile j landed; every P V_{j-1} done with V^T
			if (j + 1 < ntiles) load(j + 1);
			cp_async_commit();
			const u32 sk = st8 + (j & 1) * STAGE;
			wg_pin<32>(&s[0][0]);
			wg_fence();
#pragma unroll
			for (int kk = 0; kk < 4; kk++) wg_ss64_e4m3(&s[0][0], wg_desc(qa8 + kk * 32), wg_desc(sk + kk * 32), kk > 0);
			wg_commit();
			transpose(gbase + (sk + RAW - base)); // under S_j
			wg_wait<0>();
			wg_pin<32>(&s[0][0]);
			softmax(j, c0, c1);
			pack();
			__syncthreads(); // V^T_j written
			wg_pin<64>(o);
			wg_fence();
#pragma unroll
			for (int t = 0; t < 2; t++) wg_rs128_e4m3(o, pa8[t], wg_desc(base + t * 32));
			wg_commit();
			wg_wait<0>();
			wg_pin<64>(o);
		}
	} else if constexpr (!F8) {
		for (int j = 0; j < ntiles; j++) {
			cp_async_wait<0>();
			asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
			__syncthreads(); // tile j landed; every warpgroup is done with tile j - 1
			if (j + 1 < ntiles) load(j + 1);
			cp_async_commit();
			const u32 sk = st0 + (j & 1) * STAGE, sv = sk + STAGE / 2;
			qk(sk);
			wg_wait<0>();
			wg_pin<32>(&s[0][0]);
			scores(j);
			pv(sv);
			wg_wait<0>();
			wg_pin<64>(o);
		}
	} else {
		// The codes of tile j are decoded while the tensor cores work: V_j
		// under S_j, K_{j+1} under P V_j, each by the whole block into the
		// one decoded pair (K at sdec, V at sdec + TILE). Two barriers a
		// tile: A (K_j decoded, every P V_{j-1} done with V) and B (V_j
		// decoded, every S_j done with K, the codes of tile j + 1 landed).
		// The codes of tile j + 2 are queued at B_j, into the stage tile j
		// leaves, so a load has about a tile's time to land. A thread
		// decodes the very chunks it loaded (the same tid-to-chunk map), so
		// its own cp.async wait suffices for the codes; the barriers order
		// the decoded pair's writes against the other warps' products.
		auto decode = [&](int j, int isv) {
			const unsigned char *raw = gbase + (st0 + (j & 1) * STAGE - base) + isv * RAW;
			unsigned char *dst = gbase + (sdec - base) + isv * TILE;
#pragma unroll
			for (int i = 0; i < KT * 8 / NT; i++) {
				const int q = tid + i * NT, r = q >> 3, c16 = q & 7;
				pack8 lo, hi;
				e4m3x16<T>(*(const uint4 *)(raw + r * 128 + c16 * 16), lo, hi);
				*(pack8 *)(dst + swz(r, 2 * c16)) = lo;
				*(pack8 *)(dst + swz(r, 2 * c16 + 1)) = hi;
			}
			asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
		};
		if (ntiles > 1) load(1);
		cp_async_commit();
		cp_async_wait<1>(); // Q and tile 0's codes
		__syncthreads();
		decode(0, 0);
		for (int j = 0; j < ntiles; j++) {
			asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
			__syncthreads(); // A_j
			qk(sdec);
			decode(j, 1);
			wg_wait<0>();
			wg_pin<32>(&s[0][0]);
			scores(j);
			cp_async_wait<0>(); // tile j + 1's codes
			__syncthreads(); // B_j
			if (j + 2 < ntiles) load(j + 2);
			cp_async_commit();
			pv(sdec + TILE);
			if (j + 1 < ntiles) decode(j + 1, 0);
			wg_wait<0>();
			wg_pin<64>(o);
		}
	}
	cp_async_wait<0>();
	wg_store_o(out, o, l, E8 ? vsc * (1.f / PSC) : F8 ? vsc * F8MUL : 1.f, r0, r1, R, G, t0, H, h, q4);
#else
	asm volatile("trap;");
#endif
}

// Kernels attention_wg_<T>_d128_m<4 WGS>[_paged][_f8]: the arguments of
// attention_tc's (_paged: the block tables; _f8: the K and V scales), of
// which part, ml, counters, rowsMax, table and shortKeys go unused.
//
// The two-warpgroup blocks are bounded to two a multiprocessor (128
// registers a thread, ptxas spilling 20-56 bytes): alone, a block's two
// warpgroups meet at every tile's barriers and exponentiate while the
// tensor cores wait (v37's profile: 12.5 % occupancy, the tensor pipe 39 %
// busy); a second block's products fill those gaps. On an H100, us a layer
// (Llama-3.1-8B's heads; 171-175 registers and one block against 128 and
// two): the long chunk 5,746 -> 5,245, paged 6,486 -> 5,623, over an FP8
// cache with bf16 queries 6,971 -> 6,241 (fp16 queries, which spill the
// most, 7,007 -> 7,088); 64 prompts of 128, 120 -> 91.
#define ATTN_WG_BOUNDS_1 __launch_bounds__(128)
#define ATTN_WG_BOUNDS_2 __launch_bounds__(256, 2)
#define ATTN_WG(T, WGS, F8, PAGED, SUF)                                                                         \
	extern "C" __global__ void ATTN_WG_BOUNDS_##WGS attention_wg_##T##_d128_m##SUF(T *out, const T *qkv,         \
		const typename kv_elem<F8, T>::C *kc, const typename kv_elem<F8, T>::C *vc, const int4 *items, int H,      \
		int KV, int W, int cap, float scale, float *part, float *ml, int nsplit, int *counters, int rowsMax,       \
		const float *table, int shortKeys ATTN_WG_TAIL_##PAGED##_##F8) {                                           \
		attention_wg<T, WGS, F8, PAGED>(out, qkv, kc, vc, items, H, KV, W, cap, scale, nsplit,                     \
			ATTN_WG_ARGS_##PAGED##_##F8);                                                                          \
	}
#define ATTN_WG_ALL(T)                                                                                          \
	ATTN_WG(T, 1, 0, 0, 4) ATTN_WG(T, 2, 0, 0, 8) ATTN_WG(T, 1, 0, 1, 4_paged) ATTN_WG(T, 2, 0, 1, 8_paged)     \
	ATTN_WG(T, 1, 1, 0, 4_f8) ATTN_WG(T, 2, 1, 0, 8_f8) ATTN_WG(T, 1, 1, 1, 4_paged_f8) ATTN_WG(T, 2, 1, 1, 8_paged_f8)
// ATTN_WG_E: the E4M3-products forms over an FP8 cache (E8), named
// ..._f8e.
#define ATTN_WG_E(T, WGS, PAGED, SUF)                                                                           \
	extern "C" __global__ void ATTN_WG_BOUNDS_##WGS attention_wg_##T##_d128_m##SUF(T *out, const T *qkv,         \
		const unsigned char *kc, const unsigned char *vc, const int4 *items, int H, int KV, int W, int cap,        \
		float scale, float *part, float *ml, int nsplit, int *counters, int rowsMax, const float *table,          \
		int shortKeys ATTN_WG_TAIL_##PAGED##_1) {                                                                 \
		attention_wg<T, WGS, true, PAGED, true>(out, qkv, kc, vc, items, H, KV, W, cap, scale, nsplit,             \
			ATTN_WG_ARGS_##PAGED##_1);                                                                             \
	}
#define ATTN_WG_ALL_E(T) ATTN_WG_E(T, 1, 0, 4_f8e) ATTN_WG_E(T, 2, 0, 8_f8e) ATTN_WG_E(T, 1, 1, 4_paged_f8e) ATTN_WG_E(T, 2, 1, 8_paged_f8e)
ATTN_WG_ALL(f16)
ATTN_WG_ALL(bf16)
ATTN_WG_ALL_E(f16)
ATTN_WG_ALL_E(bf16)
