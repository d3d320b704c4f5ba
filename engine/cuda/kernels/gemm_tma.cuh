// The engine's own GEMM on Hopper (gemm_plugin: disable, sm_90a), fed by
// the tensor memory accelerator: Y[M,N] = X[M,K] * W[N,K]^T, fp16 or bf16
// in and out or E4M3 codes in with scales (as gemm_wgmma.cu's kernels),
// fp32 accumulation on wgmma.mma_async.
//
// Warp specialised. Warpgroup 0 is the producer: its first warp waits for
// a stage to be free, and one lane tells the stage's "full" mbarrier how
// many bytes to expect and issues two TMA loads (a box of the X rows and
// one of the W rows, 128 bytes of each row, in the 128-byte swizzle
// wgmma's descriptors name; rows and columns past the edges arrive as
// zeros). Warpgroups 1..C are the consumers, 64 rows of the tile each:
// they wait on "full", issue their MMAs and, once the MMAs of the tile
// before have completed (wait_group 1), free that tile's stage on its
// "empty" mbarrier. So every stage is in flight at once, where
// gemm_wgmma.cu's cp.async loads, issued by the threads that also
// multiply, ran two tiles ahead with a block-wide barrier a tile; and no
// thread computes a load address.
//
// Split K: the blocks of one output tile (gridDim.z of them, each kps
// k-tiles) form a thread-block cluster. Each writes its fp32 partial tile
// into its own shared memory (the stages are done with); after a cluster
// barrier, block r adds up rows r*ROWS/S.. of all S partial tiles, reading
// the others' shared memory (ld.shared::cluster), and stores them; a
// second barrier keeps every block's memory alive until all have read it.
// No partials go through global memory and no reduction kernel follows.
//
// Multicast (K unsplit, a cluster of two blocks along X: the two row tiles
// of one column tile): each block's producer loads its own X box and half
// of the W tile, and the TMA writes that half into both blocks' stages and
// completes its bytes on both blocks' "full" barriers. So each of W's
// tiles crosses from L2 once for the two row tiles, where each block
// reading all of it doubled W's share of L2's bandwidth (cuBLASLt's
// kernels for a decode's GEMMs run in such pairs: nvjet_..._1x2). A stage
// is refilled only once the consumers of both blocks have freed it: they
// arrive on both blocks' "empty" barriers.
//
// Swapped (XR > 0): W's rows on the MMA's M, 64 a consumer (BN = 64 C),
// and XR rows of X (32-48) on its N, as cuBLASLt tiles a decode's small
// projections at 128-256 rows (many blocks of few X rows: TinyLlama's o
// at M = 128 as 128 blocks of 64 x 40); or a decode's whole batch of up
// to 160, 176 or 192 rows in one tile, or 80 or 88 in each of two, whose N
// steps by 8 rows where the unswapped M steps by 64. The boxes and stages
// are the unswapped ones (X's box first, then W's); the accumulators hold
// the output transposed, so every block stages its tile in shared memory in
// the output's orientation and stores it through the split's reduction,
// unsplit (S = 1) included, whose epilogues then apply as they are.
//
// Clustered (CX x CY > 1, K unsplit; a swapped tile on alternating
// consumers, or a narrow unswapped one): a cluster of CX row tiles (of X)
// by CY column tiles (of W), as cuBLASLt runs a decode's narrow tiles at
// 129-256 rows (64 x 72 in clusters of 4 x 2 at 136, 64 x 96 in 4 x 2 at
// 256: Nsight Compute, H200, bench/NOTES.md v62). Each block
// loads 1 / CX of W's tile into the CX blocks of its column tile and 1 / CY
// of X's box into the CY blocks of its row tile, so that L2 serves each
// operand's bytes once for the blocks sharing them; a stage is refilled
// once the consumers of all the CX + CY - 1 blocks writing into it have
// freed it, each of the releasing consumer's first CX + CY - 1 threads
// arriving on one of those blocks' barriers. The shape is a template
// argument: read at run time it cost the unclustered kernels 5-12 %
// (v54, v58).
//
// With two consumer warpgroups the producer gives registers back
// (setmaxnreg) so that the consumers can hold 128 accumulators each.
#pragma once
#include "common.cuh"
#include "fp8.cuh"
#include "mma.cuh"
#include "wgmma.cuh"
#include "mbar.cuh"

// tmap is a CUtensorMap: 128 opaque bytes from cuTensorMapEncodeTiled,
// passed by value (__grid_constant__, so TMA reads it in parameter space).
// TMA_MAX_CLUSTER is gemm_tma.go's tmaMaxCluster: the most blocks that
// split one tile's K.
#define TMA_MAX_CLUSTER 8

struct __align__(64) tmap {
	u64 v[16];
};

