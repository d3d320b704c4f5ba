// RMSNorm's arithmetic, shared by rmsnorm.cu and by the FP8 norms that
// quantize their output (fp8_fused.cu): one body, so that a fused kernel
// normalises bit for bit as the plain one does, the same sum of squares in
// the same order for the same block size (rmsnormBlock), the same
// rounding to T.
#pragma once
#include "common.cuh"

#define MAXV 4

// rmsnorm_row normalises row blockIdx.x (ADD: residual += x first, written
// back, and the rounded sum normalised, as the next layer will read it) and
// hands each 16-byte chunk i of the row's output, rounded to T, to
// emit(i, chunk). Each thread keeps its up to MAXV chunks in registers
// between the sum of squares and the scaling, so the row is read from
// memory once. The caller has called pdl_enter.
template <class T, bool ADD, class Emit>
__device__ __forceinline__ void rmsnorm_row(pack8 *residual, const pack8 *x, const pack8 *w, int hidden, float eps,
	const Emit &emit) {
	int n8 = hidden / 8;
	long long row = blockIdx.x;
	const pack8 *xr = x + row * n8;
	pack8 *rr = ADD ? residual + row * n8 : nullptr;
	float v[MAXV][8];
	pack8 wv[MAXV];
	float ss = 0.f;
#pragma unroll
	for (int j = 0; j < MAXV; j++) {
		int i = threadIdx.x + j * blockDim.x;
		if (i < n8) wv[j] = w[i]; // independent of the sum: loaded with the row
	}
#pragma unroll
	for (int j = 0; j < MAXV; j++) {
		int i = threadIdx.x + j * blockDim.x;
		if (i < n8) {
			pack8 p = xr[i];
			if (ADD) {
				pack8 r = rr[i];
#pragma unroll
				for (int e = 0; e < 8; e++) pack_set<T>(r, e, pack_get<T>(r, e) + pack_get<T>(p, e));
				rr[i] = r;
				p = r; // normalize the rounded sum, as the next layer will read it
			}
#pragma unroll
			for (int e = 0; e < 8; e++) {
				v[j][e] = pack_get<T>(p, e);
				ss += v[j][e] * v[j][e];
			}
		}
	}
	ss = block_sum(ss);
	float r = rsqrtf(ss / (float)hidden + eps);
#pragma unroll
	for (int j = 0; j < MAXV; j++) {
		int i = threadIdx.x + j * blockDim.x;
		if (i < n8) {
			pack8 wp = wv[j], o = {};
#pragma unroll
			for (int e = 0; e < 8; e++) pack_set<T>(o, e, v[j][e] * r * pack_get<T>(wp, e));
			emit(i, o);
		}
	}
}
