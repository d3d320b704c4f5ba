// Shared-memory mbarriers (sm_90): the hand-over between a producer and
// its consumers in the warp-specialised kernels (gemm_tma.cuh,
// attention_ws.cu). Defined where XR_WGMMA is.
#pragma once
#include "common.cuh"
#include "wgmma.cuh"

#ifdef XR_WGMMA
__device__ __forceinline__ void mbar_init(u32 bar, u32 count) {
	asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(u32 bar) {
	asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
// mbar_wait returns once the phase of parity ph has completed (for a fresh
// barrier, parity 1 counts as completed: the producer's first pass).
__device__ __forceinline__ void mbar_wait(u32 bar, u32 ph) {
	asm volatile("{\n"
				 ".reg .pred done;\n"
				 "WAIT:\n"
				 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
				 "@!done bra WAIT;\n"
				 "}\n" ::"r"(bar),
		"r"(ph)
		: "memory");
}
// mapa_cluster is the shared::cluster address of shared address a in
// cluster block q; mbar_arrive_mapped arrives on the barrier at such an
// address (a caller arriving on one block's barriers many times maps
// them once).
__device__ __forceinline__ u32 mapa_cluster(u32 a, int q) {
	u32 ra;
	asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(ra) : "r"(a), "r"(q));
	return ra;
}
__device__ __forceinline__ void mbar_arrive_mapped(u32 ra) {
	asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(ra) : "memory");
}
// mbar_arrive_cluster arrives on the barrier at shared address bar of
// cluster block q. Release at the block's scope, as mbar_arrive: what it
// orders is the arriving warpgroup's reads of a stage, already complete
// (wgmma.wait_group), before the producers refill it. A first form with
// release (and the producer's wait with acquire) at the cluster's scope
// cost about 0.65 us a k-tile, on the consumers' path (BenchmarkGemm,
// H200, TinyLlama's qkv at M = 128 on 64 x 64 tiles: 28.9 us against 7.9
// without multicast; at the block's scope 8.6).
__device__ __forceinline__ void mbar_arrive_cluster(u32 bar, int q) { mbar_arrive_mapped(mapa_cluster(bar, q)); }
#endif
