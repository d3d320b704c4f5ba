// The collectives' companions (nccl_kernels.go): what NCCL's layouts need
// around it on a split model.
#include "common.cuh"

// gather_blocks: NCCL's all-gather leaves rank j's rows x w block at
// blk[j], rows after rows; the model wants them side by side, out[r] =
// blk[0][r] | blk[1][r] | ... One block per (row r, rank j); w is counted
// in 16-bit elements, so any width works (16-byte moves where w allows).
extern "C" __global__ void gather_blocks(u16 *out, const u16 *blk, int rows, int w, int ranks) {
	pdl_enter();
	int r = blockIdx.x, j = blockIdx.y;
	const u16 *src = blk + ((long long)j * rows + r) * w;
	u16 *dst = out + ((long long)r * ranks + j) * w;
	if ((w & 7) == 0) {
		const pack8 *s8 = (const pack8 *)src;
		pack8 *d8 = (pack8 *)dst;
		for (int i = threadIdx.x; i < (w >> 3); i += blockDim.x) d8[i] = s8[i];
		return;
	}
	for (int i = threadIdx.x; i < w; i += blockDim.x) dst[i] = src[i];
}

// moe_shard_ids: a rank's view of the router's picks under expert
// parallelism: ids first .. first+experts-1 become 0 .. experts-1, every
// other id (another rank's expert, or -1 for padding) becomes -1, which the
// MoE kernels skip. n is rows x top-k.
extern "C" __global__ void moe_shard_ids(int *out, const int *idx, int n, int first, int experts) {
	pdl_enter();
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
		int e = idx[i] - first;
		out[i] = idx[i] >= 0 && e >= 0 && e < experts ? e : -1;
	}
}
