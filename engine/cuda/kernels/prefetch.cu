// L2 prefetch of weights a later kernel streams. At decode on small
// batches a layer's GEMVs are bound by HBM, but between them the memory is
// mostly idle: while the QKV projection finishes, the attention runs and
// the output projection finishes, their weights are already in registers.
// Reading the leading rows of the gate_up weight into L2 meanwhile takes
// that much off the stream the gate_up GEMV waits on.
//
// A bulk prefetch is asynchronous, but the kernel that issued it does not
// complete before it lands: so the backend launches this kernel on a side
// stream, where its completion holds up no other kernel. Ranges are 16-byte
// aligned and multiples of 16 bytes; each thread issues 16 KiB at a time.
// Before sm_90 (no cp.async.bulk) the kernel does nothing.
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(128) l2_prefetch(const char *a, long long na, const char *b, long long nb) {
	pdl_enter();
#if __CUDA_ARCH__ >= 900
	const long long ca = (na + 16383) >> 14, cb = (nb + 16383) >> 14;
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < ca + cb; i += (long long)gridDim.x * blockDim.x) {
		const bool inA = i < ca;
		const long long j = inA ? i : i - ca, n = inA ? na : nb;
		const char *p = (inA ? a : b) + (j << 14);
		const unsigned size = (unsigned)min(16384LL, n - (j << 14));
		asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(size) : "memory");
	}
#endif
}
