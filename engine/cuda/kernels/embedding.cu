// Embedding gather: out[t, :] = table[ids[t], :]. A pure copy, 16 bytes per
// thread per step, so one kernel serves both 16-bit types.
#include "common.cuh"

// A negative id -1 - j is fed: the id is fed[j], the previous iteration's
// j-th greedy pick, which the host has not read back yet (the engine
// queues the next iteration before it does; nfed picks exist). An id
// outside the table writes NaN (nan = the dtype's NaN bits): ids are
// validated on the host, and a bad one must not pass silently.
extern "C" __global__ void embedding(pack8 *out, const pack8 *table, const int *ids,
	int hidden8, int vocab, u32 nan, const int *fed, int nfed) {
	pdl_enter();
	int t = blockIdx.x;
	int id = ids[t];
	if (id < 0 && -1 - id < nfed) id = fed[-1 - id];
	pack8 *dst = out + (long long)t * hidden8;
	if (id < 0 || id >= vocab) {
		pack8 p;
		p.w[0] = p.w[1] = p.w[2] = p.w[3] = nan | (nan << 16);
		for (int i = threadIdx.x; i < hidden8; i += blockDim.x) dst[i] = p;
		return;
	}
	const pack8 *src = table + (long long)id * hidden8;
	for (int i = threadIdx.x; i < hidden8; i += blockDim.x) dst[i] = src[i];
}
