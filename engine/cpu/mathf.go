package cpu

import "math"

// expf is e^x in float32 arithmetic: Cody-Waite reduction by ln 2 and a
// degree-7 Taylor polynomial on |r| <= ln2/2 (truncation error below 6e-9,
// under float32 rounding). math.Exp in float64 costs several times more, and
// softmax and SiLU call this for every score and every activation.
func expf(x float32) float32 {
	const (
		log2e = 1.44269504088896341
		ln2hi = 0.693359375
		ln2lo = -2.12194440e-4
	)
	switch {
	case x > 88.72:
		return float32(math.Inf(1))
	case x < -87.33:
		return 0
	case x != x:
		return x
	}
	n := float32(math.Floor(float64(x*log2e + 0.5)))
	r := x - n*ln2hi - n*ln2lo
	p := 1 + r*(1+r*(1.0/2+r*(1.0/6+r*(1.0/24+r*(1.0/120+r*(1.0/720+r*(1.0/5040)))))))
	return math.Float32frombits(uint32(int32(math.Float32bits(p)) + int32(n)<<23))
}

func silu(x float32) float32 { return x / (1 + expf(-x)) }

func rsqrt(x float32) float32 { return float32(1 / math.Sqrt(float64(x))) }

// sumSquares is Σ x² with four partial sums.
func sumSquares(x []float32) float32 {
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(x); i += 4 {
		s0 += x[i] * x[i]
		s1 += x[i+1] * x[i+1]
		s2 += x[i+2] * x[i+2]
		s3 += x[i+3] * x[i+3]
	}
	for ; i < len(x); i++ {
		s0 += x[i] * x[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// axpy: y += a·x.
func axpy(a float32, x, y []float32) {
	x = x[:len(y)]
	i := 0
	for ; i+4 <= len(y); i += 4 {
		y[i] += a * x[i]
		y[i+1] += a * x[i+1]
		y[i+2] += a * x[i+2]
		y[i+3] += a * x[i+3]
	}
	for ; i < len(y); i++ {
		y[i] += a * x[i]
	}
}

// goExpSum is expSum without assembly.
func goExpSum(x []float32, scale, bias float32) float32 {
	var s float32
	for i, v := range x {
		e := expf(v*scale + bias)
		x[i] = e
		s += e
	}
	return s
}

// goSiluMul is siluMul without assembly.
func goSiluMul(out, g, u []float32) {
	for i := range out {
		out[i] = silu(g[i]) * u[i]
	}
}

// goMax is the largest value of a non-empty x; plain comparisons (the
// max builtin's NaN handling costs several times more per element).
func goMax(x []float32) float32 {
	m := x[0]
	for _, v := range x[1:] {
		if v > m {
			m = v
		}
	}
	return m
}
