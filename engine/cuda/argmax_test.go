//go:build cgo && linux

package cuda

import (
	"fmt"
	"testing"

	"github.com/xrun-dev/xrun/engine/cpu"
)

func TestArgmax(t *testing.T) {
	for _, dt := range dtypes {
		for _, c := range []struct{ rows, vocab int }{{1, 32000}, {64, 32000}, {3, 128256}, {256, 512}, {2, 201088}} {
			t.Run(fmt.Sprintf("%s/R%d_V%d", dt, c.rows, c.vocab), func(t *testing.T) {
				do(t, func(t testing.TB, g *GPU) {
					r := newRand(t)
					logits := randVals(r, dt, c.rows*c.vocab, 8)
					// Plant an exact tie for the maximum in every other row:
					// the lower index must win.
					for row := 0; row < c.rows; row += 2 {
						a, b := r.IntN(c.vocab), r.IntN(c.vocab)
						logits[row*c.vocab+a], logits[row*c.vocab+b] = 9, 9
					}
					ids := make([]int32, c.rows)
					idBuf := devUploadT(t, g, ids)
					if err := g.Stream.Fill32(idBuf, 0xDEADBEEF); err != nil {
						t.Fatal(err)
					}
					if err := g.Argmax(g.Stream, dt, idBuf, devUpload(t, g, dt, logits), c.rows, c.vocab); err != nil {
						t.Fatal(err)
					}
					if err := DownloadSlice(g.Stream, ids, idBuf); err != nil {
						t.Fatal(err)
					}
					want := make([]int32, c.rows)
					cpu.RefArgmax(want, logits, c.rows, c.vocab)
					for i := range want {
						if ids[i] != want[i] {
							t.Errorf("row %d: argmax %d, want %d", i, ids[i], want[i])
						}
					}
				})
			})
		}
	}
}
