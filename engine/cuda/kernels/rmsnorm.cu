// RMSNorm, optionally fused with the residual add that precedes it:
//   ADD:  residual += x; out = residual / rms(residual) * w
//   else: out = x / rms(x) * w
// One block per row; each thread keeps its up to MAXV 16-byte chunks in
// registers between the sum of squares and the scaling, so the row is read
// from memory once.
#include "common.cuh"

#define MAXV 4

template <class T, bool ADD>
__device__ __forceinline__ void rmsnorm(pack8 *out, pack8 *residual, const pack8 *x, const pack8 *w,
	int hidden, float eps) {
	pdl_enter();
	int n8 = hidden / 8;
	long long row = blockIdx.x;
	const pack8 *xr = x + row * n8;
	pack8 *rr = ADD ? residual + row * n8 : nullptr;
	pack8 *orow = out + row * n8;
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
			orow[i] = o;
		}
	}
}

extern "C" __global__ void rmsnorm_f16(pack8 *out, const pack8 *x, const pack8 *w, int hidden, float eps) {
	rmsnorm<f16, false>(out, nullptr, x, w, hidden, eps);
}
extern "C" __global__ void rmsnorm_bf16(pack8 *out, const pack8 *x, const pack8 *w, int hidden, float eps) {
	rmsnorm<bf16, false>(out, nullptr, x, w, hidden, eps);
}
extern "C" __global__ void add_rmsnorm_f16(pack8 *out, pack8 *residual, const pack8 *x, const pack8 *w, int hidden, float eps) {
	rmsnorm<f16, true>(out, residual, x, w, hidden, eps);
}
extern "C" __global__ void add_rmsnorm_bf16(pack8 *out, pack8 *residual, const pack8 *x, const pack8 *w, int hidden, float eps) {
	rmsnorm<bf16, true>(out, residual, x, w, hidden, eps);
}