#ifdef XR_WGMMA
// The producer warp's issue: tma_expect_one tells barrier bar to expect
// bytes more; tma_load2d_one copies the box at (c0 inner, c1 rows) of
// the tensor map m into shared memory at dst, completing bytes on the
// mbarrier bar; tma_load2d_mc_one the same into the shared memory of
// every block of the cluster in mask, at dst's offset in each, completing
// the bytes on each one's barrier at bar's offset.
//
// Every lane of the converged warp runs the producer's loop and computes
// the operands, and one lane, elected inside the instruction's own block,
// issues. So the operands are provably warp-uniform and stay in uniform
// registers. Issued by a lone thread (tid == 0), they went through vector
// registers, each TMA load in a loop that moves a lane's values to
// uniform registers; with g % STAGES's multiply-high chain the producer's
// k-tile took some 47 dependent instructions, slower than a 64 x 96
// tile's MMAs (Nsight Compute's warp sampling, GPT-OSS-20B's o at M =
// 256: the consumers of p1m and p1mc41 waited on "full" half their time,
// the producer never on "empty"; bench/NOTES.md v65).
__device__ __forceinline__ void tma_expect_one(u32 bar, u32 bytes) {
	asm volatile("{\n.reg .pred p;\nelect.sync _|p, 0xffffffff;\n@p mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n}" ::"r"(bar),
		"r"(bytes)
		: "memory");
}
__device__ __forceinline__ void tma_load2d_one(u32 dst, const tmap *m, int c0, int c1, u32 bar) {
	asm volatile("{\n.reg .pred p;\nelect.sync _|p, 0xffffffff;\n"
				 "@p cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n}" ::"r"(dst),
		"l"((u64)m), "r"(c0), "r"(c1), "r"(bar)
		: "memory");
}
__device__ __forceinline__ void tma_load2d_mc_one(u32 dst, const tmap *m, int c0, int c1, u32 bar, u16 mask) {
	asm volatile("{\n.reg .pred p;\nelect.sync _|p, 0xffffffff;\n"
				 "@p cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;\n}" ::"r"(dst),
		"l"((u64)m), "r"(c0), "r"(c1), "r"(bar), "h"(mask)
		: "memory");
}
// The points of a traced block's timeline (gemm_tma_trace.cu), the
// indexes of its trace row of TMA_T_ROW: entry, past the wait for the
// kernel before, the first stage arrived (a consumer's view), the last MMA
// done, the output stored (after the split's reduction); 5 and 6 are the
// global timer at entry and at the end, 7 the multiprocessor; under a
// split also its partial tile in shared memory, past the cluster's
// barrier (every block's tile there), and its rows added up and stored
// (before the last barrier); 0 where a launch has no such point. The
// points are the SM's clock, which counts the cycles the block ran at.
#define TMA_T_ENTRY 0
#define TMA_T_WAITED 1
#define TMA_T_FIRST 2
#define TMA_T_MMA 3
#define TMA_T_END 4
#define TMA_T_SM 7
#define TMA_T_STAGED 8
#define TMA_T_SYNCED 9
#define TMA_T_REDUCED 10
#define TMA_T_ROW 16
__device__ __forceinline__ void tma_mark(u64 *tr, int point) {
	u64 c, g;
	asm volatile("mov.u64 %0, %%clock64;" : "=l"(c));
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g));
	tr[point] = c;
	if (point == TMA_T_ENTRY) tr[5] = g;
	if (point == TMA_T_END) tr[6] = g;
}
__device__ __forceinline__ u64 tma_smid() {
	u32 s;
	asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
	return s;
}
// bar_sync_all is a block-wide barrier (named barrier 1, all NT threads)
// that the producer and the consumers reach from their own code.
template <int NT> __device__ __forceinline__ void bar_sync_all() { asm volatile("bar.sync 1, %0;" ::"n"(NT) : "memory"); }
__device__ __forceinline__ void cluster_sync() {
	asm volatile("barrier.cluster.arrive.aligned;\nbarrier.cluster.wait.aligned;" ::: "memory");
}
__device__ __forceinline__ int cluster_rank() {
	int r;
	asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
	return r;
}
__device__ __forceinline__ int cluster_blocks() {
	int n;
	asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
	return n;
}
// ld_cluster4 reads 16 bytes at shared address a of cluster block q.
__device__ __forceinline__ float4 ld_cluster4(u32 a, int q) {
	u32 ra;
	float4 v;
	asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(ra) : "r"(a), "r"(q));
	asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(ra));
	return v;
}
// stmatrix_x4_trans stores four 8 x 8 matrices of 16-bit values held as
// mma fragments (a thread's word r[g]: row lane / 4, columns 2 (lane % 4)
// and the next, of matrix g) transposed: row i of matrix g's transpose, 16
// bytes, at the address lane 8 g + i gives.
__device__ __forceinline__ void stmatrix_x4_trans(u32 addr, const u32 (&r)[4]) {
	asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(r[0]), "r"(r[1]),
		"r"(r[2]), "r"(r[3])
		: "memory");
}
// stmatrix_x2_trans is stmatrix_x4_trans of two matrices, at the addresses
// lanes 0-15 give.
__device__ __forceinline__ void stmatrix_x2_trans(u32 addr, const u32 (&r)[2]) {
	asm volatile("stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [%0], {%1, %2};" ::"r"(addr), "r"(r[0]), "r"(r[1]) : "memory");
}
// bar_sync_consumers is a barrier of the NC consumer threads alone (named
// barrier 3), which the producer, loading ahead, never joins.
template <int NC> __device__ __forceinline__ void bar_sync_consumers() { asm volatile("bar.sync 3, %0;" ::"n"(NC) : "memory"); }
#endif

// tma_store4 writes columns c..c+3 of row r of Y (inside M; columns past N
// dropped), scaled for codes as gemm_wgmma.cu's epilogue.
template <class T, bool F8>
__device__ __forceinline__ void tma_store4(T *Y, int M, int N, int r, int c, float4 v, const float *sx, int sxRows,
	const float *sw, int swRows) {
	if (r >= M) return;
	float a[4] = {v.x, v.y, v.z, v.w};
	if constexpr (F8) {
		const float s = sx[sxRows ? r : 0];
#pragma unroll
		for (int j = 0; j < 4; j++) a[j] *= s * sw[swRows ? min(c + j, N - 1) : 0];
	}
	T *y = Y + (long long)r * N + c;
	if ((N & 3) == 0 && c + 3 < N) {
		((u32 *)y)[0] = (u32)from_f32<T>(a[0]).x | ((u32)from_f32<T>(a[1]).x << 16);
		((u32 *)y)[1] = (u32)from_f32<T>(a[2]).x | ((u32)from_f32<T>(a[3]).x << 16);
	} else {
#pragma unroll
		for (int j = 0; j < 4; j++)
			if (c + j < N) y[j] = from_f32<T>(a[j]);
	}
}

// Epilogues (16-bit only): TMA_EPI_GLU, the gate_up projection with SwiGLU
// behind it: W is the fused [2N, K] gate_up weight, a tile of BN columns
// holds BN / 2 gate rows and the same BN / 2 up rows (two boxes a stage),
// and Y is the [M, N] activation; TMA_EPI_RES, the residual add behind the
// output and down projections: Y = T(Y + T(x W^T)). Both round as the
// separate kernels store (SwiGLU of the rounded halves, the add of the
// rounded product).
#define TMA_EPI_NONE 0
#define TMA_EPI_GLU 1
#define TMA_EPI_RES 2

// epi_value is output (r, c)'s value from its sums: under GLU v is the gate
// sum and u the up sum; under RES v is added to what Y holds.
//
// SwiGLU's quotient is __fdividef's (the reciprocal's approximation, 2 ulp
// of fp32 before the output's rounding to 16 bits) where the separate
// kernels divide exactly: the exact quotient's checks and slow-path call
// made the epilogue's code long and its dependent chains longer, and with
// two warps a scheduler nothing hid them (ncu, gate_up at M = 256: 3,600
// instructions, stalled on fixed-latency dependencies and instruction
// fetch, 4.7 us a block).
template <class T> __device__ __forceinline__ float epi_swiglu(float v, float u) {
	const float g = to_f32(from_f32<T>(v)), w = to_f32(from_f32<T>(u));
	return __fdividef(g, 1.f + __expf(-g)) * w;
}

