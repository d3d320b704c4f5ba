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
__device__ __forceinline__ void mbar_expect(u32 bar, u32 bytes) {
	asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
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
#endif
