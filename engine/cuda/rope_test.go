//go:build cgo && linux

package cuda

import (
	"fmt"
	"math"
	"testing"
)

// refRope is the float32 reference of kernels/rope.cu: rotate-half pairs
// (i, i + D/2) of every head, angle = pos * invFreq[i] rounded to float32.
func refRope(x []float32, pos []int32, invFreq []float32, tokens, heads, D, stride int, scale float32) []float32 {
	out := append([]float32(nil), x...)
	half := D / 2
	for t := range tokens {
		for h := range heads {
			base := t*stride + h*D
			for i := range half {
				a := float64(float32(pos[t]) * invFreq[i])
				c, s := math.Cos(a)*float64(scale), math.Sin(a)*float64(scale)
				x0, x1 := float64(x[base+i]), float64(x[base+i+half])
				out[base+i] = float32(x0*c - x1*s)
				out[base+i+half] = float32(x1*c + x0*s)
			}
		}
	}
	return out
}

func TestRope(t *testing.T) {
	cases := []struct {
		name               string
		tokens, qh, kvh, D int
		theta              float64
		llama3             *Llama3Rope
		fused              bool
	}{
		{"tinyllama", 37, 32, 4, 64, 10000, nil, false},
		{"tinyllama-fused-qkv", 9, 32, 4, 64, 10000, nil, true},
		{"llama3.1-8b", 5, 32, 8, 128, 500000, &Llama3Rope{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPos: 8192}, true},
		{"llama3.2-1b", 130, 32, 8, 64, 500000, &Llama3Rope{Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPos: 8192}, false},
	}
	for _, dt := range dtypes {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/%s", dt, c.name), func(t *testing.T) {
				do(t, func(t testing.TB, g *GPU) {
					r := newRand(t)
					qw, kw := c.qh*c.D, c.kvh*c.D
					qStride, kStride := qw, kw
					if c.fused { // q, k, v side by side in one [tokens, qw+2kw] buffer
						qStride, kStride = qw+2*kw, qw+2*kw
					}
					pos := make([]int32, c.tokens)
					for i := range pos {
						pos[i] = int32(r.IntN(4096))
					}
					inv := RopeInvFreq(c.D, c.theta, c.llama3)
					var qv, kv []float32
					var q, k Buffer
					if c.fused {
						all := randVals(r, dt, c.tokens*qStride, 2)
						buf := devUpload(t, g, dt, all)
						q, k = buf, buf.Slice(qw*dt.Size(), buf.Bytes-qw*dt.Size())
						qv, kv = all, all[qw:]
					} else {
						qv, kv = randVals(r, dt, c.tokens*qw, 2), randVals(r, dt, c.tokens*kw, 2)
						q, k = devUpload(t, g, dt, qv), devUpload(t, g, dt, kv)
					}
					wantQ := refRope(qv, pos, inv, c.tokens, c.qh, c.D, qStride, 1)
					wantK := refRope(kv, pos, inv, c.tokens, c.kvh, c.D, kStride, 1)
					if err := g.Rope(g.Stream, dt, q, k, devUploadT(t, g, pos), devUploadT(t, g, inv), c.tokens, c.qh, c.kvh, c.D, qStride, kStride, 1); err != nil {
						t.Fatal(err)
					}
					gotQ := download(t, g, dt, q, len(wantQ))
					gotK := download(t, g, dt, k, len(wantK))
					checkRel(t, "q", gotQ, wantQ)
					checkRel(t, "k", gotK, wantK)
				})
			})
		}
	}
}