template <class T, int EPI>
__device__ __forceinline__ float epi_value(const T *Y, int N, int r, int c, float v, float u) {
	if constexpr (EPI == TMA_EPI_GLU) {
		return epi_swiglu<T>(v, u);
	} else if constexpr (EPI == TMA_EPI_RES) {
		return to_f32(Y[(long long)r * N + c]) + to_f32(from_f32<T>(v));
	}
	return v;
}

// epi_addw adds a pair of rounded products p to the pair of residuals
// old, both two 16-bit values (the lower first), in fp32, then rounds.
template <class T> __device__ __forceinline__ u32 epi_addw(u32 old, u32 p) {
	T lo, hi, plo, phi;
	lo.x = (u16)(old & 0xffffu), hi.x = (u16)(old >> 16);
	plo.x = (u16)(p & 0xffffu), phi.x = (u16)(p >> 16);
	return pack2(to_f32(lo) + to_f32(plo), to_f32(hi) + to_f32(phi), T{});
}

// epi_res2 is the residual add of a pair of outputs held as two 16-bit
// values in old (the lower first), as epi_value rounds it: the product
// rounded, then the add.
template <class T> __device__ __forceinline__ u32 epi_res2(u32 old, float v0, float v1) {
	return epi_addw<T>(old, pack2(v0, v1, T{}));
}

// epi_store2 writes outputs (r, c) and (r, c + 1) of the M x N output from
// their sums (v, and u under GLU); rows past M and columns past N dropped.
template <class T, int EPI>
__device__ __forceinline__ void epi_store2(T *Y, int M, int N, int r, int c, float v0, float v1, float u0, float u1) {
	if (r >= M || c >= N) return;
	const float a = epi_value<T, EPI>(Y, N, r, c, v0, u0);
	if (c + 1 < N) {
		const float b = epi_value<T, EPI>(Y, N, r, c + 1, v1, u1);
		T *y = Y + (long long)r * N + c;
		if ((N & 1) == 0) {
			*(u32 *)y = (u32)from_f32<T>(a).x | ((u32)from_f32<T>(b).x << 16);
		} else {
			y[0] = from_f32<T>(a);
			y[1] = from_f32<T>(b);
		}
	} else {
		Y[(long long)r * N + c] = from_f32<T>(a);
	}
}

// tma_red_args is what a split's reduction needs of its block.
template <class T> struct tma_red_args {
	T *Y;
	int M, N, m0, n0;
	u32 base; // the block's partial tile in shared memory, rows BN + 8 floats apart
	int rank, r0, n4; // rows r0.. of the tile are this block's to add up: n4 float4s
	const float *sx;
	int sxRows;
	const float *sw;
	int swRows;
};

#ifdef XR_WGMMA
// ld_shared4 reads 16 bytes at shared address a of this block.
__device__ __forceinline__ float4 ld_shared4(u32 a) {
	float4 v;
	asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(a));
	return v;
}

// tma_reduce adds up the split's partial tiles (rows a.r0.. of each of the
// cluster's S blocks) and stores them with the epilogue; SS is S where the
// caller knows it, 0 where it reads gridDim.z. A consumer thread takes U
// float4s of the tile a round and has all their reads in flight before it
// adds any: the S partials of each (the block's own from its shared
// memory, the others' across the cluster) and, under RES, the residual
// they are added to, which the loop before this one read only after the
// sums, a global read's latency behind every round. Knowing S, U is the
// thread's whole share of the rows where that fits in 24 float4s of
// registers; otherwise two (BenchmarkGemmPhases on an H100, o and down at
// M = 256, split 3: the reduction 4.5-4.8 us -> 2.5-2.6).
template <class T, bool F8, int EPI, int ROWS, int BN, int NT, int SS>
__device__ __forceinline__ void tma_reduce(const tma_red_args<T> &a) {
	constexpr bool GLU = EPI == TMA_EPI_GLU, RES = EPI == TMA_EPI_RES;
	constexpr int LD = BN + 8, W4 = (GLU ? BN / 2 : BN) / 4, CT = NT - 128, QN = SS > 0 ? SS : TMA_MAX_CLUSTER;
	constexpr int SHARE = SS > 0 ? ((ROWS + SS - 1) / SS * W4 + CT - 1) / CT : 2;
	constexpr int CAP = SS > 0 ? 24 / (SS * (GLU ? 2 : 1)) : 2;
	constexpr int U = SHARE < CAP ? SHARE : (CAP > 0 ? CAP : 1);
	const int S = SS > 0 ? SS : gridDim.z, n4 = a.n4;
	T *Y = a.Y;
	const int M = a.M, N = a.N;
	const bool vec = (N & 3) == 0; // 8-byte residual reads and stores
	for (int e = (int)threadIdx.x - 128; e < n4; e += U * CT) {
		float4 p[U][QN], pu[GLU ? U : 1][GLU ? QN : 1];
		uint2 res[RES ? U : 1];
#pragma unroll
		for (int u = 0; u < U; u++) {
			const int eu = min(e + u * CT, n4 - 1);
			const int r = a.r0 + eu / W4, c = (eu % W4) * 4;
			const u32 off = a.base + (u32)(r * LD + c) * 4;
#pragma unroll
			for (int q = 0; q < QN; q++)
				if (q < S) {
					p[u][q] = q == a.rank ? ld_shared4(off) : ld_cluster4(off, q);
					if constexpr (GLU) pu[u][q] = q == a.rank ? ld_shared4(off + (BN / 2) * 4) : ld_cluster4(off + (BN / 2) * 4, q);
				}
			if constexpr (RES) {
				const int gr = a.m0 + r, gc = a.n0 + c;
				res[u] = make_uint2(0u, 0u);
				if (vec && gr < M && gc + 3 < N) res[u] = *(const uint2 *)(Y + (long long)gr * N + gc);
			}
		}
#pragma unroll
		for (int u = 0; u < U; u++) {
			const int eu = e + u * CT;
			if (eu >= n4) break;
			float4 v = p[u][0]; // in rank order: the same sums whichever block adds them
#pragma unroll
			for (int q = 1; q < QN; q++)
				if (q < S) v.x += p[u][q].x, v.y += p[u][q].y, v.z += p[u][q].z, v.w += p[u][q].w;
			const int r = a.m0 + a.r0 + eu / W4, c = a.n0 + (eu % W4) * 4;
			if (c >= N) continue;
			if constexpr (EPI == TMA_EPI_NONE) {
				tma_store4<T, F8>(Y, M, N, r, c, v, a.sx, a.sxRows, a.sw, a.swRows);
			} else if constexpr (RES) {
				if (r >= M) continue;
				if (vec && c + 3 < N) {
					*(uint2 *)(Y + (long long)r * N + c) = make_uint2(epi_res2<T>(res[u].x, v.x, v.y), epi_res2<T>(res[u].y, v.z, v.w));
				} else {
					epi_store2<T, EPI>(Y, M, N, r, c, v.x, v.y, 0.f, 0.f);
					epi_store2<T, EPI>(Y, M, N, r, c + 2, v.z, v.w, 0.f, 0.f);
				}
			} else {
				float4 w = pu[u][0];
#pragma unroll
				for (int q = 1; q < QN; q++)
					if (q < S) w.x += pu[u][q].x, w.y += pu[u][q].y, w.z += pu[u][q].z, w.w += pu[u][q].w;
				epi_store2<T, EPI>(Y, M, N, r, c, v.x, v.y, w.x, w.y);
				epi_store2<T, EPI>(Y, M, N, r, c + 2, v.z, v.w, w.z, w.w);
			}
		}
	}
}
#endif

