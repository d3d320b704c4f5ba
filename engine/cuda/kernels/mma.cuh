// Tensor-core building blocks shared by the engine's own GEMM (gemm.cu),
// its grouped expert GEMMs (moe_gemm.cu) and attention (attention_tc.cu):
// cp.async 16-byte copies into shared memory (zero-filled when out of
// bounds), ldmatrix (plain and transposing), and mma.sync m16n8k16 with
// fp32 accumulation for fp16 and bf16 (sm_80 and later).
#pragma once
#include "common.cuh"

__device__ __forceinline__ void cp_async16(u32 dst, const void *src, bool ok) {
	int n = ok ? 16 : 0; // src-size 0 fills the 16 bytes with zeros
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(n));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N)); }

__device__ __forceinline__ void ldmatrix_x4(u32 *r, u32 addr) {
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
		: "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

// ldmatrix_x4_trans hands each thread the transposes of the four 8 x 8
// matrices: a [k][n] tile stored row-major (attention's V, [key][dim])
// becomes the "col" B operand mma wants.
__device__ __forceinline__ void ldmatrix_x4_trans(u32 *r, u32 addr) {
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
		: "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

// movmatrix_trans transposes an 8 x 8 matrix of 16-bit values held as an
// mma fragment (a thread's word: row lane / 4, columns 2 (lane % 4) and the
// next): afterwards a thread holds its row of the transpose, that is rows
// 2 (lane % 4) and the next of column lane / 4.
__device__ __forceinline__ u32 movmatrix_trans(u32 a) {
	u32 d;
	asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(d) : "r"(a));
	return d;
}

__device__ __forceinline__ void mma(float *c, const u32 *a, const u32 *b, f16) {
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
		: "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
		: "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void mma(float *c, const u32 *a, const u32 *b, bf16) {
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
		: "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
		: "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// mma_e4m3 is mma.sync m16n8k32 on E4M3 operands with fp32 accumulation
// (sm_89 and later): A 16 x 32, four codes a register (a0 row g, k 4t..4t+3;
// a1 row g + 8; a2, a3 the same at k + 16), B 32 x 8 (b0 column g, k
// 4t..4t+3; b1 k + 16), C as m16n8k16's. Without XR_E4M3_MMA (before
// sm_89, or NVRTC before 12.4) it traps: the kernels that call it are
// launched only where it is there (f8MMA, attention.go).
__device__ __forceinline__ void mma_e4m3(float *c, const u32 *a, const u32 *b) {
#if XR_E4M3_MMA
	asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
		: "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
		: "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
	__trap();
#endif
}

// store_swapab writes a swap-AB tile's sums (the weights as mma's A, the
// tile's token rows as its columns, 8 a group; moe_mxfp4.cu, moe_fp8.cu):
// C's c0, c1 are weight row g (output column n_lo) for the group's token
// rows 2t, 2t + 1, c2, c3 weight row g + 8 (n_hi), each times s_lo or s_hi.
template <class T, int BM>
__device__ __forceinline__ void store_swapab(T *Y, const float (&acc)[BM / 8][4], int p0, int rows, int groups, int t,
	int N, int n_lo, int n_hi, bool ok_lo, bool ok_hi, float s_lo, float s_hi) {
#pragma unroll
	for (int j = 0; j < BM / 8; j++) {
		if (j >= groups) continue;
#pragma unroll
		for (int h = 0; h < 2; h++) {
			const int p = 8 * j + 2 * t + h;
			if (p >= rows) continue;
			T *y = Y + (long long)(p0 + p) * N;
			if (ok_lo) y[n_lo] = from_f32<T>(acc[j][h] * s_lo);
			if (ok_hi) y[n_hi] = from_f32<T>(acc[j][2 + h] * s_hi);
		}
	}
}

// gemm_store2 writes a GEMM accumulator pair, row r, columns c and c + 1
// of the M x N output (r and c inside it): into Y, rounded, or split-K
// (P not null) into this split's (blockIdx.z) fp32 partials. pairs: N is
// even, so the pair is one aligned store.
template <class T>
__device__ __forceinline__ void gemm_store2(T *Y, float *P, int M, int N, int r, int c, float v0, float v1, bool pairs) {
	const long long o = (long long)r * N + c;
	if (P) {
		float *p = P + (long long)blockIdx.z * M * N + o;
		if (pairs) {
			*(float2 *)p = make_float2(v0, v1);
		} else {
			p[0] = v0;
			if (c + 1 < N) p[1] = v1;
		}
	} else if (pairs) {
		*(u32 *)(Y + o) = (u32)from_f32<T>(v0).x | ((u32)from_f32<T>(v1).x << 16);
	} else {
		Y[o] = from_f32<T>(v0);
		if (c + 1 < N) Y[o + 1] = from_f32<T>(v1);
	}
}
