//go:build cgo && linux

package cuda

import (
	"encoding/binary"
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
					// The host's copy: the first rows but one, written by
					// the kernel (ArgmaxTo), the rest left as they were.
					hostRows := max(1, c.rows-1)
					host, err := g.AllocHost(c.rows * 4)
					if err != nil {
						t.Fatal(err)
					}
					defer g.FreeHost(host)
					hb := host.Bytes()
					for i := range hb {
						hb[i] = 0xEE
					}
					lb := devUpload(t, g, dt, logits)
					if g.MapsHost() {
						err = g.ArgmaxTo(g.Stream, dt, idBuf, host, hostRows, lb, c.rows, c.vocab)
					} else {
						err = g.Argmax(g.Stream, dt, idBuf, lb, c.rows, c.vocab)
					}
					if err != nil {
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
					if !g.MapsHost() {
						return
					}
					got := make([]int32, c.rows)
					if _, err := binary.Decode(hb, binary.LittleEndian, got); err != nil {
						t.Fatal(err)
					}
					for i := range got {
						w := want[i]
						if i >= hostRows {
							w = -286331154 // 0xEEEEEEEE: not written
						}
						if got[i] != w {
							t.Errorf("row %d: host copy %d, want %d", i, got[i], w)
						}
					}
				})
			})
		}
	}
}