// XR > 0: the swapped tile, XR rows of X by BN = 64 C rows of W (above;
// 64 under KP). KP: a tile of 64 rows (of X, or swapped of W) whose two
// consumers (C = 2) take alternate k-tiles,
// each into accumulators of its own, added up in shared memory before the
// stores (STAGES even, so that each stage is always the same consumer's):
// two warps a scheduler to issue a narrow tile's MMAs, where one
// consumer's per-k-tile instructions bounded it (bench/NOTES.md v55).
// NS: a 64-row tile of X whose two consumers each take half of W's BN
// rows (an MMA of BN / 2 columns a consumer, the same A operand), every
// k-tile, and store their own halves of the outputs (gemm_tma_half.cu).
// TR (gemm_tma_trace.cu's kernels only): each block records when it
// reached the points of its timeline (tma_mark) in trace[block][TMA_T_ROW].
// PERSIST (K unsplit): each block takes the output's tiles blockIdx.x,
// blockIdx.x + gridDim.x, ..., row tiles fastest, one pipeline across
// them: the producer loads the next tile's stages while the consumers
// store the last one's outputs, and a second wave's blocks need no launch
// or fill of their own. Swapped and persistent (EPI none), the stages stay
// the producer's: the consumers stage each tile's outputs, rounded to T,
// in shared memory of their own past the barriers (ROWS rows of BN + 8
// values), transposed by stmatrix, and store its rows from there in 16-byte
// pieces, under the next tile's loads. EPP: the passes that staging takes,
// XR / EPP rows of X each, so that a wide tile's staged rows leave room
// for one more stage (s2x224: four stages beside 112 staged rows, three
// beside 224).
template <class T, class E, int C, int BN, int STAGES, int EPI = TMA_EPI_NONE, bool TR = false, bool PERSIST = false, int XR = 0,
	bool KP = false, int CX = 1, int CY = 1, bool NS = false, int EPP = 1>
