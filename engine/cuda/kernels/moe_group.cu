// MoE grouping: the routed (token, slot) pairs sorted by expert on the GPU,
// so a MoE layer needs no copy to the host and stays capturable in a graph;
// the gather of token rows into that order (for per-expert library GEMMs);
// and the weighted combine back into token order.
//
// A pair is a = t*k + j (token t's j-th expert). moe_group writes
//   hdr[0]  number of GEMM row tiles, hdr[1] rows of all segments (padding
//           included);
//   cnt[e]  pairs routed to expert e;
//   offs[e] first row of e's segment (offs[E] = hdr[1]); with pad_mode 1 a
//           segment is padded to the row count a library GEMM is run with
//           (moe_segment), so that count never reaches into the next one;
//   order[p] the pair at sorted row p, -1 for padding rows;
//   where[a] the sorted row of pair a, -1 for a pair with expert -1 (a
//           padding token: it contributes nothing), -2 for an expert id
//           outside 0..E-1 (its token's output becomes NaN, so a bad table
//           shows instead of passing silently);
//   tiles[i] (expert, first row, end row) of the i-th tile of bm rows, tiles
//           of one expert adjacent, so the grouped GEMM's neighbouring blocks
//           share weight tiles in L2.
// The order of pairs within an expert is whatever the shared-memory atomics
// give: each row of a GEMM is computed independently of where it sits, so
// results do not depend on it.
#include "common.cuh"

__device__ __forceinline__ void moe_pdl_enter() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.wait;" ::: "memory");
	asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// moe_segment is the rows a segment of c pairs takes. pad_mode 1 rounds up
// to the GEMM shapes the library path plans for: a power of two from 16 up
// to 256, then a multiple of 128 (engine/cuda/moe.go: moeSegment).
__device__ __forceinline__ int moe_segment(int c, int pad_mode) {
	if (pad_mode == 0 || c == 0) return c;
	if (c <= 256) {
		int s = 16;
		while (s < c) s <<= 1;
		return s;
	}
	return (c + 127) / 128 * 128;
}

// One block: the counts, offsets and permutation of n pairs over E experts
// (shared memory: 3 E ints).
extern "C" __global__ void moe_group(const int *idx, int n, int E, int bm, int pad_mode, int *hdr, int *cnt, int *offs,
	int *order, int *where, int4 *tiles) {
	moe_pdl_enter();
	extern __shared__ int sh[];
	int *c = sh, *fill = sh + E, *tstart = sh + 2 * E;
	const int tid = threadIdx.x, nt = blockDim.x;
	for (int e = tid; e < E; e += nt) c[e] = 0;
	__syncthreads();
	for (int i = tid; i < n; i += nt) {
		int e = idx[i];
		if (e >= 0 && e < E) atomicAdd(c + e, 1);
	}
	__syncthreads();
	if (tid == 0) {
		int off = 0, t = 0;
		for (int e = 0; e < E; e++) {
			offs[e] = off;
			fill[e] = off;
			tstart[e] = t;
			off += moe_segment(c[e], pad_mode);
			t += (c[e] + bm - 1) / bm;
		}
		offs[E] = off;
		hdr[0] = t;
		hdr[1] = off;
	}
	__syncthreads();
	for (int i = tid; i < n; i += nt) {
		int e = idx[i];
		if (e >= 0 && e < E) {
			int p = atomicAdd(fill + e, 1);
			order[p] = i;
			where[i] = p;
		} else {
			where[i] = e == -1 ? -1 : -2;
		}
	}
	// Padding rows and tiles: one thread per expert (offs was written by
	// thread 0 before the barrier above).
	for (int e = tid; e < E; e += nt) {
		cnt[e] = c[e];
		int o = offs[e], end = o + c[e], seg_end = offs[e + 1];
		for (int p = end; p < seg_end; p++) order[p] = -1;
		int t = tstart[e];
		for (int r = o; r < end; r += bm) tiles[t++] = make_int4(e, r, min(r + bm, end), 0);
	}
}

