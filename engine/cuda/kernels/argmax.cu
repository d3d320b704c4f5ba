// Greedy sampling: ids[r] = argmax_v logits[r, v]. One block per row. Ties
// go to the lowest index (as torch.argmax and the CPU backend do); NaN
// logits are skipped, and a row with nothing but NaN yields -1.
//
// host (may be null) is page-locked host memory the device addresses
// directly: rows below hostRows are written there too, so that the picks
// reach the host without a copy behind the kernel (a device-to-host copy
// costs a decode step at batch 1 some 6-8 us of gap and transfer on an
// H100, of a step of about 0.88 ms). With slot set, they go to row
// *slot * stride of host instead: a decode graph holds the argmax, and the
// host buffer its replay writes (one per outstanding pick ticket) is read
// from the batch layout each time rather than fixed at capture.
#include "common.cuh"

__device__ __forceinline__ void better(float &bv, int &bi, float v, int i) {
	if (v > bv || (v == bv && i < bi)) {
		bv = v;
		bi = i;
	}
}

template <class T>
__device__ __forceinline__ void argmax(int *ids, int *host, const int *slot, int stride, int hostRows,
	const T *logits, int V) {
	pdl_enter();
	if (host != nullptr && slot != nullptr) host += (long long)*slot * stride;
	const T *row = logits + (long long)blockIdx.x * V;
	float bv = -__int_as_float(0x7f800000);
	int bi = 0x7fffffff;
	if ((V & 7) == 0) { // whole 16-byte chunks: 8 logits a load, 4 loads in flight
		const pack8 *p = (const pack8 *)row;
		const int V8 = V >> 3;
#pragma unroll 4
		for (int i = threadIdx.x; i < V8; i += blockDim.x) {
			pack8 q = p[i];
#pragma unroll
			for (int e = 0; e < 8; e++) {
				float v = pack_get<T>(q, e);
				if (v == v) better(bv, bi, v, i * 8 + e);
			}
		}
	} else {
		for (int i = threadIdx.x; i < V; i += blockDim.x) {
			float v = to_f32(row[i]);
			if (v == v) better(bv, bi, v, i);
		}
	}
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) {
		float ov = __shfl_xor_sync(0xffffffffu, bv, o);
		int oi = __shfl_xor_sync(0xffffffffu, bi, o);
		better(bv, bi, ov, oi);
	}
	__shared__ float sv[32];
	__shared__ int si[32];
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	if (lane == 0) {
		sv[warp] = bv;
		si[warp] = bi;
	}
	__syncthreads();
	if (warp == 0) {
		int nw = blockDim.x >> 5;
		bv = lane < nw ? sv[lane] : -__int_as_float(0x7f800000);
		bi = lane < nw ? si[lane] : 0x7fffffff;
#pragma unroll
		for (int o = 16; o > 0; o >>= 1) {
			float ov = __shfl_xor_sync(0xffffffffu, bv, o);
			int oi = __shfl_xor_sync(0xffffffffu, bi, o);
			better(bv, bi, ov, oi);
		}
		if (lane == 0) {
			const int id = bi == 0x7fffffff ? -1 : bi;
			ids[blockIdx.x] = id;
			if (host != nullptr && (int)blockIdx.x < hostRows) {
				host[blockIdx.x] = id;
				__threadfence_system(); // out to the host before the block ends
			}
		}
	}
}

extern "C" __global__ void argmax_f16(int *ids, int *host, const int *slot, int stride, int hostRows,
	const f16 *logits, int V) {
	argmax<f16>(ids, host, slot, stride, hostRows, logits, V);
}
extern "C" __global__ void argmax_bf16(int *ids, int *host, const int *slot, int stride, int hostRows,
	const bf16 *logits, int V) {
	argmax<bf16>(ids, host, slot, stride, hostRows, logits, V);
}
