package model

import (
	"slices"
	"testing"
)

// TestCutSlices: a cut takes the same elements from a checkpoint tensor
// of any dtype (the bytes of each element kept) and from a random weight
// (the full weight's values at the slice's coordinates).
func TestCutSlices(t *testing.T) {
	full := []int{3, 4, 5} // [experts, rows, cols]
	c := &cut{stack: &span{1, 2}, rows: []span{{0, 1}, {2, 2}}, cols: &span{1, 3}}
	if got := c.shape(full); !slices.Equal(got, []int{2, 3, 3}) {
		t.Fatalf("shape %v", got)
	}
	var want []int // flat indices of the full tensor, in slice order
	for e := 1; e < 3; e++ {
		for _, r := range []int{0, 2, 3} {
			for col := 1; col < 4; col++ {
				want = append(want, (e*4+r)*5+col)
			}
		}
	}
	for _, es := range []int{4, 2, 1} {
		dt := map[int]string{4: "F32", 2: "BF16", 1: "F8_E4M3"}[es]
		h := HostTensor{Shape: full, DType: dt, Data: make([]byte, 60*es)}
		for i := range 60 {
			for b := range es {
				h.Data[i*es+b] = byte(i*es + b)
			}
		}
		got := c.apply(h)
		if !slices.Equal(got.Shape, []int{2, 3, 3}) || got.DType != dt || len(got.Data) != len(want)*es {
			t.Fatalf("%s: shape %v dtype %s, %d bytes", dt, got.Shape, got.DType, len(got.Data))
		}
		for j, i := range want {
			if g, w := got.Data[j*es:(j+1)*es], h.Data[i*es:(i+1)*es]; !slices.Equal(g, w) {
				t.Fatalf("%s: element %d is %v, want full element %d's %v", dt, j, g, i, w)
			}
		}
	}
	vals := make([]float32, 60)
	RandomFill(vals, 42, 0, 0.5)
	got, err := c.random(full, 42, 0.5).Float32()
	if err != nil {
		t.Fatal(err)
	}
	for j, i := range want {
		if got[j] != vals[i] {
			t.Fatalf("random: element %d is %v, want full element %d's %v", j, got[j], i, vals[i])
		}
	}
}
