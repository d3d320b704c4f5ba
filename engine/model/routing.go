package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
)

// RoutingMode is how MoE tokens are assigned to experts.
type RoutingMode int

const (
	// Learned uses the router's own top-k.
	Learned RoutingMode = iota
	// Perfect computes the router, then replaces its choice by TensorRT-LLM's
	// balanced assignment: token t's j-th expert is (t·k + j) mod E (one
	// GPU), every weight 1/k; under DeepSeek-V3's grouped routing,
	// TensorRT-LLM's planner for that method (routing_grouped.go).
	Perfect
	// Uniform assigns k distinct experts drawn uniformly (seeded).
	Uniform
	// Zipf assigns k distinct experts drawn with popularity ∝ 1/rank^S, the
	// ranking a seeded permutation per layer (seeded).
	Zipf
)

// Routing is a routing mode and its parameter.
type Routing struct {
	Mode RoutingMode
	S    float64 // Zipf exponent, > 0
}

func (r Routing) String() string {
	switch r.Mode {
	case Perfect:
		return "perfect"
	case Uniform:
		return "uniform"
	case Zipf:
		return fmt.Sprintf("zipf:%g", r.S)
	}
	return "learned"
}

// randomPeriod is how many random assignments a layer draws.
const randomPeriod = 16384

// BalancedExpert is TensorRT-LLM's perfect-router assignment for one GPU
// (ep_size 1): token t's j-th expert among E.
func BalancedExpert(t, j, k, experts int) int { return (t*k + j) % experts }

// routeTables holds the forced assignments of the non-learned modes. Perfect
// needs one [MaxTokens, k] table (the assignment of token t does not depend
// on how many tokens the iteration has, so TensorRT-LLM's per-token-count
// cache is a prefix of it). Uniform and zipf draw, per layer, randomPeriod
// random assignments once (repeated periodically to cover any window) and
// give each iteration a window starting at a random row: each row is an
// independent draw, nothing is uploaded per iteration, and the draws do
// not depend on the capacity reserved.
type routeTables struct {
	mode    Routing
	rows    int
	perfect Tensor
	random  []Tensor
	rng     *rand.Rand
	seed    uint64
	// weights are a forced row's slot weights under grouped routing
	// (GroupRoute.ForcedWeights).
	weights []float32
}

func (r *routeTables) reserve(m *Model, maxTokens int) error {
	c := m.cfg
	r.mode, r.seed = m.opt.Routing, m.opt.Seed
	if r.rng == nil {
		r.reset(m.opt)
	}
	k, E := c.TopK, c.Experts
	if c.GroupedRouting() {
		r.weights = forcedGroupWeights(c, r.mode.Mode)
	}
	switch r.mode.Mode {
	case Perfect:
		if r.rows >= maxTokens {
			return nil
		}
		ids := make([]int32, maxTokens*k)
		for t := range maxTokens {
			if c.GroupedRouting() {
				// The plan repeats with this period; planning is a search.
				if p := groupPlanPeriod(E, c.Groups); t >= p {
					copy(ids[t*k:(t+1)*k], ids[(t%p)*k:])
				} else {
					PerfectGroupedExperts(ids[t*k:(t+1)*k], t, E, c.Groups, c.TopKGroups)
				}
				continue
			}
			for j := range k {
				ids[t*k+j] = int32(BalancedExpert(t, j, k, E))
			}
		}
		if r.perfect != nil {
			m.free(r.perfect)
		}
		t, err := m.be.Alloc("perfect_routing", Int32, maxTokens, k)
		if err == nil {
			err = m.be.WriteInt32(t, ids)
		}
		if err != nil {
			r.perfect, r.rows = nil, 0
			return err
		}
		r.perfect, r.rows = t, maxTokens
		return nil
	case Uniform, Zipf:
		rows := randomPeriod + maxTokens
		if r.rows >= rows {
			return nil
		}
		for _, t := range r.random {
			m.free(t)
		}
		r.random, r.rows = r.random[:0], 0
		for l := range c.Layers {
			rng := rand.New(rand.NewPCG(r.seed, uint64(l)+1))
			var ids []int32
			if c.GroupedRouting() {
				ids = randomGroupAssignments(rng, r.mode, randomPeriod, k, E, c.Groups, c.TopKGroups)
			} else {
				ids = randomAssignments(rng, r.mode, randomPeriod, k, E)
			}
			for len(ids) < rows*k {
				ids = append(ids, ids[:min(randomPeriod*k, rows*k-len(ids))]...)
			}
			t, err := m.be.Alloc(fmt.Sprintf("routing_table.%d", l), Int32, rows, k)
			if err == nil {
				err = m.be.WriteInt32(t, ids)
			}
			if err != nil {
				return err
			}
			r.random = append(r.random, t)
		}
		r.rows = rows
	}
	return nil
}

func (r *routeTables) reset(opt Options) {
	r.rng = rand.New(rand.NewPCG(opt.Seed, 0x726f757465)) // "route"
}

// forced returns the table and first row a layer routes n tokens by, or
// nil for learned routing.
func (r *routeTables) forced(layer, n int) (Tensor, int) {
	switch r.mode.Mode {
	case Perfect:
		return r.perfect, 0
	case Uniform, Zipf:
		return r.random[layer], r.rng.IntN(randomPeriod)
	}
	return nil, 0
}

// randomAssignments draws rows×k expert ids, k distinct per row.
func randomAssignments(rng *rand.Rand, mode Routing, rows, k, experts int) []int32 {
	ids := make([]int32, rows*k)
	if mode.Mode == Uniform {
		perm := make([]int32, experts)
		for i := range perm {
			perm[i] = int32(i)
		}
		for r := range rows {
			// Partial Fisher-Yates: the first k of a fresh shuffle.
			for j := range k {
				s := j + rng.IntN(experts-j)
				perm[j], perm[s] = perm[s], perm[j]
				ids[r*k+j] = perm[j]
			}
		}
		return ids
	}
	// Zipf: rank r (1-based) has weight r^-S; a seeded permutation decides
	// which expert holds which rank, so the hot expert differs per layer.
	cdf := make([]float64, experts)
	sum := 0.0
	for i := range experts {
		sum += math.Pow(float64(i+1), -mode.S)
		cdf[i] = sum
	}
	holder := rng.Perm(experts)
	used := make([]bool, experts)
	ranks := make([]int, k)
	for r := range rows {
		row := ids[r*k : (r+1)*k]
		for j := range k {
			rank := -1
			// Draw by popularity, rejecting experts already chosen; a very
			// skewed law can make that slow, so after a while take the most
			// popular rank still free.
			for try := 0; try < 64 && rank < 0; try++ {
				x := rng.Float64() * sum
				c := sort.SearchFloat64s(cdf, x)
				if c >= experts {
					c = experts - 1
				}
				if !used[c] {
					rank = c
				}
			}
			for c := 0; rank < 0; c++ {
				if !used[c] {
					rank = c
				}
			}
			used[rank] = true
			ranks[j] = rank
			row[j] = int32(holder[rank])
		}
		for _, rk := range ranks {
			used[rk] = false
		}
	}
	return ids
}
