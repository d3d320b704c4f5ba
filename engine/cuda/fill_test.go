//go:build cgo && linux

package cuda

import (
	"fmt"
	"testing"

	"github.com/xrun-dev/xrun/engine/model"
)

// TestRandomFill: the device's random weights must equal the CPU's bit for
// bit after rounding, or the two backends would run different models.
func TestRandomFill(t *testing.T) {
	for _, dt := range dtypes {
		t.Run(fmt.Sprint(dt), func(t *testing.T) {
			do(t, func(t testing.TB, g *GPU) {
				r := newRand(t)
				const n = 1<<20 + 7
				seed, offset, scale := r.Uint64(), int64(r.IntN(1<<30)), float32(0.02)
				buf := devPoisoned(t, g, dt, n)
				if err := g.RandomFill(g.Stream, dt, buf, seed, offset, scale); err != nil {
					t.Fatal(err)
				}
				want := make([]float32, n)
				model.RandomFill(want, seed, offset, scale)
				got := make([]uint16, n)
				if err := DownloadSlice(g.Stream, got, buf); err != nil {
					t.Fatal(err)
				}
				for i, w := range dt.Encode(want) {
					if got[i] != w {
						t.Fatalf("element %d: %#04x, want %#04x (%g)", i, got[i], w, want[i])
					}
				}
			})
		})
	}
}
