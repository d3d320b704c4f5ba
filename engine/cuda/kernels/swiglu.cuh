// SwiGLU's arithmetic, shared by swiglu.cu and fp8_fused.cu's fp8_swiglu
// (which quantizes the result): one body, so that both round alike.
#pragma once
#include "common.cuh"

// swiglu8 is silu(g) * u for the 8 values of a chunk, silu(g) = g / (1 +
// e^-g), in float32, rounded to T.
template <class T> __device__ __forceinline__ pack8 swiglu8(const pack8 &g, const pack8 &u) {
	pack8 o = {};
#pragma unroll
	for (int e = 0; e < 8; e++) {
		float gv = pack_get<T>(g, e);
		pack_set<T>(o, e, gv / (1.f + __expf(-gv)) * pack_get<T>(u, e));
	}
	return o;
}