// xs[p] = x[order[p] / k] (zeros for padding rows), for the rows of all
// segments: the library path's expert inputs. H % 8 == 0.
template <class T>
__device__ __forceinline__ void moe_gather(pack8 *xs, const pack8 *x, const int *hdr, const int *order, int nmax, int k,
	int H) {
	moe_pdl_enter();
	const int h8 = H / 8;
	const int rows = min(hdr[1], nmax);
	const long long total = (long long)rows * h8;
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
		int p = (int)(i / h8), c = (int)(i - (long long)p * h8);
		int a = order[p];
		pack8 v = {};
		if (a >= 0) v = x[(long long)(a / k) * h8 + c];
		xs[i] = v;
	}
}

// The rows the combine weighs: the down GEMM's rounded rows ys[p], or the
// sums of its float32 K-split partials part[s][p] (pstride elements apart),
// so the split needs no reduction kernel of its own. get writes the 8
// values of row p, column group c.
template <class T> struct moe_rows_rounded {
	const pack8 *ys;
	__device__ __forceinline__ void get(float *y, long long p, int c, int h8) const {
		pack8 v = ys[p * h8 + c];
#pragma unroll
		for (int e = 0; e < 8; e++) y[e] = pack_get<T>(v, e);
	}
};
struct moe_rows_split {
	const float4 *part;
	int splits;
	long long ps4; // pstride / 4
	__device__ __forceinline__ void get(float *y, long long p, int c, int h8) const {
#pragma unroll
		for (int e = 0; e < 8; e++) y[e] = 0.f;
		const float4 *src = part + (p * h8 + c) * 2;
		for (int s = 0; s < splits; s++) {
			float4 a = src[s * ps4], b = src[s * ps4 + 1];
			y[0] += a.x, y[1] += a.y, y[2] += a.z, y[3] += a.w;
			y[4] += b.x, y[5] += b.y, y[6] += b.z, y[7] += b.w;
		}
	}
};

// out[t] = sum over j of wts[t][j] * ys[where[t*k + j]], summed in slot order
// in float32 and rounded once (engine/cpu's combine order). H % 8 == 0.
template <class T, class Rows>
__device__ __forceinline__ void moe_combine(pack8 *out, Rows ys, const T *wts, const int *where, int rows, int k, int H) {
	moe_pdl_enter();
	const int h8 = H / 8;
	const long long total = (long long)rows * h8;
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
		int t = (int)(i / h8), c = (int)(i - (long long)t * h8);
		float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
		for (int j = 0; j < k; j++) {
			int p = where[t * k + j];
			if (p == -1) continue;
			if (p < 0) {
#pragma unroll
				for (int e = 0; e < 8; e++) acc[e] = nan_f32();
				continue;
			}
			float w = to_f32(wts[t * k + j]), y[8];
			ys.get(y, p, c, h8);
#pragma unroll
			for (int e = 0; e < 8; e++) acc[e] += w * y[e];
		}
		pack8 o = {};
#pragma unroll
		for (int e = 0; e < 8; e++) pack_set<T>(o, e, acc[e]);
		out[i] = o;
	}
}

#define MOE_GROUP(T)                                                                                                   \
	extern "C" __global__ void moe_gather_##T(pack8 *xs, const pack8 *x, const int *hdr, const int *order, int nmax,   \
		int k, int H) {                                                                                                \
		moe_gather<T>(xs, x, hdr, order, nmax, k, H);                                                                  \
	}                                                                                                                  \
	extern "C" __global__ void moe_combine_##T(pack8 *out, const pack8 *ys, const T *wts, const int *where, int rows,  \
		int k, int H) {                                                                                                \
		moe_combine<T>(out, moe_rows_rounded<T>{ys}, wts, where, rows, k, H);                                          \
	}                                                                                                                  \
	extern "C" __global__ void moe_combine_split_##T(pack8 *out, const float4 *part, const T *wts, const int *where,    \
		int rows, int k, int H, int splits, long long pstride) {                                                       \
		moe_combine<T>(out, moe_rows_split{part, splits, pstride / 4}, wts, where, rows, k, H);                        \
	}
MOE_GROUP(f16)
MOE_GROUP(bf16)
