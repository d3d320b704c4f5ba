package model

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
)

// Routing modes under DeepSeek-V3's grouped routing (RoutingSigmoidGroupTopK*):
// every forced assignment respects the group limit, as the learned router
// does: a token's k experts come from at most TopKGroups of the Groups.
//
//   - perfect is TensorRT-LLM's perfect router for this method
//     (DeepSeekV3PerfectRouterPlanner in fused_moe/routing.py) on one GPU:
//     token t's groups are planned slot by slot, slot j preferring the
//     groups in the order t+j, t+j+1, ... (mod Groups), by a beam search
//     (32 wide) that keeps at most TopKGroups groups, spreads the k slots
//     evenly over them and then follows the preferences; slot j takes the
//     first expert of its group, in the group's order rotated by t+j, that
//     the token does not have yet. Its replacement logits are 4 ... 1
//     (evenly spaced over the k slots, -10 elsewhere, the correction bias
//     zeroed), so the slots' weights are the method's for those logits.
//   - uniform draws TopKGroups distinct groups uniformly, then k distinct
//     experts uniformly from their union.
//   - zipf:S gives expert e the popularity rank(e)^-S (ranks a seeded
//     permutation per layer, as without groups) and a group the sum of its
//     experts'; it draws TopKGroups distinct groups by group popularity,
//     then k distinct experts from their union by expert popularity (each
//     draw among those not yet taken).
//
// Uniform and zipf rows weight every slot alike: the method's weights for
// logits of +10 on the chosen experts.

// perfectBeamWidth is the planner's beam width (TensorRT-LLM's).
const perfectBeamWidth = 32

// PerfectGroupedExperts writes token t's len(dst) experts of experts, in
// groups equal groups of which at most topkGroups may be used, as
// TensorRT-LLM's perfect router for DeepSeek-V3 routing assigns them on one
// GPU (ep_size 1). The assignment depends on t only modulo
// lcm(groups, experts/groups).
func PerfectGroupedExperts(dst []int32, t, experts, groups, topkGroups int) {
	k := len(dst)
	epg := experts / groups
	plan := planGroups(t, k, groups, min(topkGroups, k, groups))
	for s, g := range plan {
		off := (t + s) % epg
		for i := range epg {
			e := int32(g*epg + (off+i)%epg)
			if !slices.Contains(dst[:s], e) {
				dst[s] = e
				break
			}
		}
	}
}

// groupPlanPeriod is the period, in tokens, of PerfectGroupedExperts:
// lcm(groups, experts/groups).
func groupPlanPeriod(experts, groups int) int {
	a, b := groups, experts/groups
	for b != 0 {
		a, b = b, a%b
	}
	return groups * (experts / groups) / a
}

// groupPlan is one candidate of the planner's beam.
type groupPlan struct {
	assign []int // group of each slot so far
	active []int // groups in use, in the order first used
	counts []int // slots per group
	most   int   // the largest of counts
	pref   int   // sum of the slots' preference ranks
}

// planGroups is the planner's beam search for token t's k slots, at most
// limit groups.
func planGroups(t, k, groups, limit int) []int {
	beam := []groupPlan{{counts: make([]int, groups)}}
	less := func(a, b groupPlan) int {
		if c := cmp.Compare(a.most, b.most); c != 0 {
			return c
		}
		if c := cmp.Compare(a.pref, b.pref); c != 0 {
			return c
		}
		return cmp.Compare(len(b.active), len(a.active)) // more groups first
	}
	for s := range k {
		var next []groupPlan
		for _, st := range beam {
			// Slot s prefers group (t+s+r) mod groups at rank r; a full
			// state may only reuse its groups, in that order.
			for r := range groups {
				g := (t + s + r) % groups
				in := slices.Contains(st.active, g)
				if !in && len(st.active) >= limit {
					continue
				}
				n := groupPlan{assign: append(slices.Clip(st.assign), g), active: st.active,
					counts: slices.Clone(st.counts), pref: st.pref + r}
				if !in {
					n.active = append(slices.Clip(st.active), g)
				}
				n.counts[g]++
				n.most = max(st.most, n.counts[g])
				next = append(next, n)
			}
		}
		slices.SortStableFunc(next, less)
		beam = next[:min(len(next), perfectBeamWidth)]
	}
	// The best state; the first of equals, as the beam ordered them.
	best := beam[0]
	for _, st := range beam[1:] {
		if less(st, best) < 0 {
			best = st
		}
	}
	return best.assign
}

