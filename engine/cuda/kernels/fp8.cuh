// E4M3 (FP8) codes, shared by the FP8 GEMMs (fp8.cu) and the FP8 KV
// cache (attention.cu's kv_write_f8, attention_tc_f8.cu): the encoder
// engine/fp8.Encode is, bit for bit, and the decoders.
#pragma once
#include "common.cuh"

typedef unsigned char u8;

#define FP8_MAX 448.f

__device__ __forceinline__ u32 f32_to_e4m3(float f) {
	u32 bits = __float_as_uint(f);
	u32 sign = (bits >> 24) & 0x80u;
	u32 a = bits & 0x7fffffffu;
	if (a > 0x7f800000u) return sign | 0x7fu; // NaN
	if (a >= 0x43e00000u) return sign | 0x7eu; // 448 or more: saturate
	int e = (int)(a >> 23) - 127;
	if (e < -6) {
		// Subnormal codes are multiples of 2^-9; x · 512 is exact.
		return sign | (u32)rintf(__uint_as_float(a) * 512.f);
	}
	u32 keep = (a & 0x7fffffu) >> 20, rest = a & 0xfffffu;
	if (rest > 0x80000u || (rest == 0x80000u && (keep & 1u))) keep++;
	u32 code = ((u32)(e + 7) << 3) + keep; // keep == 8 carries into the exponent
	return sign | min(code, 0x7eu);
}

__device__ __forceinline__ float e4m3_to_f32(u32 c) {
	u32 sign = (c & 0x80u) << 24, e = (c >> 3) & 0xfu, m = c & 7u;
	if (e == 0) return __uint_as_float(sign | __float_as_uint((float)m * 0.001953125f));
	if (e == 0xfu && m == 7u) return __uint_as_float(sign | 0x7fc00000u);
	return __uint_as_float(sign | ((e + 120u) << 23) | (m << 20));
}

// kv_elem is a KV cache element: T, or an E4M3 code (F8).
template <bool F8, class T> struct kv_elem {
	typedef T C;
};
template <class T> struct kv_elem<true, T> {
	typedef u8 C;
};

// e4m3_h16<T>::two turns the two codes in the low 16 bits of w into two
// 16-bit values of T, the first in the low half, with no rounding (every
// E4M3 value is an fp16 and a bf16 value), times e4m3_h16<T>::mul's
// reciprocal, which the caller multiplies back in float32.
//
// Ada and Hopper (sm_89 and later) convert in hardware: cvt's E4M3-to-
// fp16x2 form, exact, and for bf16 on through float32 (exact again), five
// instructions a pair where the bit arithmetic below takes about twenty
// for bf16: the FP8 KV cache's attention decodes every cached value, and
// was bound by it (mul 1). Elsewhere: fp16's are the codes' bits moved
// into place, the values times 2^-8 (subnormals too: mul 256); bf16's the
// values themselves, the exponent rebiased (7 to 127) and subnormal codes
// (m 2^-9) made in float32.
template <class T> struct e4m3_h16;
#if XR_E4M3_CVT
__device__ __forceinline__ u32 e4m3x2_f16x2(u32 w) {
	u32 r;
	asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(r) : "h"((unsigned short)(w & 0xffffu)));
	return r;
}
template <> struct e4m3_h16<f16> {
	static constexpr float mul = 1.f;
	__device__ static __forceinline__ u32 two(u32 w) { return e4m3x2_f16x2(w); }
};
template <> struct e4m3_h16<bf16> {
	static constexpr float mul = 1.f;
	__device__ static __forceinline__ u32 two(u32 w) {
		u32 r;
		asm("{\n.reg .b16 lo, hi;\n.reg .f32 flo, fhi;\n"
			"mov.b32 {lo, hi}, %1;\n"
			"cvt.f32.f16 flo, lo;\n"
			"cvt.f32.f16 fhi, hi;\n"
			"cvt.rn.bf16x2.f32 %0, fhi, flo;\n}"
			: "=r"(r)
			: "r"(e4m3x2_f16x2(w)));
		return r;
	}
};
#else
template <> struct e4m3_h16<f16> {
	static constexpr float mul = 256.f;
	__device__ static __forceinline__ u32 two(u32 w) {
		return ((w & 0x80u) << 8) | ((w & 0x7fu) << 7) | ((w & 0x8000u) << 16) | ((w & 0x7f00u) << 15);
	}
};
template <> struct e4m3_h16<bf16> {
	static constexpr float mul = 1.f;
	__device__ static __forceinline__ u32 one(u32 c) {
		// Normal codes rebias the exponent (7 to 127); subnormal ones are
		// m 2^-9, made in float32 (no float32 subnormal on the way).
		const u32 mag = (c & 0x78u) ? ((c & 0x7fu) << 20) + (120u << 23) : __float_as_uint((float)(c & 7u) * 0.001953125f);
		return (((c & 0x80u) << 24) | mag) >> 16;
	}
	__device__ static __forceinline__ u32 two(u32 w) { return one(w & 0xffu) | (one((w >> 8) & 0xffu) << 16); }
};
#endif

