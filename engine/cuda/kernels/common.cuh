// Shared by every kernel family. NVRTC is given no CUDA headers, so the
// 16-bit types and the few PTX instructions used are spelled out here;
// nothing below depends on cuda_fp16.h or cuda_bf16.h.
#pragma once

// What the compiler can emit where that depends on its version as well as
// on the target: XR_CUDA_VER is NVRTC's (__CUDACC_VER_MAJOR__ and _MINOR__,
// 1204 for 12.4). XR_E4M3_CVT: cvt to and from E4M3 pairs (e4m3x2), on
// sm_90 from PTX ISA 7.8 (CUDA 11.8), on sm_89 from 8.1 (CUDA 12.1).
// XR_E4M3_MMA: mma.sync on E4M3 operands, sm_89 and later from PTX ISA 8.4
// (CUDA 12.4). Where they are 0 the kernels take their software forms (or
// trap: see mma_e4m3), so that every family compiles with any NVRTC 12.
#if defined(__CUDACC_VER_MAJOR__)
#define XR_CUDA_VER (__CUDACC_VER_MAJOR__ * 100 + __CUDACC_VER_MINOR__)
#else
#define XR_CUDA_VER 9999 // not said (NVRTC 11.8 says): the target alone decides
#endif
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900 || (__CUDA_ARCH__ >= 890 && XR_CUDA_VER >= 1201))
#define XR_E4M3_CVT 1
#else
#define XR_E4M3_CVT 0
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890 && XR_CUDA_VER >= 1204
#define XR_E4M3_MMA 1
#else
#define XR_E4M3_MMA 0
#endif

typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

// Storage types: the bits only. Arithmetic is done in float32.
struct f16 { u16 x; };
struct bf16 { u16 x; };

__device__ __forceinline__ float to_f32(f16 v) {
	float f;
	asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v.x));
	return f;
}
__device__ __forceinline__ float to_f32(bf16 v) { return __uint_as_float(((u32)v.x) << 16); }

template <class T> __device__ __forceinline__ T from_f32(float f);
template <> __device__ __forceinline__ f16 from_f32<f16>(float f) {
	f16 r;
	asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r.x) : "f"(f));
	return r;
}
template <> __device__ __forceinline__ bf16 from_f32<bf16>(float f) {
	bf16 r;
	asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r.x) : "f"(f));
	return r;
}

// Eight 16-bit values: the 16-byte access every memory-bound kernel uses.
struct alignas(16) pack8 { u32 w[4]; };

template <class T> __device__ __forceinline__ float pack_get(const pack8 &p, int i) {
	T v;
	v.x = (u16)(p.w[i >> 1] >> ((i & 1) * 16));
	return to_f32(v);
}
template <class T> __device__ __forceinline__ void pack_set(pack8 &p, int i, float f) {
	u32 h = from_f32<T>(f).x;
	int s = (i & 1) * 16;
	p.w[i >> 1] = (p.w[i >> 1] & ~(0xFFFFu << s)) | (h << s);
}

// ex2 is 2^x in one instruction; ex2(-inf) = 0.
__device__ __forceinline__ float ex2(float x) {
	float y;
	asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
	return y;
}

// pack2 rounds two floats to one 32-bit pair of 16-bit values, lo first.
__device__ __forceinline__ u32 pack2(float lo, float hi, f16) {
	u32 r;
	asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
	return r;
}
__device__ __forceinline__ u32 pack2(float lo, float hi, bf16) {
	u32 r;
	asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
	return r;
}

// softmax_tile advances the online softmax of a thread's two rows of
// attention scores (mma fragments: s[n][0..1] the first row's, s[n][2..3]
// the second's, over NS 8-key blocks; a row's other values in the three
// other lanes of its quad) by one key tile: m is each row's running
// maximum (log2 units), l its running sum (this thread's share); s becomes
// the exponentials, alpha the factor the rows' earlier output takes. A row
// with nothing seen yet (max -inf) subtracts 0 instead, so that every
// exponential is of -inf (0), never NaN.
template <int NS>
__device__ __forceinline__ void softmax_tile(float (&s)[NS][4], float (&m)[2], float (&l)[2], float (&alpha)[2]) {
	const float ninf = -__int_as_float(0x7f800000);
	float mx[2] = {m[0], m[1]}, mu[2];
#pragma unroll
	for (int n = 0; n < NS; n++) {
		mx[0] = fmaxf(mx[0], fmaxf(s[n][0], s[n][1]));
		mx[1] = fmaxf(mx[1], fmaxf(s[n][2], s[n][3]));
	}
#pragma unroll
	for (int i = 0; i < 2; i++) {
		mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
		mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
		mu[i] = mx[i] == ninf ? 0.f : mx[i];
		alpha[i] = ex2(m[i] - mu[i]);
		m[i] = mx[i];
	}
	float ps[2] = {0.f, 0.f};
#pragma unroll
	for (int n = 0; n < NS; n++)
#pragma unroll
		for (int e = 0; e < 4; e++) {
			s[n][e] = ex2(s[n][e] - mu[e >> 1]);
			ps[e >> 1] += s[n][e];
		}
	l[0] = l[0] * alpha[0] + ps[0];
	l[1] = l[1] * alpha[1] + ps[1];
}

