package model

import (
	"math/rand/v2"
	"testing"
)

func TestRandomAssignments(t *testing.T) {
	const rows, k, E = 5000, 8, 32
	share := map[string]float64{}
	for _, mode := range []Routing{{Mode: Uniform}, {Mode: Zipf, S: 1.2}, {Mode: Zipf, S: 6}} {
		ids := randomAssignments(rand.New(rand.NewPCG(1, 2)), mode, rows, k, E)
		counts := make([]int, E)
		for r := range rows {
			seen := map[int32]bool{}
			for _, e := range ids[r*k : (r+1)*k] {
				if e < 0 || e >= E || seen[e] {
					t.Fatalf("%v row %d: %v", mode, r, ids[r*k:(r+1)*k])
				}
				seen[e] = true
				counts[e]++
			}
		}
		top := 0
		for _, c := range counts {
			top = max(top, c)
		}
		share[mode.String()] = float64(top) / rows // busiest expert's share of rows
	}
	// Uniform: each expert is in k/E = 25 % of rows; a steep Zipf puts the
	// hottest expert in nearly every row.
	if u := share["uniform"]; u < 0.22 || u > 0.28 {
		t.Errorf("uniform: busiest expert in %.3f of rows", u)
	}
	if !(share["zipf:1.2"] > share["uniform"] && share["zipf:6"] > 0.99) {
		t.Errorf("zipf shares %v", share)
	}
}