// e4m3x4_split encodes four floats (x[0] in the low byte) as E4M3 codes
// and the remainders as four more: hi = E4M3(x), lo = E4M3(x - hi's
// value), so hi + lo carries about 8 significant bits where a code alone
// carries 4 (round to nearest even, saturating at 448, both). Ada and
// Hopper convert in hardware, each value given to cvt's f32-to-e4m3x2 as
// both operands (so the code is either byte, whichever the pair's order)
// and decoded by its e4m3x2-to-f16x2; elsewhere f32_to_e4m3 and
// e4m3_to_f32, the same values.
__device__ __forceinline__ void e4m3x4_split(const float *x, u32 &hi, u32 &lo) {
	hi = lo = 0;
#pragma unroll
	for (int j = 0; j < 4; j++) {
#if XR_E4M3_CVT
		unsigned short h, l;
		asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %1;" : "=h"(h) : "f"(x[j]));
		const float r = x[j] - unpack2(e4m3x2_f16x2(h), f16{}).x;
		asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %1;" : "=h"(l) : "f"(r));
		hi |= (u32)(h & 0xffu) << (8 * j);
		lo |= (u32)(l & 0xffu) << (8 * j);
#else
		const u32 c = f32_to_e4m3(x[j]);
		hi |= c << (8 * j);
		lo |= f32_to_e4m3(x[j] - e4m3_to_f32(c)) << (8 * j);
#endif
	}
}

// e4m3_bits<T>::two<I, J> turns codes I and J of w (bytes, I in the low
// half) into a pair of T by moving each code's sign, exponent and mantissa
// into T's fields as they are: the value times 2^-8 for fp16 (exponent
// bias 15 against 7) or 2^-120 for bf16 (127), subnormal codes included,
// which mul undoes in float32. One prmt puts each code in a half with its
// sign replicated over the byte above it (prmt's sign mode: selector
// nibbles with bit 3 set), so one shift puts the sign at bit 15 and the
// rest in place, and one and clears what is not T's: three integer
// operations a pair, where e4m3_h16's bf16 conversion is four cvt. The
// decode attention over an FP8 cache converts every value it reads, and
// was bound by that. bf16's values are tiny: products that fall below
// float32's normal range may be flushed, terms under 2^-6 of the scales,
// far below what the codes resolve.
template <int I, int J> __device__ __forceinline__ u32 e4m3_signed_halves(u32 w) {
	u32 r;
	asm("prmt.b32 %0, %1, 0, %2;" : "=r"(r) : "r"(w), "n"(I | (I + 8) << 4 | J << 8 | (J + 8) << 12));
	return r;
}
template <class T> struct e4m3_bits;
template <> struct e4m3_bits<f16> {
	static constexpr float mul = 256.f;
	template <int I, int J> __device__ static __forceinline__ u32 two(u32 w) { return (e4m3_signed_halves<I, J>(w) << 7) & 0xbf80bf80u; }
};
template <> struct e4m3_bits<bf16> {
	static constexpr float mul = 1329227995784915872903807060280344576.f; // 2^120
	template <int I, int J> __device__ static __forceinline__ u32 two(u32 w) { return (e4m3_signed_halves<I, J>(w) << 4) & 0x87f087f0u; }
};

// e4m3x16 decodes 16 codes (one 16-byte load) into two packs of 8 values
// of T (e4m3_h16's scaling).
template <class T> __device__ __forceinline__ void e4m3x16(uint4 c, pack8 &lo, pack8 &hi) {
	lo.w[0] = e4m3_h16<T>::two(c.x);
	lo.w[1] = e4m3_h16<T>::two(c.x >> 16);
	lo.w[2] = e4m3_h16<T>::two(c.y);
	lo.w[3] = e4m3_h16<T>::two(c.y >> 16);
	hi.w[0] = e4m3_h16<T>::two(c.z);
	hi.w[1] = e4m3_h16<T>::two(c.z >> 16);
	hi.w[2] = e4m3_h16<T>::two(c.w);
	hi.w[3] = e4m3_h16<T>::two(c.w >> 16);
}

// e4m3x8 encodes 8 floats times inv (the reciprocal of the scale, rounded
// once, as engine/fp8 multiplies) into 8 codes, the first in the low byte.
// Ada and Hopper round in hardware (cvt's f32-to-e4m3x2: nearest even,
// saturating at 448, the first operand the high byte), as f32_to_e4m3
// does in about fifteen instructions a value, except that cvt makes every
// NaN 0x7f where engine/fp8 keeps its sign: put back.
#if XR_E4M3_CVT
__device__ __forceinline__ u32 e4m3x2_cvt(float lo, float hi) {
	unsigned short h;
	asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(h) : "f"(hi), "f"(lo));
	u32 r = h;
	if (lo != lo) r = (r & 0xff00u) | ((__float_as_uint(lo) >> 24) & 0x80u) | 0x7fu;
	if (hi != hi) r = (r & 0x00ffu) | ((((__float_as_uint(hi) >> 24) & 0x80u) | 0x7fu) << 8);
	return r;
}
#endif
__device__ __forceinline__ uint2 e4m3x8(const float *x, float inv) {
	u32 lo = 0, hi = 0;
#pragma unroll
	for (int j = 0; j < 4; j += 2) {
#if XR_E4M3_CVT
		lo |= e4m3x2_cvt(__fmul_rn(x[j], inv), __fmul_rn(x[j + 1], inv)) << (8 * j);
		hi |= e4m3x2_cvt(__fmul_rn(x[j + 4], inv), __fmul_rn(x[j + 5], inv)) << (8 * j);
#else
		lo |= (f32_to_e4m3(__fmul_rn(x[j], inv)) | f32_to_e4m3(__fmul_rn(x[j + 1], inv)) << 8) << (8 * j);
		hi |= (f32_to_e4m3(__fmul_rn(x[j + 4], inv)) | f32_to_e4m3(__fmul_rn(x[j + 5], inv)) << 8) << (8 * j);
#endif
	}
	return make_uint2(lo, hi);
}
