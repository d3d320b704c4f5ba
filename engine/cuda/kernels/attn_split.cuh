// Split attention (flash-decoding across blocks), shared by the CUDA-core
// kernel (attention.cu) and the tensor-core one (attention_tc.cu): both
// write the same partial results, so either's can be merged by the other's
// code. Block (item, KV head, z) of an nsplit-way launch writes, for each of
// its R query rows r, its unnormalised output O_z to part[(base_z + r) * D]
// and (m_z, l_z) to ml[(base_z + r) * 2], m in natural-log units of the
// scaled scores, base_z = ((item * KV + head) * nsplit + z) * rowsMax.
#pragma once
#include "common.cuh"

#define ATT_MAXSPLIT 8 // AttnMaxSplits

// ld_cg reads around L1: partial results other blocks wrote in this launch.
__device__ __forceinline__ float ld_cg(const float *p) {
	float v;
	asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(p));
	return v;
}

// combine_rows merges the R rows of one (item, KV head) from its nsplit
// partial results at base (in rows of rowsMax per split): O = sum_z O_z
// e^(m_z - M) / sum_z l_z e^(m_z - M), M the largest m_z. A split with no
// keys has m_z = -inf and is skipped.
template <class T>
__device__ __forceinline__ void combine_rows(T *out, const float *part, const float *ml, int t0, int R, int h,
	int H, int KV, int D, int rowsMax, int nsplit, long long base) {
	const int G = H / KV;
	const float ninf = -__int_as_float(0x7f800000);
	for (int i = threadIdx.x; i < R * D; i += blockDim.x) {
		int r = i / D, d = i - r * D;
		// Every split's three values are loaded before any is used.
		float mz[ATT_MAXSPLIT], lz[ATT_MAXSPLIT], oz[ATT_MAXSPLIT];
#pragma unroll
		for (int z = 0; z < ATT_MAXSPLIT; z++) {
			mz[z] = ninf;
			lz[z] = oz[z] = 0.f;
			if (z < nsplit) {
				long long zr = base + (long long)z * rowsMax + r;
				mz[z] = ld_cg(&ml[zr * 2]);
				lz[z] = ld_cg(&ml[zr * 2 + 1]);
				oz[z] = ld_cg(&part[zr * D + d]);
			}
		}
		float M = ninf;
#pragma unroll
		for (int z = 0; z < ATT_MAXSPLIT; z++) M = fmaxf(M, mz[z]);
		float L = 0.f, O = 0.f;
#pragma unroll
		for (int z = 0; z < ATT_MAXSPLIT; z++) {
			if (mz[z] == ninf) continue;
			float e = __expf(mz[z] - M);
			L += lz[z] * e;
			O += oz[z] * e;
		}
		int tok = r / G, j = r - tok * G;
		out[(long long)(t0 + tok) * H * D + (h * G + j) * D + d] = from_f32<T>(O / L);
	}
}

// split_last is called by every thread of a block once its partial results
// are written; it returns true in the last of the nsplit blocks of one
// (item, KV head) to get there, which then merges them all (combine_rows),
// saving a launch. Each block publishes its partials, then counts itself
// in; the last resets the counter for the next launch.
__device__ __forceinline__ bool split_last(int *cnt, int nsplit) {
	__shared__ int last;
	__threadfence();
	__syncthreads();
	if (threadIdx.x == 0) {
		last = atomicAdd(cnt, 1) == nsplit - 1;
		if (last) *cnt = 0;
	}
	__syncthreads();
	if (last) __threadfence();
	return last;
}
