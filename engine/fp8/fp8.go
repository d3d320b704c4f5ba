package fp8

import "math"

// Max is the largest finite E4M3 magnitude: S.1111.110 = 1.75 × 2^8.
const Max = 448

// NaN is the canonical E4M3 NaN code (S.1111.111 with the sign clear).
const NaN = 0x7f

// decode is every code's value, built once.
var decode = func() (t [256]float32) {
	for c := range 256 {
		t[c] = decodeSlow(uint8(c))
	}
	return
}()

func decodeSlow(c uint8) float32 {
	sign := float32(1)
	if c&0x80 != 0 {
		sign = -1
	}
	e, m := int(c>>3)&0xf, float64(c&7)
	switch {
	case e == 0xf && m == 7:
		return float32(math.Copysign(math.NaN(), float64(sign)))
	case e == 0: // subnormal: 0.mmm × 2^-6
		return sign * float32(m/8*math.Exp2(-6))
	}
	return sign * float32((1+m/8)*math.Exp2(float64(e-7)))
}

// Decode is the value of an E4M3 code.
func Decode(c uint8) float32 { return decode[c] }

// Encode rounds f to the nearest E4M3 value, ties to even, saturating
// magnitudes above Max (infinities too) to ±Max; NaN becomes NaN with f's
// sign.
func Encode(f float32) uint8 {
	bits := math.Float32bits(f)
	sign := uint8(bits>>24) & 0x80
	abs := bits &^ (1 << 31)
	switch {
	case abs > 0x7f800000: // NaN
		return sign | NaN
	case abs >= math.Float32bits(Max): // 448 or more, infinity included
		return sign | 0x7e
	}
	exp := int(abs>>23) - 127
	if exp < -6 {
		// Subnormal range: multiples of 2^-9. x·512 is exact (a power of
		// two), and so is rounding it in float64. A result of 8 is the
		// smallest normal, code 0x08, as the encoding continues.
		q := math.RoundToEven(float64(math.Float32frombits(abs)) * 512)
		return sign | uint8(q)
	}
	// Normal: keep the top 3 of the 23 mantissa bits, rounding the other
	// 20 to nearest even; a carry out of the mantissa bumps the exponent.
	man := abs & 0x7fffff
	keep, rest := man>>20, man&0xfffff
	if rest > 0x80000 || rest == 0x80000 && keep&1 == 1 {
		keep++
	}
	code := uint32(exp+7)<<3 + keep // keep == 8 carries into the exponent
	if code > 0x7e {
		return sign | 0x7e
	}
	return sign | uint8(code)
}

// Scale is the quantization scale that maps a tensor whose largest
// magnitude is amax onto E4M3's range: amax/448, or 1 for an all-zero (or
// non-finite) amax, so that quantizing never divides by zero.
func Scale(amax float32) float32 {
	if !(amax > 0) || math.IsInf(float64(amax), 0) {
		return 1
	}
	return amax / Max
}

// AbsMax is the largest magnitude in x (NaNs ignored).
func AbsMax(x []float32) float32 {
	var m float32
	for _, v := range x {
		if a := float32(math.Abs(float64(v))); a > m {
			m = a
		}
	}
	return m
}

// Quantize stores dst[i] = Encode(src[i] · (1/scale)).
func Quantize(dst []uint8, src []float32, scale float32) {
	inv := 1 / scale
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = Encode(v * inv)
	}
}

// RoundTrip replaces each x[i] by Decode(Encode(x[i] · (1/scale))), the
// E4M3 value of its code without the scale: what an FP8 GEMM multiplies.
// The scale is applied to the GEMM's output instead.
func RoundTrip(x []float32, scale float32) {
	inv := 1 / scale
	for i, v := range x {
		x[i] = decode[Encode(v*inv)]
	}
}

// Dequantize stores dst[i] = Decode(src[i]) · scale.
func Dequantize(dst []float32, src []uint8, scale float32) {
	dst = dst[:len(src)]
	for i, c := range src {
		dst[i] = decode[c] * scale
	}
}