__device__ __forceinline__ void gemm_tma(const tmap &tx, const tmap &tw, T *__restrict__ Y, const float *sx, int sxRows,
	const float *sw, int swRows, int M, int N, int K, int kps, int early, u64 *trace = nullptr) {
#ifdef XR_WGMMA
	u64 *tr = nullptr;
	if constexpr (TR) {
		tr = trace + TMA_T_ROW * (blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z));
		if (threadIdx.x == 0) tma_mark(tr, TMA_T_ENTRY), tr[TMA_T_SM] = tma_smid();
	}
	constexpr bool F8 = sizeof(E) == 1;
	// ROWS: the tile's rows of X (X's box); NA: a consumer's accumulators.
	constexpr bool SW = XR > 0;
	// BNC: a consumer's columns of the tile (NS: half of them each).
	constexpr int BNC = NS ? BN / 2 : BN;
	constexpr int ROWS = SW ? XR : (KP || NS ? 64 : 64 * C), BK = 128 / (int)sizeof(E), NA = (SW ? XR : BNC) / 2, NT = (C + 1) * 128;
	constexpr int ABYTES = ROWS * 128, STAGE = ABYTES + BN * 128;
	static_assert(BN == 64 || BN == 80 || BN == 96 || BN == 128 || BN == 176 || BN == 192 || BN == 256, "tile width");
	static_assert(!SW || (BN == (KP ? 64 : 64 * C) && (XR == 32 || XR == 40 || XR == 48 || XR == 72 || XR == 80 || XR == 88 || XR == 104 || XR == 112 || XR == 136 || XR == 160 || XR == 176 || XR == 192 || XR == 200 || XR == 208 || XR == 224) && !TR), "swapped tile");
	// EP: the swapped tile's persistent form, its outputs staged apart from the stages.
	constexpr bool EP = SW && PERSIST;
	static_assert(!EP || EPI == TMA_EPI_NONE, "the persistent swapped kernels have no epilogue");
	static_assert(!EP || XR % (8 * EPP) == 0, "the staged tile goes out in 8-row blocks (stmatrix), the same number a pass");
	static_assert(EP || EPP == 1, "passes stage a persistent swapped tile");
	static_assert(!KP || (C == 2 && !TR && !PERSIST && STAGES % 2 == 0), "alternating consumers");
	static_assert(!NS || (C == 2 && !SW && !KP && !TR && !PERSIST && EPI == TMA_EPI_NONE && BNC % 8 == 0), "halves: two consumers, each half of W's tile, no epilogue");
	constexpr bool CL = CX * CY > 1;
	// Each block's share of a multicast tile is whole 8-row swizzle atoms:
	// 1 / CX of W's BN rows (under GLU the gate rows the first CX / 2 blocks',
	// the up rows the others'), 1 / CY of X's.
	static_assert(!CL || (!PERSIST && (!SW || KP) && (CX == 1 || CX == 2 || CX == 4) && (BN / CX) % 8 == 0 && ROWS % (8 * CY) == 0),
		"clustered: K unsplit, swapped tiles alternating, whole swizzle atoms of each operand a block");
	// ARR: the consumers that free each stage (KP: the one that read it).
	constexpr int ARR = KP ? 1 : C;
	constexpr bool GLU = EPI == TMA_EPI_GLU;
	static_assert(EPI == TMA_EPI_NONE || !F8, "the epilogues are 16-bit only");
	static_assert(!(PERSIST && TR), "the traced kernels time one tile a block");
	if ((PERSIST || NS) && gridDim.z != 1) asm volatile("trap;"); // the launcher never splits a persistent launch or halves
	extern __shared__ unsigned char smem[];
	const u32 base = (smem_u32(smem) + 1023u) & ~1023u;
	const u32 full = base + STAGES * STAGE, empty = full + STAGES * 8;
	const u32 stg = (empty + STAGES * 8 + 15u) & ~15u; // EP's staged tile (gemm_tma.go's tmaPlan.smem)

	const int tid = threadIdx.x, wg = tid >> 7;
	// pw: the thread's warp, warp-uniform as the compiler sees it (a lane's
	// broadcast); warp 0 is the producer's.
	const int pw = __shfl_sync(0xffffffffu, tid >> 5, 0);
	// Row tiles along X (tmaPlan.grid): blocks launched together share W's
	// tiles; persistent blocks take tiles in the same order. Under GLU a
	// tile's BN columns are BN / 2 outputs' gate and up sums.
	constexpr int WT = GLU ? BN / 2 : BN; // a tile's output columns
	const int rowTiles = (M + ROWS - 1) / ROWS;
	const int ntiles = PERSIST ? rowTiles * ((N + WT - 1) / WT) : 1;
	const int t0 = PERSIST ? (int)blockIdx.x : 0, tstep = PERSIST ? (int)gridDim.x : 1;
	// origin is tile t's first row and column.
	auto origin = [&](int t, int &tm0, int &tn0) {
		if constexpr (PERSIST) {
			tm0 = (t % rowTiles) * ROWS, tn0 = (t / rowTiles) * WT;
		} else {
			tm0 = blockIdx.x * ROWS, tn0 = blockIdx.y * WT;
		}
	};
	int m0, n0;
	origin(t0, m0, n0);
	const int ktiles = (K + BK - 1) / BK, kt0 = blockIdx.z * kps;
	const int nk = min(ktiles, kt0 + kps) - kt0; // >= 1: the launcher's splits leave none empty
	// mc: W's loads multicast to a cluster of two row tiles (the launcher
	// clusters along X only with K unsplit; persistent blocks in pairs
	// then take the two row tiles of each column tile, rowTiles even).
	const bool mc = !CL && gridDim.z == 1 && cluster_blocks() == 2;
	const int half = mc ? cluster_rank() : 0; // the half of W's tile this block loads
	// CL: the block's row tile (crx) and column tile (cry) in its cluster;
	// the blocks of its row tile, X's multicast (cluster ranks x fastest).
	int crx = 0, cry = 0;
	u16 xmask = 0;
	if constexpr (CL) {
		if (gridDim.z != 1) asm volatile("trap;"); // the launcher never splits a clustered launch
		asm volatile("mov.u32 %0, %%cluster_ctaid.x;" : "=r"(crx));
		asm volatile("mov.u32 %0, %%cluster_ctaid.y;" : "=r"(cry));
#pragma unroll
		for (int j = 0; j < CY; j++) xmask |= (u16)(1u << (crx + j * CX));
	}

	// load_w issues the TMA load(s) of W's k-tile kt0 + i of the tile whose
	// first column is n0 into stage s: the producer warp, every lane (one
	// issues: tma_load2d_one).
	auto load_w = [&](int i, int s, int n0) {
		const int k0 = (kt0 + i) * BK;
		if (CL ? CX > 1 : mc) {
			// Part h of the tile's BN rows (BN / P, the map's box) to the P
			// blocks sharing it: rows n0 + h * BN / P..; under GLU the gate
			// rows' parts, then the up rows'. Clustered, they are the CX row
			// tiles of the block's column tile; else a pair.
			constexpr int P = CL ? CX : 2, PR = BN / P;
			const int h = CL ? crx : half;
			const u16 mask = CL ? (u16)(((1u << CX) - 1) << (CX * cry)) : (u16)3;
			const int row = GLU ? (h < P / 2 ? n0 + h * PR : N + n0 + (h - P / 2) * PR) : n0 + h * PR;
			tma_load2d_mc_one(base + s * STAGE + ABYTES + h * PR * 128, &tw, k0, row, full + 8 * s, mask);
		} else if constexpr (GLU) {
			// Two boxes of BN / 2 rows (the map's box): gate rows n0..,
			// then up rows N + n0..; gate rows past N read up rows, whose
			// outputs are dropped.
			tma_load2d_one(base + s * STAGE + ABYTES, &tw, k0, n0, full + 8 * s);
			tma_load2d_one(base + s * STAGE + ABYTES + (BN / 2) * 128, &tw, k0, N + n0, full + 8 * s);
		} else {
			tma_load2d_one(base + s * STAGE + ABYTES, &tw, k0, n0, full + 8 * s);
		}
	};
	// early: the first STAGES k-tiles of W are requested before the wait
	// for the kernel before. W is a weight, never written while a forward
	// pass runs (as gemv.cu's first round), so under programmatic dependent
	// launch a block that lands while that kernel's last blocks still run
	// has W's share of its first stages in flight by the time X may be read.
	const int pre = early && t0 < ntiles ? min(nk, STAGES) : 0; // a persistent block past the last tile loads nothing
	if (tid == 0) {
		for (int s = 0; s < STAGES; s++) {
			mbar_init(full + 8 * s, 1);
			mbar_init(empty + 8 * s, CL ? (CX + CY - 1) * ARR : (mc ? 2 * ARR : ARR));
		}
		asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
	}
	if (CL || mc) cluster_sync(); // every block's barriers exist before any multicasts
	if (pw == 0) { // lane 0 issues: the thread that initialised the barriers
		for (int i = 0; i < pre; i++) {
			tma_expect_one(full + 8 * i, STAGE); // both boxes' bytes: X's come after the wait
			load_w(i, i, n0);
		}
	}
	__syncthreads();
	pdl_enter(); // before the first load of X, which the kernel before may write
	if constexpr (TR) {
		if (tid == 0) tma_mark(tr, TMA_T_WAITED);
	}

	if (wg == 0) {
		// Producer. Its path never joins the consumers' (their register
		// counts differ after setmaxnreg); it meets them only at barriers.
		if constexpr (C == 2) asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
		if (pw == 0) {
			// The whole warp, one lane issuing (above). g counts k-tiles
			// across the block's tiles; s is g's stage and ph the phase of
			// its barriers, counters as the consumers' are.
			for (int t = t0, g = 0, s = 0, ph = 0; t < ntiles; t += tstep) {
				int tm0, tn0;
				origin(t, tm0, tn0);
				for (int i = 0; i < nk; i++, g++) {
					if (g >= pre) {
						mbar_wait(empty + 8 * s, ph ^ 1);
						tma_expect_one(full + 8 * s, STAGE);
						load_w(i, s, tn0);
					}
					if constexpr (CY > 1) {
						// The block's rows cry * XP.. of X's box, into its row tile's blocks.
						constexpr int XP = ROWS / CY;
						tma_load2d_mc_one(base + s * STAGE + cry * XP * 128, &tx, (kt0 + i) * BK, tm0 + cry * XP, full + 8 * s, xmask);
					} else {
						tma_load2d_one(base + s * STAGE, &tx, (kt0 + i) * BK, tm0, full + 8 * s);
					}
					if (++s == STAGES) s = 0, ph ^= 1;
				}
			}
		}
		if (gridDim.z > 1) { // the split's barriers, as the consumers pass them below
			bar_sync_all<NT>();
			cluster_sync();
			cluster_sync();
		} else {
			if constexpr (SW && !EP) { // the staged tile's barriers, unsplit
				bar_sync_all<NT>();
				bar_sync_all<NT>();
			}
			if (CL || mc) cluster_sync(); // the last, as the consumers pass it below
		}
		return;
	}

	// Three consumers (wg3) keep the launch's registers: their 64
	// accumulators fit the 128 a thread that 512 threads leave, and an
	// increase could wait on more than the producer's decrease frees.
	if constexpr (C == 2) asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
	// This consumer's 64 rows of the tile (of X, or of W swapped) in a
	// stage: warp-uniform as the compiler sees it (the constant 0 with one
	// consumer, a lane's broadcast with more), so that the MMAs' descriptors
	// can be computed in uniform registers rather than each one's moved
	// there.
	const int cw = C == 1 ? 0 : __shfl_sync(0xffffffffu, wg - 1, 0);
	const int row0 = KP || NS ? 0 : cw * 64; // the first of them
	const u32 aoff = row0 * 128;
	// NS: this consumer's half of W's rows in a stage, and of the outputs.
	const u32 boff = NS ? cw * BNC * 128 : 0;
	const int nh = NS ? cw * BNC : 0;
	// The stages' memory as floats: the partial tiles staged there once
	// every MMA is done reading it.
	float *const stages = (float *)(smem + (base - smem_u32(smem)));
	// Accumulator layout: the warp's 16 rows of its warpgroup's 64; each
	// 8-column block j holds rows lane/4 and lane/4 + 8, columns 2 (lane % 4)
	// and +1.
	const int warp = (tid >> 5) & 3, lane = tid & 31;
	const int rl = row0 + warp * 16 + (lane >> 2); // row in the tile
	// release frees a stage: under multicast in both blocks, whose
	// producers each write half of it into both.
	auto release = [&](u32 bar) {
		mbar_arrive(bar);
		if (mc) mbar_arrive_cluster(bar, half ^ 1);
	};
	// CL: thread j < CX + CY - 1 of the consumer frees its stages on one
	// block's barriers (rel, mapped once): j < CX the blocks of its column
	// tile (itself among them), then the other blocks of its row tile.
	constexpr int NREL = CX + CY - 1;
	u32 rel = 0;
	if constexpr (CL) {
		if (const int j = tid & 127; j < NREL) {
			const int y = j - CX;
			rel = mapa_cluster(empty, j < CX ? j + cry * CX : crx + (y < cry ? y : y + 1) * CX);
		}
	}
	// One pass a tile (one, unless PERSIST), over the k-tiles the
	// producer's loop counts (g). The stage of the k-tile (s), its barriers'
	// phase (ph) and the stage before it (sp) are counters: with a stage
	// count no power of two, g % STAGES and g / STAGES cost every k-tile a
	// multiply-high chain in the consumer's path, which bounds the narrow
	// tiles (bench/NOTES.md v55).
	// KP: consumer cw takes k-tiles cw, cw + 2, ..., from stage cw on.
	constexpr int KS = KP ? 2 : 1;
	const int k0 = KP ? cw : 0;
	for (int t = t0, s = k0, ph = 0, sp = 0; t < ntiles; t += tstep) {
		origin(t, m0, n0);
		float acc[NA];
#pragma unroll
		for (int i = 0; i < NA; i++) acc[i] = 0.f;
		for (int i = k0; i < nk; i += KS) {
			mbar_wait(full + 8 * s, ph);
			if constexpr (TR) {
				if (i == 0 && tid == 128) tma_mark(tr, TMA_T_FIRST);
			}
			if constexpr (SW) {
				// This consumer's 64 rows of W on the MMA's M, the X rows on its N.
				wg_mma_ktile<XR, E>(acc, base + s * STAGE + ABYTES + aoff, base + s * STAGE);
			} else {
				wg_mma_ktile<BNC, E>(acc, base + s * STAGE + aoff, base + s * STAGE + ABYTES + boff);
			}
			wg_wait<1>(); // the MMAs of the k-tile before are done: its stage is free
			wg_pin<NA>(acc);
			if constexpr (CL) {
				if (i > k0 && (tid & 127) < NREL) mbar_arrive_mapped(rel + 8 * sp);
			} else if (i > k0 && (tid & 127) == 0) {
				release(empty + 8 * sp);
			}
			sp = s;
			if ((s += KS) >= STAGES) s -= STAGES, ph ^= 1;
		}
		wg_wait<0>();
		wg_pin<NA>(acc);
		// KP: the second consumer's sums into the first's, through the
		// stages (every MMA of both done reading them: named barrier 2,
		// the consumers' 256 threads), a thread's own accumulators 128
		// floats apart; from here the first consumer holds the tile.
		const bool idle = KP && cw == 1;
		if constexpr (KP) {
			asm volatile("bar.sync 2, 256;" ::: "memory");
			if (idle) {
#pragma unroll
				for (int j = 0; j < NA; j++) stages[j * 128 + (tid & 127)] = acc[j];
			}
			asm volatile("bar.sync 2, 256;" ::: "memory");
			if (!idle) {
#pragma unroll
				for (int j = 0; j < NA; j++) acc[j] += stages[j * 128 + (tid & 127)];
			}
		}
		// The tile's last stage, free for the next tile's loads, which then
		// run under this tile's stores.
		if (PERSIST && (tid & 127) == 0) release(empty + 8 * sp);
		if constexpr (TR) {
			if (tid == 128) tma_mark(tr, TMA_T_MMA);
		}

		if constexpr (EP) {
			// Pass p stages the tile's rows p * XH.. of X: row x of the
			// staged rows is output row m0 + p * XH + x, its BN columns W's
			// rows n0..; every consumer's reads of the pass before done
			// before any writes this one.
			constexpr int LDH = BN + 8; // 16-bit values: rows 272 bytes apart at BN = 128, 8 rows of 16 bytes on distinct banks
			constexpr int XH = XR / EPP, JB = XH / 8; // a pass's rows and 8-row blocks
			const int g = lane >> 3, i = lane & 7, w0 = row0 + warp * 16;
			// word is block j's (rows h * 8.., columns x, x + 1) pair, scaled
			// for codes as tma_store4 scales, rounded.
			auto word = [&](int j, int h) {
				float v0 = acc[4 * j + 2 * h], v1 = acc[4 * j + 2 * h + 1];
				if constexpr (F8) {
					const int x = m0 + j * 8 + (lane & 3) * 2;
					const float s = sw[swRows ? min(n0 + rl + h * 8, N - 1) : 0];
					v0 *= sx[sxRows ? min(x, M - 1) : 0] * s;
					v1 *= sx[sxRows ? min(x + 1, M - 1) : 0] * s;
				}
				return pack2(v0, v1, T{});
			};
			// The rows inside Y in 16-byte pieces, BN / 8 a row.
			constexpr int PR = BN / 8;
			const bool vec = (N & 7) == 0 && ((unsigned long long)Y & 15) == 0;
#pragma unroll
			for (int p = 0; p < EPP; p++) {
				bar_sync_consumers<C * 128>();
#pragma unroll
				for (int b = 0; b + 1 < JB; b += 2) {
					const int j = p * JB + b;
					const u32 r[4] = {word(j, 0), word(j, 1), word(j + 1, 0), word(j + 1, 1)};
					stmatrix_x4_trans(stg + (u32)(((b + (g >> 1)) * 8 + i) * LDH + w0 + (g & 1) * 8) * 2, r);
				}
				if constexpr (JB % 2 == 1) { // an odd last block (XR = 72): its two halves
					constexpr int b = JB - 1;
					const int j = p * JB + b;
					const u32 r[2] = {word(j, 0), word(j, 1)};
					stmatrix_x2_trans(stg + (u32)((b * 8 + i) * LDH + w0 + (g & 1) * 8) * 2, r);
				}
				bar_sync_consumers<C * 128>();
				const int x0 = m0 + p * XH, n = min(XH, M - x0) * PR;
				for (int e = tid - 128; e < n; e += C * 128) {
					const int x = e / PR, c = n0 + (e % PR) * 8;
					if (c >= N) continue;
					// Eight 16-bit outputs, moved as four floats' bits.
					const float4 v = ld_shared4(stg + (u32)(x * LDH + c - n0) * 2);
					T *y = Y + (long long)(x0 + x) * N + c;
					if (vec && c + 8 <= N) {
						*(float4 *)y = v;
					} else {
						const u32 wv[4] = {__float_as_uint(v.x), __float_as_uint(v.y), __float_as_uint(v.z), __float_as_uint(v.w)};
#pragma unroll
						for (int q = 0; q < 8; q++)
							if (c + q < N) y[q].x = (u16)(wv[q / 2] >> (16 * (q % 2)));
					}
				}
			}
			continue;
		}
		if (!SW && gridDim.z == 1) {
			if (idle) continue;
			if constexpr (EPI == TMA_EPI_NONE) {
				wg_store<T, BNC, F8>(acc, Y, (float *)nullptr, M, N, m0 + rl, n0 + nh, lane, sx, sxRows, sw, swRows);
			} else {
				// Column block j of the accumulators; under GLU block j's gate
				// sums pair with block j + BN / 16's up sums, in this thread.
				constexpr int JB = GLU ? BN / 16 : BN / 8;
				// outw is column block j's pair of outputs in row half h,
				// rounded (under RES before the residual's add).
				auto outw = [&](int j, int h) {
					const float v0 = acc[4 * j + 2 * h], v1 = acc[4 * j + 2 * h + 1];
					if constexpr (GLU) {
						return pack2(epi_swiglu<T>(v0, acc[4 * (j + JB) + 2 * h]), epi_swiglu<T>(v1, acc[4 * (j + JB) + 2 * h + 1]), T{});
					} else {
						return pack2(v0, v1, T{});
					}
				};
				if (m0 + ROWS <= M && n0 + JB * 8 <= N && (N & 7) == 0 && ((unsigned long long)Y & 15) == 0) {
					// The whole tile inside Y, its rows 16-byte aligned: a lane
					// reads and writes 8 consecutive outputs at a time
					// (quad_store, as wg_store), the residual added to them.
#pragma unroll
					for (int h = 0; h < 2; h++)
						quad_store<JB, EPI == TMA_EPI_RES>(Y + (long long)(m0 + rl + h * 8) * N + n0, lane & 3, true,
							[&](int j) { return outw(j, h); }, [](u32 o, u32 w) { return epi_addw<T>(o, w); });
				} else if (m0 + ROWS <= M && n0 + JB * 8 <= N && (N & 1) == 0) {
					// The whole tile inside Y: no test an output, one row
					// pointer a row, the residual read in pairs.
#pragma unroll
					for (int h = 0; h < 2; h++) {
						u32 *y = (u32 *)(Y + (long long)(m0 + rl + h * 8) * N + n0 + (lane & 3) * 2);
#pragma unroll
						for (int j = 0; j < JB; j++) {
							const float v0 = acc[4 * j + 2 * h], v1 = acc[4 * j + 2 * h + 1];
							if constexpr (GLU) {
								const float a = epi_swiglu<T>(v0, acc[4 * (j + JB) + 2 * h]);
								const float b = epi_swiglu<T>(v1, acc[4 * (j + JB) + 2 * h + 1]);
								y[j * 4] = (u32)from_f32<T>(a).x | ((u32)from_f32<T>(b).x << 16);
							} else {
								y[j * 4] = epi_res2<T>(y[j * 4], v0, v1);
							}
						}
					}
				} else {
#pragma unroll
					for (int j = 0; j < JB; j++)
#pragma unroll
						for (int h = 0; h < 2; h++) {
							const int c = n0 + j * 8 + (lane & 3) * 2;
							const float v0 = acc[4 * j + 2 * h], v1 = acc[4 * j + 2 * h + 1];
							float u0 = 0.f, u1 = 0.f;
							if constexpr (GLU) u0 = acc[4 * (j + JB) + 2 * h], u1 = acc[4 * (j + JB) + 2 * h + 1];
							epi_store2<T, EPI>(Y, M, N, m0 + rl + h * 8, c, v0, v1, u0, u1);
						}
				}
			}
			if constexpr (TR) {
				if (tid == 128) tma_mark(tr, TMA_T_END);
			}
			continue;
		}

		// Split (or a swapped tile): every block's partial tile into its
		// shared memory (rows LD floats apart, 16-byte aligned for the
		// reads), once both consumers are done reading the stages; then the
		// consumers add up their rows of the cluster's tiles.
		constexpr int LD = BN + 8; // = 8 (mod 32): a half-warp's float2 stores hit 32 distinct banks
		static_assert(ROWS * LD * 4 <= STAGES * STAGE, "the partial tile fits in the stages");
		bar_sync_all<NT>();
		if constexpr (SW) {
			// Transposed: accumulator (W row w, X row x) is output (x, w);
			// under KP the first consumer's sums hold both's.
			const int w = rl, x = (lane & 3) * 2;
			if (!idle) {
#pragma unroll
				for (int j = 0; j < XR / 8; j++)
#pragma unroll
					for (int h = 0; h < 2; h++)
#pragma unroll
						for (int e = 0; e < 2; e++) stages[(j * 8 + x + e) * LD + w + h * 8] = acc[4 * j + 2 * h + e];
			}
		} else if (!idle) {
#pragma unroll
			for (int j = 0; j < BNC / 8; j++)
#pragma unroll
				for (int h = 0; h < 2; h++)
					*(float2 *)&stages[(rl + h * 8) * LD + j * 8 + (lane & 3) * 2] = make_float2(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
		}
		if constexpr (TR) {
			if (tid == 128) tma_mark(tr, TMA_T_STAGED);
		}
		// Unsplit (a swapped tile) the block's own tile only; a multicast
		// pair's cluster rank is no split's.
		const int S = gridDim.z, rank = S > 1 ? cluster_rank() : 0;
		if (S > 1) {
			cluster_sync();
		} else {
			bar_sync_all<NT>();
		}
		if constexpr (TR) {
			if (tid == 128) tma_mark(tr, TMA_T_SYNCED);
		}
		// Outputs of the tile a row, in float4s: under GLU the gate half, each
		// read with its up float4 BN / 2 columns on.
		constexpr int W4 = (GLU ? BN / 2 : BN) / 4;
		const int per = (ROWS + S - 1) / S, r0 = rank * per, n4 = max(0, min(ROWS, r0 + per) - r0) * W4;
		// The residual splits the decode's shapes take (o and down at M = 256:
		// 3) get a reduction that knows S, all of a thread's reads in flight at
		// once; others the general one.
		const auto args = tma_red_args<T>{Y, M, N, m0, n0, base, rank, r0, n4, sx, sxRows, sw, swRows};
		if (SW && S == 1) {
			if constexpr (SW) tma_reduce<T, F8, EPI, ROWS, BN, NT, 1>(args); // all of a thread's reads in flight
		} else if constexpr (EPI != TMA_EPI_RES) {
			tma_reduce<T, F8, EPI, ROWS, BN, NT, 0>(args);
		} else {
			switch (S) {
			case 2: tma_reduce<T, F8, EPI, ROWS, BN, NT, 2>(args); break;
			case 3: tma_reduce<T, F8, EPI, ROWS, BN, NT, 3>(args); break;
			default: tma_reduce<T, F8, EPI, ROWS, BN, NT, 0>(args);
			}
		}
		if constexpr (TR) {
			if (tid == 128) tma_mark(tr, TMA_T_REDUCED);
		}
		if (S > 1) cluster_sync(); // no block leaves while another reads its tile
		if constexpr (TR) {
			if (tid == 128) tma_mark(tr, TMA_T_END);
		}
	} // the tiles
	// Under multicast no block leaves while another may still arrive on
	// its barriers.
	if (CL || mc) cluster_sync();
#else
	// Launched where it has no body (not sm_90a): fail loudly, never leave
	// Y unwritten.
	asm volatile("trap;");
#endif
}

