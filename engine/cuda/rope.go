package cuda

import "math"

// Llama3Rope is Llama 3.1's frequency rescaling (rope_scaling type llama3).
type Llama3Rope struct {
	Factor, LowFreqFactor, HighFreqFactor float64
	OriginalMaxPos                        int
}

// RopeInvFreq returns the inverse frequencies [headDim/2] the RoPE kernel
// takes: theta^(-2i/headDim), rescaled by llama3 when given. Computed in
// float64 and rounded once, as Hugging Face computes them in float32 from
// the same formula.
func RopeInvFreq(headDim int, theta float64, llama3 *Llama3Rope) []float32 {
	half := headDim / 2
	out := make([]float32, half)
	for i := range half {
		f := 1 / math.Pow(theta, float64(2*i)/float64(headDim))
		if l := llama3; l != nil {
			lowWave := float64(l.OriginalMaxPos) / l.LowFreqFactor
			highWave := float64(l.OriginalMaxPos) / l.HighFreqFactor
			wave := 2 * math.Pi / f
			switch {
			case wave > lowWave: // long wavelengths: fully interpolated
				f /= l.Factor
			case wave >= highWave: // between: blend smoothly
				smooth := (float64(l.OriginalMaxPos)/wave - l.LowFreqFactor) / (l.HighFreqFactor - l.LowFreqFactor)
				f = (1-smooth)*f/l.Factor + smooth*f
			}
		}
		out[i] = float32(f)
	}
	return out
}
