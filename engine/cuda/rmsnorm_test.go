//go:build cgo && linux

package cuda

import (
	"fmt"
	"testing"

	"github.com/xrun-dev/xrun/engine/cpu"
)

// ref is the CPU backend's reference (engine/cpu.RefRMSNorm).
func refRMSNorm(x, w []float32, rows, hidden int, eps float32) []float32 {
	out := make([]float32, rows*hidden)
	cpu.RefRMSNorm(out, x, w, rows, hidden, eps)
	return out
}

func TestRMSNorm(t *testing.T) {
	const eps = 1e-5
	for _, dt := range dtypes {
		for _, c := range []struct{ rows, hidden int }{{1, 64}, {5, 2048}, {256, 2048}, {3, 2880}, {2, 4096}, {1, 8192 * 2}} {
			t.Run(fmt.Sprintf("%s/R%d_H%d", dt, c.rows, c.hidden), func(t *testing.T) {
				do(t, func(t testing.TB, g *GPU) {
					r := newRand(t)
					n := c.rows * c.hidden
					x, w, res := randVals(r, dt, n, 2), randVals(r, dt, c.hidden, 1), randVals(r, dt, n, 2)

					out := devPoisoned(t, g, dt, n)
					if err := g.RMSNorm(g.Stream, dt, out, devUpload(t, g, dt, x), devUpload(t, g, dt, w), c.rows, c.hidden, eps); err != nil {
						t.Fatal(err)
					}
					checkRel(t, "rmsnorm", download(t, g, dt, out, n), refRMSNorm(x, w, c.rows, c.hidden, eps))

					// Fused: residual += x, then the norm of the new residual.
					sum := make([]float32, n)
					for i := range sum {
						sum[i] = dt.ToFloat32(dt.FromFloat32(res[i] + x[i]))
					}
					resBuf := devUpload(t, g, dt, res)
					out2 := devPoisoned(t, g, dt, n)
					if err := g.AddRMSNorm(g.Stream, dt, out2, resBuf, devUpload(t, g, dt, x), devUpload(t, g, dt, w), c.rows, c.hidden, eps); err != nil {
						t.Fatal(err)
					}
					checkRel(t, "add_rmsnorm residual", download(t, g, dt, resBuf, n), sum)
					checkRel(t, "add_rmsnorm out", download(t, g, dt, out2, n), refRMSNorm(sum, w, c.rows, c.hidden, eps))
				})
			})
		}
	}
}
