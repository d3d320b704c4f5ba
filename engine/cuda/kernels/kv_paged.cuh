// Where a K or V cache row (one position of one KV head, D elements) lives,
// for the kernels that read or write a K/V cache (attention.cu,
// attention_tc.cu). A contiguous cache is [slot][kv head][cap][D] per layer;
// a paged one is [block][kv head][bs][D], cap then being the block size bs
// (a power of two), and position p of slot s sits in block
// tables[s * stride + p / bs] (the block tables the batch layout uploads,
// one row of stride blocks per slot). The kernels take PAGED as a template
// argument: the contiguous instantiations compute exactly what they did
// before the paged ones existed.
#pragma once

// kv_row is the row index (multiply by D for the element offset).
template <bool PAGED>
__device__ __forceinline__ long long kv_row(const int *tables, int stride, int slot, int KV, int h, int cap, int p) {
	if constexpr (PAGED) {
		const int shift = __ffs(cap) - 1; // log2 of the block size
		const int blk = tables[(long long)slot * stride + (p >> shift)];
		return ((long long)blk * KV + h) * cap + (p & (cap - 1));
	} else {
		return ((long long)slot * KV + h) * cap + p;
	}
}
