// RMSNorm, optionally fused with the residual add that precedes it:
//   ADD:  residual += x; out = residual / rms(residual) * w
//   else: out = x / rms(x) * w
// One block per row (rmsnorm.cuh's arithmetic, which the FP8 norms of
// fp8_fused.cu share).
#include "common.cuh"
#include "rmsnorm.cuh"

// store_row writes a chunk of the normalised row to out.
struct store_row {
	pack8 *out;
	__device__ __forceinline__ void operator()(int i, const pack8 &o) const { out[i] = o; }
};

template <class T, bool ADD>
__device__ __forceinline__ void rmsnorm(pack8 *out, pack8 *residual, const pack8 *x, const pack8 *w,
	int hidden, float eps) {
	pdl_enter();
	const store_row st{out + blockIdx.x * (long long)(hidden / 8)};
	rmsnorm_row<T, ADD>(residual, x, w, hidden, eps, st);
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
