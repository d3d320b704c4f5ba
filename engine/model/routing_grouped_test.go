package model

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// groupShape is a grouped-routing shape: experts, groups, groups a token
// may use, experts per token.
type groupShape struct{ E, G, L, k int }

var groupShapes = []groupShape{
	{256, 8, 4, 8}, // DeepSeek-V3
	{64, 1, 1, 6},  // Moonlight-16B-A3B
	{384, 1, 1, 8}, // Kimi K2
	{8, 4, 2, 2},   // the tiny-deepseek-v3 golden
	{16, 4, 2, 4},  // tiny-deepseek
	{160, 8, 3, 6},
}

// checkRow fails unless row holds distinct experts from at most L groups.
func checkRow(t *testing.T, what string, row []int32, s groupShape) {
	t.Helper()
	groups := map[int32]bool{}
	for j, e := range row {
		if e < 0 || int(e) >= s.E || slices.Contains(row[:j], e) {
			t.Fatalf("%s %+v: experts %v", what, s, row)
		}
		groups[e/int32(s.E/s.G)] = true
	}
	if len(groups) > s.L {
		t.Fatalf("%s %+v: experts %v span %d groups, the limit is %d", what, s, row, len(groups), s.L)
	}
}

// loadRatio is the busiest expert's assignments over the mean's.
func loadRatio(ids []int32, experts int) float64 {
	load := make([]int, experts)
	for _, e := range ids {
		load[e]++
	}
	return float64(slices.Max(load)) * float64(experts) / float64(len(ids))
}

func TestPerfectGroupedExperts(t *testing.T) {
	// Worked by hand (8 experts in 4 groups of 2, 2 groups, top-2), token
	// 0: slot 0 prefers groups 0,1,2,3, slot 1 groups 1,2,3,0; the first
	// preferences cost nothing, so groups 0 and 1; in group 0 the order
	// rotated by 0 gives expert 0, in group 1 rotated by 1 expert 3.
	ids := make([]int32, 2)
	PerfectGroupedExperts(ids, 0, 8, 4, 2)
	if !slices.Equal(ids, []int32{0, 3}) {
		t.Errorf("token 0: %v, want [0 3]", ids)
	}
	for _, s := range groupShapes {
		p := groupPlanPeriod(s.E, s.G)
		var all []int32
		for tok := range 2 * p {
			row := make([]int32, s.k)
			PerfectGroupedExperts(row, tok, s.E, s.G, s.L)
			checkRow(t, "perfect", row, s)
			if tok >= p && !slices.Equal(row, all[(tok-p)*s.k:(tok-p+1)*s.k]) {
				t.Fatalf("%+v: token %d differs from token %d, a period before", s, tok, tok-p)
			}
			all = append(all, row...)
		}
		// TensorRT-LLM's planner balances the GPUs an expert-parallel
		// deployment sends tokens to; on one GPU it balances experts
		// only where one group holds them all. With DeepSeek-V3's 8
		// groups of 32 it pairs slots in groups and uses a quarter of the
		// experts: 4x the mean on the busiest.
		want := map[groupShape]float64{{256, 8, 4, 8}: 4, {8, 4, 2, 2}: 2, {16, 4, 2, 4}: 2, {160, 8, 3, 6}: 2}[s]
		if want == 0 {
			want = 1
		}
		// Over whole periods of the plan, and whole multiples of
		// experts/gcd(experts, k) tokens, the arithmetic allows a perfect
		// balance.
		q := s.E / gcd(s.E, s.k)
		n := 2 * p * q / gcd(p, q)
		var window []int32
		for tok := range n {
			row := make([]int32, s.k)
			PerfectGroupedExperts(row, tok, s.E, s.G, s.L)
			window = append(window, row...)
		}
		if got := loadRatio(window, s.E); math.Abs(got-want) > 1e-9 {
			t.Errorf("%+v over %d tokens: max/mean load %.3f, want %g", s, n, got, want)
		}
	}
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func TestForcedGroupWeights(t *testing.T) {
	c := Config{TopK: 4, RoutedScale: 2.5, Routing: RoutingSigmoidGroupTopKRenorm}
	sig := func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
	perfect := forcedGroupWeights(c, Perfect)
	sum := sig(4) + sig(3) + sig(2) + sig(1)
	for j, w := range perfect {
		if want := 2.5 * sig(float64(4-j)) / sum; math.Abs(float64(w)-want) > 1e-6 {
			t.Errorf("perfect slot %d: %g, want %g", j, w, want)
		}
	}
	for _, w := range forcedGroupWeights(c, Uniform) {
		if math.Abs(float64(w)-2.5/4) > 1e-6 {
			t.Errorf("uniform: %g, want %g", w, 2.5/4)
		}
	}
	c.Routing = RoutingSigmoidGroupTopK
	for _, w := range forcedGroupWeights(c, Zipf) {
		if math.Abs(float64(w)-2.5*sig(10)) > 1e-6 {
			t.Errorf("zipf without renormalisation: %g, want %g", w, 2.5*sig(10))
		}
	}
}

func TestRandomGroupAssignments(t *testing.T) {
	const rows = 4000
	for _, s := range groupShapes {
		busiest := map[string]float64{}
		for _, mode := range []Routing{{Mode: Uniform}, {Mode: Zipf, S: 1.2}} {
			ids := randomGroupAssignments(rand.New(rand.NewPCG(3, 4)), mode, rows, s.k, s.E, s.G, s.L)
			for r := range rows {
				checkRow(t, mode.String(), ids[r*s.k:(r+1)*s.k], s)
			}
			busiest[mode.String()] = loadRatio(ids, s.E)
		}
		// Uniform: every expert in k/E of the rows, within sampling noise
		// (the busiest of E experts sits a few standard deviations up).
		mean := float64(rows*s.k) / float64(s.E)
		if u := busiest["uniform"]; u > 1+5/math.Sqrt(mean) {
			t.Errorf("%+v uniform: busiest expert at %.3f of the mean", s, u)
		}
		if z := busiest["zipf:1.2"]; z < 2*busiest["uniform"] {
			t.Errorf("%+v zipf:1.2: busiest expert at %.3f of the mean, uniform %.3f", s, z, busiest["uniform"])
		}
	}
	// A law steep enough to exhaust the draws still yields valid rows.
	s := groupShape{256, 8, 4, 8}
	ids := randomGroupAssignments(rand.New(rand.NewPCG(1, 1)), Routing{Mode: Zipf, S: 8}, 200, s.k, s.E, s.G, s.L)
	for r := range 200 {
		checkRow(t, "zipf:8", ids[r*s.k:(r+1)*s.k], s)
	}
}
