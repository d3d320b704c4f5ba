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
		for _, c := range []struct {
			rows, vocab int
			slot        bool
		}{{1, 32000, false}, {1, 32000, true}, {64, 32000, false}, {3, 128256, true}, {256, 512, false}, {2, 201088, false}} {
			slot := c.slot
			t.Run(fmt.Sprintf("%s/R%d_V%d_slot%v", dt, c.rows, c.vocab, slot), func(t *testing.T) {
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
					// the kernel (ArgmaxTo), the rest left as they were;
					// under slot, into slot 1 of 3, which the kernel reads
					// from device memory.
					hostRows := max(1, c.rows-1)
					slots := 1
					if slot {
						slots = 3
					}
					host, err := g.AllocHost(slots * c.rows * 4)
					if err != nil {
						t.Fatal(err)
					}
					defer g.FreeHost(host)
					hb := host.Bytes()
					for i := range hb {
						hb[i] = 0xEE
					}
					dst := PickHost{Host: host, Rows: hostRows}
					if slot {
						dst.Slot, dst.Slots, dst.Stride = devUploadT(t, g, []int32{1}), slots, c.rows
					}
					lb := devUpload(t, g, dt, logits)
					if g.MapsHost() {
						err = g.ArgmaxTo(g.Stream, dt, idBuf, dst, lb, c.rows, c.vocab)
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
					got := make([]int32, slots*c.rows)
					if _, err := binary.Decode(hb, binary.LittleEndian, got); err != nil {
						t.Fatal(err)
					}
					for i := range got {
						w := int32(-286331154) // 0xEEEEEEEE: not written
						if r := i - (slots/2)*c.rows; r >= 0 && r < hostRows {
							w = want[r]
						}
						if got[i] != w {
							t.Errorf("host id %d: %d, want %d", i, got[i], w)
						}
					}
				})
			})
		}
	}
}
