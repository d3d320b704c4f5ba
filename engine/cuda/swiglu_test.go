//go:build cgo && linux

package cuda

import (
	"fmt"
	"math"
	"testing"
)

// refSwiGLU is the float32 reference of kernels/swiglu.cu over rows of
// gate and up ld elements apart.
func refSwiGLU(gate, up []float32, rows, ffn, ld int) []float32 {
	out := make([]float32, rows*ffn)
	for r := range rows {
		for i := range ffn {
			g, u := float64(gate[r*ld+i]), float64(up[r*ld+i])
			out[r*ffn+i] = float32(g / (1 + math.Exp(-g)) * u)
		}
	}
	return out
}

func TestSwiGLU(t *testing.T) {
	for _, dt := range dtypes {
		for _, c := range []struct {
			rows, ffn int
			fused     bool
		}{{1, 5632, false}, {64, 5632, true}, {3, 160, true}, {257, 704, false}} {
			t.Run(fmt.Sprintf("%s/R%d_F%d_fused=%v", dt, c.rows, c.ffn, c.fused), func(t *testing.T) {
				do(t, func(t testing.TB, g *GPU) {
					r := newRand(t)
					n := c.rows * c.ffn
					var gate, up Buffer
					var gv, uv []float32
					ld := c.ffn
					if c.fused { // [rows, 2F]: gate half, then up half
						ld = 2 * c.ffn
						gv = randVals(r, dt, c.rows*ld, 4)
						uv = gv[c.ffn:]
						gate = devUpload(t, g, dt, gv)
						up = gate.Slice(c.ffn*dt.Size(), gate.Bytes-c.ffn*dt.Size())
					} else {
						gv, uv = randVals(r, dt, n, 4), randVals(r, dt, n, 4)
						gate, up = devUpload(t, g, dt, gv), devUpload(t, g, dt, uv)
					}
					out := devPoisoned(t, g, dt, n)
					if err := g.SwiGLU(g.Stream, dt, out, gate, up, c.rows, c.ffn, ld); err != nil {
						t.Fatal(err)
					}
					checkRel(t, "swiglu", download(t, g, dt, out, n), refSwiGLU(gv, uv, c.rows, c.ffn, ld))
				})
			})
		}
	}
}
