// The warpgroup-MMA pieces of the prefill attention kernels at head
// dimension 128 (attention_wg.cu, attention_ws.cu): the products' wgmma
// forms, the descriptors of their tiles and the 128-byte swizzle the K
// and V tiles are stored in (attention_wg.cu's header says how).
#pragma once
#include "common.cuh"
#include "wgmma.cuh"

#ifdef XR_WGMMA
#define WG_ACC32 "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define WG_REG32 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
// S += A B^T, 64 x 64, both from shared memory (K-major); p: keep S.
#define WG_SS64(TAG, TY)                                                                                  \
	__device__ __forceinline__ void wg_ss64(float *d, unsigned long long a, unsigned long long b, int p, TAG) { \
		asm volatile("{\n.reg .pred q;\nsetp.ne.b32 q, %34, 0;\n"                                          \
					 "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " " WG_REG32 ", %32, %33, q, 1, 1, 0, 0;\n}\n" \
			: WG_ACC32                                                                                     \
			: "l"(a), "l"(b), "r"(p));                                                                     \
	}
WG_SS64(f16, "f16")
WG_SS64(bf16, "bf16")
// The same on E4M3 operands (k32: 32 bytes of each row a step), both
// K-major as 8-bit wgmma requires.
__device__ __forceinline__ void wg_ss64_e4m3(float *d, unsigned long long a, unsigned long long b, int p) {
	asm volatile("{\n.reg .pred q;\nsetp.ne.b32 q, %34, 0;\n"
				 "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 " WG_REG32 ", %32, %33, q, 1, 1;\n}\n"
		: WG_ACC32
		: "l"(a), "l"(b), "r"(p));
}
// S += A B^T, 64 x 64: A from registers (the m16k16 A fragment per warp),
// B from shared memory (K-major). Q held in registers this way halves the
// shared-memory bytes the S product reads a step.
#define WG_RS64(TAG, TY)                                                                                  \
	__device__ __forceinline__ void wg_rs64(float *d, const u32 *a, unsigned long long b, int p, TAG) {   \
		asm volatile("{\n.reg .pred q;\nsetp.ne.b32 q, %37, 0;\n"                                          \
					 "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " " WG_REG32                  \
					 ", {%32, %33, %34, %35}, %36, q, 1, 1, 0;\n}\n"                                      \
			: WG_ACC32                                                                                     \
			: "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(p));                                 \
	}
WG_RS64(f16, "f16")
WG_RS64(bf16, "bf16")
// O += P V, 64 x 128: P from registers (the m16k16 A fragment per warp),
// V from shared memory, MN-major (imm-trans-b 1).
#define WG_RS128(TAG, TY)                                                                                 \
	__device__ __forceinline__ void wg_rs128(float *d, const u32 *a, unsigned long long b, TAG) {         \
		asm volatile("{\n.reg .pred q;\nsetp.eq.u32 q, 1, 1;\n"                                             \
					 "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " " WG_REG64                 \
					 ", {%64, %65, %66, %67}, %68, q, 1, 1, 1;\n}\n"                                       \
			: WG_ACC64                                                                                     \
			: "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));                                         \
	}