// forcedGroupWeights are the slot weights of forced rows under grouped
// routing (see the comment at the top).
func forcedGroupWeights(c Config, mode RoutingMode) []float32 {
	k := c.TopK
	w := make([]float32, k)
	var sum float32
	for j := range w {
		logit := float32(10)
		if mode == Perfect {
			logit = 4
			if k > 1 {
				logit = 4 - 3*float32(j)/float32(k-1)
			}
		}
		w[j] = 1 / (1 + float32(math.Exp(float64(-logit))))
		sum += w[j]
	}
	for j := range w {
		if c.Routing == RoutingSigmoidGroupTopKRenorm {
			w[j] /= sum + 1e-20
		}
		w[j] *= float32(c.RoutedScale)
	}
	return w
}

// randomGroupAssignments draws rows×k expert ids for uniform or zipf
// routing within the group limit (see the comment at the top).
func randomGroupAssignments(rng *rand.Rand, mode Routing, rows, k, experts, groups, topkGroups int) []int32 {
	epg := experts / groups
	ids := make([]int32, rows*k)
	if mode.Mode == Uniform {
		gperm := make([]int, groups)
		for i := range gperm {
			gperm[i] = i
		}
		pool := make([]int32, topkGroups*epg)
		for r := range rows {
			for j := range topkGroups {
				s := j + rng.IntN(groups-j)
				gperm[j], gperm[s] = gperm[s], gperm[j]
				for i := range epg {
					pool[j*epg+i] = int32(gperm[j]*epg + i)
				}
			}
			for j := range k {
				s := j + rng.IntN(len(pool)-j)
				pool[j], pool[s] = pool[s], pool[j]
				ids[r*k+j] = pool[j]
			}
		}
		return ids
	}
	// Zipf: popularity by rank, the ranks a seeded permutation.
	pop := make([]float64, experts)
	holder := rng.Perm(experts)
	for rank, e := range holder {
		pop[e] = math.Pow(float64(rank+1), -mode.S)
	}
	gpop := make([]float64, groups)
	cdf := make([]float64, experts) // within each group, cumulative
	for g := range groups {
		sum := 0.0
		for i := range epg {
			sum += pop[g*epg+i]
			cdf[g*epg+i] = sum
		}
		gpop[g] = sum
	}
	chosen := make([]int, topkGroups)
	gtaken := make([]bool, groups)
	taken := make([]bool, experts)
	for r := range rows {
		// Groups: sequential draws by popularity among those left.
		for j := range topkGroups {
			left := 0.0
			for g, p := range gpop {
				if !gtaken[g] {
					left += p
				}
			}
			x := rng.Float64() * left
			pick := -1
			for g, p := range gpop {
				if gtaken[g] {
					continue
				}
				pick = g
				if x < p {
					break
				}
				x -= p
			}
			gtaken[pick] = true
			chosen[j] = pick
		}
		var csum float64
		for _, g := range chosen {
			csum += gpop[g]
		}
		row := ids[r*k : (r+1)*k]
		for j := range k {
			e := -1
			// A draw from the union by popularity, rejected while taken:
			// the same law as a draw among the experts left. A very
			// skewed law can make that slow, so after a while take the
			// most popular expert left.
			for try := 0; try < 64 && e < 0; try++ {
				x := rng.Float64() * csum
				g := chosen[len(chosen)-1]
				for _, cg := range chosen {
					if x < gpop[cg] {
						g = cg
						break
					}
					x -= gpop[cg]
				}
				c := sort.SearchFloat64s(cdf[g*epg:(g+1)*epg], x)
				c = min(c, epg-1)
				if !taken[g*epg+c] {
					e = g*epg + c
				}
			}
			if e < 0 {
				for _, g := range chosen {
					for i := range epg {
						if c := g*epg + i; !taken[c] && (e < 0 || pop[c] > pop[e]) {
							e = c
						}
					}
				}
			}
			taken[e] = true
			row[j] = int32(e)
		}
		for _, e := range row {
			taken[e] = false
		}
		for _, g := range chosen {
			gtaken[g] = false
		}
	}
	return ids
}
