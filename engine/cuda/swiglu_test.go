//go:build cgo && linux

package cuda

import (
	"fmt"
	"testing"

	"github.com/xrun-dev/xrun/engine/cpu"
)

// refSwiGLU is the CPU backend's reference (engine/cpu.RefSwiGLU, which
// reads a fused [rows, 2F] gate|up row) over rows of gate and up ld
// elements apart.
func refSwiGLU(gate, up []float32, rows, ffn, ld int) []float32 {
	fused := make([]float32, 0, rows*2*ffn)
	for r := range rows {
		fused = append(fused, gate[r*ld:r*ld+ffn]...)
		fused = append(fused, up[r*ld:r*ld+ffn]...)
	}
	out := make([]float32, rows*ffn)
	cpu.RefSwiGLU(out, fused, rows, ffn)
	return out
}

func TestSwiGLU(t *testing.T) {
	for _, dt := range dtypes {
		for _, c := range []struct {
			rows, ffn int
			fused     bool
		}{{1, 5632, false}, {64, 5632, true}, {3, 160, true}, {257, 704, false},
			// A row of 257 chunks (one past a block); more rows than a
			// grid's y reaches, so the kernel strides past it.
			{5, 2056, false}, {70001, 16, true}} {
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