// softmax_cols is softmax_tile over a transposed tile: scores S^T of MT
// m16n8 accumulators, rows keys, columns queries; a thread's columns are
// 2 (lane % 4) and the next (elements e & 1), its keys lane / 4 and + 8,
// so a column's maximum is taken across the eight lanes of its lane % 4.
// Column sums stay per thread until the end, as there.
template <int MT>
__device__ __forceinline__ void softmax_cols(float (&s)[MT][4], float (&m)[2], float (&l)[2], float (&alpha)[2]) {
	const float ninf = -__int_as_float(0x7f800000);
	float mx[2] = {m[0], m[1]}, mu[2];
#pragma unroll
	for (int t = 0; t < MT; t++) {
		mx[0] = fmaxf(mx[0], fmaxf(s[t][0], s[t][2]));
		mx[1] = fmaxf(mx[1], fmaxf(s[t][1], s[t][3]));
	}
#pragma unroll
	for (int i = 0; i < 2; i++) {
#pragma unroll
		for (int off = 4; off < 32; off <<= 1) mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], off));
		mu[i] = mx[i] == ninf ? 0.f : mx[i];
		alpha[i] = ex2(m[i] - mu[i]);
		m[i] = mx[i];
	}
	float ps[2] = {0.f, 0.f};
#pragma unroll
	for (int t = 0; t < MT; t++)
#pragma unroll
		for (int e = 0; e < 4; e++) {
			s[t][e] = ex2(s[t][e] - mu[e & 1]);
			ps[e & 1] += s[t][e];
		}
	l[0] = l[0] * alpha[0] + ps[0];
	l[1] = l[1] * alpha[1] + ps[1];
}

// unpack2 widens the two 16-bit values of one 32-bit word (low first).
__device__ __forceinline__ float2 unpack2(u32 w, f16) {
	f16 a, b;
	a.x = (u16)w;
	b.x = (u16)(w >> 16);
	return make_float2(to_f32(a), to_f32(b));
}
__device__ __forceinline__ float2 unpack2(u32 w, bf16) {
	return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

// block_sum returns the sum over the block to every thread; blockDim.x is a
// multiple of 32 and at most 1024.
__device__ __forceinline__ float block_sum(float v) {
	__shared__ float part[32];
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	v = warp_sum(v);
	__syncthreads(); // part may still be read by a previous call
	if (lane == 0) part[warp] = v;
	__syncthreads();
	int nw = blockDim.x >> 5;
	v = lane < nw ? part[lane] : 0.f;
	return warp_sum(v);
}

// smem_u32 is the 32-bit shared-window address ldmatrix and cp.async take.
__device__ __forceinline__ u32 smem_u32(const void *p) {
	u32 a;
	asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
	return a;
}

// Programmatic dependent launch (Hopper; the host launches every kernel with
// it allowed where the GPU has it). Every kernel calls pdl_enter first,
// before touching memory: it waits until the kernel before it in the stream
// has finished and its writes are visible (so reads after writes and writes
// after reads stay ordered, and since every kernel waits, so does the whole
// chain), then lets the next kernel's blocks be scheduled, where they wait
// in turn. Outside such a launch both instructions return at once.
__device__ __forceinline__ void pdl_enter() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.wait;" ::: "memory");
	asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ float nan_f32() { return __int_as_float(0x7fc00000); }

// random_value is model.RandomValue(seed, i, scale): uniform in [-scale,
// scale) from splitmix64(seed ^ splitmix64(i)), in float32 (fill.cu rounds
// it to the storage type; fp8.cu quantizes it).
__device__ __forceinline__ u64 splitmix64(u64 x) {
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}
__device__ __forceinline__ float random_value(u64 seed, long long i, float scale) {
	u64 r = splitmix64(seed ^ splitmix64((u64)i));
	float u = (float)(r >> 40) * (1.f / 16777216.f); // exact: 24 bits
	// 2u - 1 is exact too, so the product is the one rounding, as in Go.
	return __fmul_rn(2.f * u - 1.f, scale);
}

// ld_nc16 loads 16 read-only bytes through the non-coherent (texture) path.
__device__ __forceinline__ uint4 ld_nc16(const void *p) {
	uint4 r;
	asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
	return r;
}
