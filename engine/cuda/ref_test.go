//go:build cgo && linux

package cuda

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/xrun-dev/xrun/engine/cpu"
)

// TestRefSpread checks, without a GPU, that the GPU checks' concurrent
// references compute exactly what the serial CPU references do: the same
// sums in the same order, only spread over goroutines.
func TestRefSpread(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	vals := func(n int) []float32 { return randVals(r, F16, n, 1) }
	for _, s := range []struct{ m, n, k int }{{1, 1000, 40}, {3, 17, 9}, {65, 300, 24}, {8, 4097, 16}} {
		x, w := vals(s.m*s.k), vals(s.n*s.k)
		want := make([]float32, s.m*s.n)
		cpu.RefGEMM(want, x, w, s.m, s.n, s.k)
		if got := refGemmCols(x, rowsOf(w, s.k), s.m, s.k); !slices.Equal(got, want) {
			t.Errorf("refGemmCols %dx%dx%d differs from cpu.RefGEMM", s.m, s.n, s.k)
		}
	}
	for _, s := range []struct{ n, past, heads, kv, d int }{{1, 0, 4, 2, 8}, {50, 300, 4, 1, 16}, {45, 0, 8, 2, 8}, {7, 3, 2, 2, 4}} {
		L := s.past + s.n
		q, k, v := vals(s.n*s.heads*s.d), vals(L*s.kv*s.d), vals(L*s.kv*s.d)
		want, got := make([]float32, len(q)), make([]float32, len(q))
		cpu.RefAttention(want, q, k, v, s.n, s.past, s.heads, s.kv, s.d)
		refAttention(got, q, k, v, s.n, s.past, s.heads, s.kv, s.d)
		if !slices.Equal(got, want) {
			t.Errorf("refAttention n=%d past=%d differs from cpu.RefAttention", s.n, s.past)
		}
	}
}