WG_RS128(f16, "f16")
WG_RS128(bf16, "bf16")
// O += P V on E4M3 operands, 64 x 128 x 32 keys: P from registers (four
// words of four codes), V^T from shared memory, K-major.
__device__ __forceinline__ void wg_rs128_e4m3(float *d, const u32 *a, unsigned long long b) {
	asm volatile("{\n.reg .pred q;\nsetp.eq.u32 q, 1, 1;\n"
				 "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 " WG_REG64 ", {%64, %65, %66, %67}, %68, q, 1, 1;\n}\n"
		: WG_ACC64
		: "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}

// wg_desc_mn is the descriptor of an MN-major tile in the 128-byte swizzle
// at addr: core groups of 8 rows (K) 1024 bytes apart (stride offset),
// 64-element halves along N 8 KB apart (leading offset).
__device__ __forceinline__ unsigned long long wg_desc_mn(u32 addr) {
	return (unsigned long long)((addr & 0x3ffffu) >> 4) | ((unsigned long long)(8192 >> 4) << 16) |
		((unsigned long long)(1024 >> 4) << 32) | (1ull << 62);
}
#endif

// swz is the byte offset of 16-byte chunk c (0..15: two 8-chunk halves of
// 8 KB) of row r (0..63) in a swizzled tile.
__device__ __forceinline__ u32 swz(int r, int c) { return (c >> 3) * 8192 + r * 128 + (((c & 7) ^ (r & 7)) << 4); }


#ifdef XR_WGMMA
// wg_qk queues S = Q K^T of a 64-key tile, one commit group, not waited
// for: 8 steps of 16 dims from the swizzled Q and K tiles whose
// descriptors are dq and dk (start addresses in 16-byte units, to which a
// step's offset adds), the second half of the dims 8 KB on.
template <class U> __device__ __forceinline__ void wg_qk(float (&s)[8][4], unsigned long long dq, unsigned long long dk) {
	wg_pin<32>(&s[0][0]);
	wg_fence();
#pragma unroll
	for (int kk = 0; kk < 8; kk++) {
		const u32 off = ((kk >> 2) * 8192 + (kk & 3) * 32) >> 4;
		wg_ss64(&s[0][0], dq + off, dk + off, kk > 0, U{});
	}
	wg_commit();
}

// wg_qk_r is wg_qk with Q's fragments in registers (qa[kk]: dims 16 kk
// to 16 kk + 15, wg_load_qa's layout).
template <class U> __device__ __forceinline__ void wg_qk_r(float (&s)[8][4], const u32 (&qa)[8][4], unsigned long long dk) {
	wg_pin<32>(&s[0][0]);
	wg_fence();
#pragma unroll
	for (int kk = 0; kk < 8; kk++) {
		const u32 off = ((kk >> 2) * 8192 + (kk & 3) * 32) >> 4;
		wg_rs64(&s[0][0], qa[kk], dk + off, kk > 0, U{});
	}
	wg_commit();
}

// wg_load_qa reads a thread's A fragments of a 64-row swizzled Q tile at
// generic address q (rows rl and rl + 8 of it, rl = warp * 16 + lane / 4):
// for dims 16 kk + 2 (lane % 4) and 8 on, the m16k16 layout.
__device__ __forceinline__ void wg_load_qa(u32 (&qa)[8][4], const unsigned char *q, int rl, int q4) {
#pragma unroll
	for (int kk = 0; kk < 8; kk++) {
		qa[kk][0] = *(const u32 *)(q + swz(rl, 2 * kk) + q4 * 4);
		qa[kk][1] = *(const u32 *)(q + swz(rl + 8, 2 * kk) + q4 * 4);
		qa[kk][2] = *(const u32 *)(q + swz(rl, 2 * kk + 1) + q4 * 4);
		qa[kk][3] = *(const u32 *)(q + swz(rl + 8, 2 * kk + 1) + q4 * 4);
	}
}

// wg_pv queues O += P V from the V tile at sv, 16 keys a step (two core
// groups), one commit group, not waited for.
template <class U> __device__ __forceinline__ void wg_pv(float *o, const u32 (&pa)[4][4], u32 sv) {
	wg_pin<64>(o);
	wg_fence();
#pragma unroll
	for (int t = 0; t < 4; t++) wg_rs128(o, pa[t], wg_desc_mn(sv + t * 2048), U{});
	wg_commit();
}
#endif

// wg_rescale multiplies a thread's O accumulators (o[4n + e]: row e < 2 ?
// r0 : r1, dims 8n + 2 (lane % 4) + (e & 1)) by its two rows' factors.
__device__ __forceinline__ void wg_rescale(float *o, const float (&alpha)[2]) {
#pragma unroll
	for (int n = 0; n < 16; n++) {
		o[4 * n] *= alpha[0];
		o[4 * n + 1] *= alpha[0];
		o[4 * n + 2] *= alpha[1];
		o[4 * n + 3] *= alpha[1];
	}
}

// wg_pack_p rounds the exponentials s of a 64-key tile into P's A
// fragments of the P V product, 16 keys each: score blocks 2t and 2t + 1.
template <class U> __device__ __forceinline__ void wg_pack_p(u32 (&pa)[4][4], const float (&s)[8][4]) {
#pragma unroll
	for (int t = 0; t < 4; t++) {
		pa[t][0] = pack2(s[2 * t][0], s[2 * t][1], U{});
		pa[t][1] = pack2(s[2 * t][2], s[2 * t][3], U{});
		pa[t][2] = pack2(s[2 * t + 1][0], s[2 * t + 1][1], U{});
		pa[t][3] = pack2(s[2 * t + 1][2], s[2 * t + 1][3], U{});
	}
}

// wg_store_o finishes a thread's two rows r0, r1 of an item (rows past R
// are padding): their sums l gathered over the quad, O times vm / l
// stored as T at token t0 + r / G, query head h G + r % G of H.
template <class T>
__device__ __forceinline__ void wg_store_o(T *out, const float *o, float (&l)[2], float vm, int r0, int r1, int R, int G,
	int t0, int H, int h, int q4) {
	constexpr int D = 128;
#pragma unroll
	for (int i = 0; i < 2; i++) {
		l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
		l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
	}
#pragma unroll
	for (int i = 0; i < 2; i++) {
		const int r = i ? r1 : r0;
		if (r >= R) continue;
		const int tok = r / G, jh = r - tok * G;
		T *dst = out + (long long)(t0 + tok) * H * D + (h * G + jh) * D;
		const float inv = vm / l[i];
#pragma unroll
		for (int n = 0; n < 16; n++)
			*(u32 *)(dst + n * 8 + q4 * 2) = pack2(o[4 * n + 2 * i] * inv, o[4 * n + 2 * i + 1] * inv, T{});
	}
}

// The kernels' argument tails by PAGED and F8 (block tables; the K and V
// scales) and what they pass on: attention_wg.cu's and attention_ws.cu's.
#define ATTN_WG_TAIL_0_0
#define ATTN_WG_TAIL_1_0 , const int *tables, int stride
#define ATTN_WG_TAIL_0_1 , float ksc, float vsc
#define ATTN_WG_TAIL_1_1 , const int *tables, int stride, float ksc, float vsc
#define ATTN_WG_ARGS_0_0 nullptr, 0, 1.f, 1.f
#define ATTN_WG_ARGS_1_0 tables, stride, 1.f, 1.f
#define ATTN_WG_ARGS_0_1 nullptr, 0, ksc, vsc
#define ATTN_WG_ARGS_1_1 tables, stride, ksc, vsc
