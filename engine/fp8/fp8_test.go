package fp8

import (
	"math"
	"sort"
	"testing"
)

// finite are the non-negative finite E4M3 values in code order (codes
// 0x00..0x7e), which is also increasing order.
var finite = func() []float64 {
	var v []float64
	for c := range 0x7f {
		v = append(v, float64(Decode(uint8(c))))
	}
	return v
}()

// refEncode is the definition, by search: the nearest finite value, the
// even code on a tie, ±448 beyond the range, NaN kept.
func refEncode(f float32) uint8 {
	x := float64(f)
	var sign uint8
	if math.Signbit(x) {
		sign, x = 0x80, -x
	}
	switch {
	case math.IsNaN(x):
		return sign | NaN
	case x >= Max:
		return sign | 0x7e
	}
	i := sort.SearchFloat64s(finite, x) // finite[i-1] < x <= finite[i]
	if finite[i] == x || i == 0 {
		return sign | uint8(i)
	}
	lo, hi := x-finite[i-1], finite[i]-x
	switch {
	case lo < hi:
		return sign | uint8(i-1)
	case hi < lo:
		return sign | uint8(i)
	case i%2 == 0:
		return sign | uint8(i)
	}
	return sign | uint8(i-1)
}

// TestDecodeAllCodes checks every one of the 256 codes against the
// format's definition and that encoding its value gives it back.
func TestDecodeAllCodes(t *testing.T) {
	for c := range 256 {
		code := uint8(c)
		v := Decode(code)
		e, m := int(code>>3)&0xf, float64(code&7)
		var want float64
		switch {
		case e == 0xf && m == 7:
			if !math.IsNaN(float64(v)) || math.Signbit(float64(v)) != (code&0x80 != 0) {
				t.Errorf("code %#02x: %v, want NaN of its sign", code, v)
			}
			if got := Encode(v); got != code {
				t.Errorf("code %#02x: NaN encodes to %#02x", code, got)
			}
			continue
		case e == 0:
			want = m / 8 * math.Exp2(-6)
		default:
			want = (1 + m/8) * math.Exp2(float64(e-7))
		}
		if code&0x80 != 0 {
			want = -want
		}
		if float64(v) != want || math.Signbit(float64(v)) != (code&0x80 != 0) {
			t.Errorf("code %#02x: %v, want %v", code, v, want)
		}
		if got := Encode(v); got != code {
			t.Errorf("code %#02x (%v) encodes to %#02x", code, v, got)
		}
	}
	if Decode(0x7e) != 448 || Decode(0xfe) != -448 || Decode(0x01) != float32(math.Exp2(-9)) || Decode(0x08) != float32(math.Exp2(-6)) {
		t.Error("the range's ends are not ±448, 2^-9 and 2^-6")
	}
}

// TestEncodeBoundaries checks values at and around every rounding
// boundary: each midpoint between neighbours (a tie: the even code wins),
// one float32 step either side of it (the nearer code wins), and the
// saturation and special values.
func TestEncodeBoundaries(t *testing.T) {
	check := func(f float32, want uint8) {
		t.Helper()
		if got := Encode(f); got != want {
			t.Errorf("Encode(%g = %#08x) = %#02x, want %#02x", f, math.Float32bits(f), got, want)
		}
	}
	for i := 1; i < len(finite); i++ {
		mid := float32((finite[i-1] + finite[i]) / 2) // exact: few mantissa bits
		even := uint8(i)
		if i%2 == 1 {
			even = uint8(i - 1)
		}
		for _, s := range []float32{1, -1} {
			sb := uint8(0)
			if s < 0 {
				sb = 0x80
			}
			check(s*mid, sb|even)
			check(s*math.Nextafter32(mid, 0), sb|uint8(i-1))
			check(s*math.Nextafter32(mid, 1000), sb|uint8(i))
		}
	}
	inf := float32(math.Inf(1))
	for _, c := range []struct {
		f    float32
		want uint8
	}{
		{0, 0x00}, {float32(math.Copysign(0, -1)), 0x80},
		{448, 0x7e}, {449, 0x7e}, {463.99, 0x7e}, {464, 0x7e}, {480, 0x7e}, {1e30, 0x7e}, {inf, 0x7e},
		{-449, 0xfe}, {-inf, 0xfe},
		{float32(math.Exp2(-10)), 0x00},       // half the smallest subnormal: tie, to 0 (even)
		{float32(1.5 * math.Exp2(-10)), 0x01}, // nearer 2^-9
		{float32(3 * math.Exp2(-10)), 0x02},   // tie between 1 and 2 subnormal steps: even
		{float32(math.Exp2(-30)), 0x00},       // far below: zero, sign kept
		{-float32(math.Exp2(-30)), 0x80},
		{math.Float32frombits(1), 0x00}, // the smallest float32 subnormal
		{1, 0x38}, {-2, 0xc0}, {0.015625, 0x08},
		{float32(math.NaN()), 0x7f}, {float32(math.Copysign(math.NaN(), -1)), 0xff},
	} {
		check(c.f, c.want)
	}
}

// TestEncodeMatchesReference sweeps float32 bit patterns (every 251st,
// both signs, from zero through infinity) against the search definition.
func TestEncodeMatchesReference(t *testing.T) {
	bad := 0
	for b := uint32(0); b <= 0x7f800000; b += 251 {
		for _, s := range []uint32{0, 1 << 31} {
			f := math.Float32frombits(b | s)
			if got, want := Encode(f), refEncode(f); got != want && bad < 10 {
				bad++
				t.Errorf("Encode(%g = %#08x) = %#02x, reference %#02x", f, b|s, got, want)
			}
		}
	}
}

func TestScaleAndQuantize(t *testing.T) {
	x := []float32{-3, 0.5, 1.75, 0, 2.9}
	if m := AbsMax(x); m != 3 {
		t.Fatalf("AbsMax = %v", m)
	}
	s := Scale(AbsMax(x))
	if s != 3.0/448 {
		t.Fatalf("Scale = %v", s)
	}
	q := make([]uint8, len(x))
	Quantize(q, x, s)
	if q[0] != 0xfe { // -3 maps to -448 exactly
		t.Errorf("the largest magnitude quantizes to %#02x, want 0xfe", q[0])
	}
	back := make([]float32, len(x))
	Dequantize(back, q, s)
	for i, v := range x {
		// E4M3 keeps 3 mantissa bits: within 1/16 relative of normal values.
		if d := math.Abs(float64(back[i] - v)); d > math.Abs(float64(v))/16+1e-9 {
			t.Errorf("%v comes back as %v", v, back[i])
		}
	}
	rt := append([]float32(nil), x...)
	RoundTrip(rt, s)
	for i := range x {
		if rt[i]*s != back[i] && math.Abs(float64(rt[i]*s-back[i])) > 1e-6 {
			t.Errorf("RoundTrip %v, Dequantize %v", rt[i]*s, back[i])
		}
		if Encode(rt[i]) != q[i] {
			t.Errorf("RoundTrip leaves %v, not the value of code %#02x", rt[i], q[i])
		}
	}
	for _, amax := range []float32{0, float32(math.Inf(1)), float32(math.NaN()), -1} {
		if Scale(amax) != 1 {
			t.Errorf("Scale(%v) = %v, want 1", amax, Scale(amax))
		}
	}
}

func BenchmarkEncode(b *testing.B) {
	x := make([]float32, 4096)
	for i := range x {
		x[i] = float32(i-2048) * 0.37
	}
	q := make([]uint8, len(x))
	b.SetBytes(int64(len(x)) * 4)
	for b.Loop() {
		Quantize(q, x, 1)
	}
}
