package model

import "math"

// RopeInvFreq returns the rotary inverse frequencies (HeadDim/2 of them)
// and the attention factor that scales cos and sin, following transformers'
// rope initialisers: "default", "llama3" and "yarn". Like transformers it
// computes the default frequencies in float32, so positions match its
// rounding.
func RopeInvFreq(c Config) (inv []float32, attnFactor float32) {
	dim := c.HeadDim
	half := dim / 2
	inv = make([]float32, half)
	for i := range half {
		e := float32(2*i) / float32(dim)
		p := float32(math.Pow(c.RopeTheta, float64(e)))
		inv[i] = float32(1 / float64(p))
	}
	s := c.RopeScaling
	if s == nil {
		return inv, 1
	}
	switch s.Type {
	case "llama3":
		lowWave := float64(s.OriginalMaxPos) / s.LowFreqFactor
		highWave := float64(s.OriginalMaxPos) / s.HighFreqFactor
		for i, f := range inv {
			fr := float64(f)
			wave := 2 * math.Pi / fr
			switch {
			case wave < highWave: // high frequency: kept
			case wave > lowWave: // low frequency: interpolated
				fr /= s.Factor
			default: // in between: smooth blend
				smooth := (float64(s.OriginalMaxPos)/wave - s.LowFreqFactor) / (s.HighFreqFactor - s.LowFreqFactor)
				fr = (1-smooth)*fr/s.Factor + smooth*fr
			}
			inv[i] = float32(fr)
		}
		return inv, 1
	case "yarn":
		betaFast, betaSlow := s.BetaFast, s.BetaSlow
		if betaFast == 0 {
			betaFast = 32
		}
		if betaSlow == 0 {
			betaSlow = 1
		}
		corr := func(rot float64) float64 {
			return float64(dim) * math.Log(float64(s.OriginalMaxPos)/(rot*2*math.Pi)) / (2 * math.Log(c.RopeTheta))
		}
		low, high := corr(betaFast), corr(betaSlow)
		if s.Truncate == nil || *s.Truncate {
			low, high = math.Floor(low), math.Ceil(high)
		}
		low, high = math.Max(low, 0), math.Min(high, float64(dim-1))
		if low == high {
			high += 0.001
		}
		for i := range inv {
			posFreq := math.Pow(c.RopeTheta, float64(2*i)/float64(dim))
			extra, inter := 1/posFreq, 1/(s.Factor*posFreq)
			ramp := math.Min(math.Max((float64(i)-low)/(high-low), 0), 1)
			extraFactor := 1 - ramp
			inv[i] = float32(inter*(1-extraFactor) + extra*extraFactor)
		}
		af := s.AttentionFactor
		if af == 0 {
			af = yarnMscale(s.Factor, 1)
			if s.Mscale != 0 && s.MscaleAllDim != 0 {
				// DeepSeek: the part of the magnitude correction not
				// already in the softmax scale (Config.MLASoftmaxScale).
				af = yarnMscale(s.Factor, s.Mscale) / yarnMscale(s.Factor, s.MscaleAllDim)
			}
		}
		return inv, float32(af)
	}
	return inv, 1
}

// yarnMscale is yarn's magnitude correction for a context extended by
// factor: 0.1·m·ln(factor) + 1, or 1 when nothing is extended.
func yarnMscale(factor, m float64) float64 {
	if factor <= 1 {
		return 1
	}
	return 0.1*m*math.Log(factor) + 1
}

// RopeTable returns the [positions, HeadDim] table the RoPE op reads: for
// position p, cos(p·inv) in the first half and sin(p·inv) in the second,
// both times the attention factor.
func RopeTable(c Config, positions int) []float32 {
	inv, af := RopeInvFreq(c)
	half := len(inv)
	t := make([]float32, positions*2*half)
	for p := range positions {
		row := t[p*2*half : (p+1)*2*half]
		for i, f := range inv {
			a := float64(float32(p) * f) // float32 product, as transformers
			row[i] = float32(math.Cos(a)) * af
			row[half+i] = float32(math.Sin(a)) * af
		}
	}
	return t
}
