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

// TestRandomFillRows: a block of a slice of a random weight equals the
// full weight's values at its coordinates, bit for bit after rounding.
func TestRandomFillRows(t *testing.T) {
	for _, dt := range dtypes {
		t.Run(fmt.Sprint(dt), func(t *testing.T) {
			do(t, func(t testing.TB, g *GPU) {
				r := newRand(t)
				// A row-parallel weight's column slice of a [rows, stride]
				// weight, from a random place of a stack of them.
				rows, cols, stride := 300+r.IntN(200), 1+r.IntN(700), int64(1024+r.IntN(512))
				seed, src, scale := r.Uint64(), int64(r.IntN(1<<30)), float32(0.02)
				buf := devPoisoned(t, g, dt, rows*cols)
				if err := g.RandomFillRows(g.Stream, dt, buf, rows, cols, seed, src, stride, scale); err != nil {
					t.Fatal(err)
				}
				want := make([]float32, rows*cols)
				model.RandomRuns(want, []model.RandomRun{{Src: src, Rows: int64(rows), Cols: int64(cols), Stride: stride}}, seed, scale)
				got := make([]uint16, rows*cols)
				if err := DownloadSlice(g.Stream, got, buf); err != nil {
					t.Fatal(err)
				}
				for i, w := range dt.Encode(want) {
					if got[i] != w {
						t.Fatalf("element %d (row %d): %#04x, want %#04x (%g)", i, i/cols, got[i], w, want[i])
					}
				}
				if err := g.RandomFillRows(g.Stream, dt, buf, rows, cols+1, seed, src, stride, scale); err == nil {
					t.Error("a block larger than its buffer was queued")
				}
			})
		})
	}
}