// TMA_K16 and TMA_KF8 define kernel name over 16-bit values or E4M3 codes
// (their scales after Y), NT threads, MINB blocks a multiprocessor, on
// gemm_tma<T, E, ...> with the template arguments that follow.
#define TMA_K16(name, T, NT, MINB, ...)                                                                                \
	extern "C" __global__ void __launch_bounds__(NT, MINB) name(const __grid_constant__ tmap tx,                        \
		const __grid_constant__ tmap tw, T *Y, int M, int N, int K, int kps, int early) {                              \
		gemm_tma<T, T, __VA_ARGS__>(tx, tw, Y, nullptr, 0, nullptr, 0, M, N, K, kps, early);                           \
	}
#define TMA_KF8(name, T, NT, MINB, ...)                                                                                \
	extern "C" __global__ void __launch_bounds__(NT, MINB) name(const __grid_constant__ tmap tx,                        \
		const __grid_constant__ tmap tw, T *Y, const float *sx, int sxRows, const float *sw, int swRows, int M, int N, \
		int K, int kps, int early) {                                                                                   \
		gemm_tma<T, u8, __VA_ARGS__>(tx, tw, Y, sx, sxRows, sw, swRows, M, N, K, kps, early);                          \
	}
// GEMM_TMA_X: a swapped tile's every kernel (plain, E4M3, both
// epilogues), C consumers of 64 rows of W, XR rows of X, ST stages
// (gemm_tma_swap.cu's and gemm_tma_swap2.cu's configurations).
#define GEMM_TMA_X(cfg, T, C, XR, ST)                                                                                  \
	TMA_K16(gemm_tma_##cfg##_##T, T, (C + 1) * 128, 1, C, 64 * C, ST, TMA_EPI_NONE, false, false, XR)                  \
	TMA_KF8(gemm_tma_f8_##cfg##_##T, T, (C + 1) * 128, 1, C, 64 * C, ST, TMA_EPI_NONE, false, false, XR)               \
	TMA_K16(gemm_tma_glu_##cfg##_##T, T, (C + 1) * 128, 1, C, 64 * C, ST, TMA_EPI_GLU, false, false, XR)               \
	TMA_K16(gemm_tma_res_##cfg##_##T, T, (C + 1) * 128, 1, C, 64 * C, ST, TMA_EPI_RES, false, false, XR)
