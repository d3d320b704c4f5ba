package cpu

import (
	"fmt"
	"math"

	"github.com/xrun-dev/xrun/engine/model"
)

// groupRouteTask routes rows by DeepSeek-V3's grouped sigmoid method.
type groupRouteTask struct {
	idx       []int32
	wts       []float32
	logits    []float32
	bias      []float32
	forced    []int32
	r         model.GroupRoute
	experts   int
	rows, per int
	scratch   [][]float32 // per worker: 2·(experts + groups)
}

// RouteGrouped implements model.MLABackend.
func (b *Backend) RouteGrouped(idx, weights, logits, bias, forced model.Tensor, forcedRow, rows int, r model.GroupRoute, counts model.Tensor, layer int) {
	if rows <= 0 {
		return
	}
	t0 := b.begin()
	lg := ft(logits)
	E, k := lg.cols(), r.K
	t := &b.groupRouteT
	scratch := t.scratch
	*t = groupRouteTask{idx: ft(idx).i, wts: ft(weights).f, logits: lg.f, r: r, experts: E, rows: rows, scratch: scratch}
	if f := ft(forced); f != nil {
		if (forcedRow+rows)*k > len(f.i) || len(r.ForcedWeights) != k {
			b.fail(fmt.Errorf("route: forced rows %d..%d beyond the table (%d), or %d forced weights for top-%d", forcedRow, forcedRow+rows, f.shape[0], len(r.ForcedWeights), k))
			return
		}
		t.forced = f.i[forcedRow*k : (forcedRow+rows)*k]
	} else {
		bt := ft(bias)
		if bt == nil || len(bt.f) != E || r.Groups <= 0 || E%r.Groups != 0 || r.TopKGroups > r.Groups {
			b.fail(fmt.Errorf("route: grouped routing of %d experts, %d groups, top %d groups, bias %v", E, r.Groups, r.TopKGroups, bt))
			return
		}
		t.bias = bt.f
	}
	for len(t.scratch) < b.pool.workers {
		t.scratch = append(t.scratch, nil)
	}
	for w := range t.scratch {
		if len(t.scratch[w]) < 2*(E+r.Groups) {
			t.scratch[w] = make([]float32, 2*(E+r.Groups))
		}
	}
	chunks := b.pool.split(rows, 6*E, minRowWork)
	t.per = (rows + chunks - 1) / chunks
	b.pool.run(t, (rows+t.per-1)/t.per)
	if c := ft(counts); c != nil {
		row := c.i[layer*E : (layer+1)*E]
		for _, e := range t.idx[:rows*k] {
			row[e]++
		}
	}
	b.end("cpu_moe_route_grouped", t0)
}

func (t *groupRouteTask) run(c, w int) {
	k := t.r.K
	for r := c * t.per; r < min((c+1)*t.per, t.rows); r++ {
		idx, wts := t.idx[r*k:(r+1)*k], t.wts[r*k:(r+1)*k]
		if t.forced != nil {
			copy(idx, t.forced[r*k:(r+1)*k])
			copy(wts, t.r.ForcedWeights)
			continue
		}
		groupRouteRow(idx, wts, t.logits[r*t.experts:(r+1)*t.experts], t.bias, t.r, t.scratch[w])
	}
}

// groupRouteRow routes one token: sigmoid scores; the correction bias
// added for the choice only; groups ranked by the sum of their two best
// biased scores (a group of one expert by its one), the best TopKGroups
// kept; the top k of their experts by biased score; weights the unbiased
// scores, renormalised (+1e-20, as DeepSeek) when r.Renorm, times r.Scale.
// Experts outside the kept groups are never chosen (transformers zeroes
// their biased scores instead, which differs only when fewer than k kept
// experts have a positive biased score). Ties go to the lower index.
// scratch holds at least 2·(experts + groups).
func groupRouteRow(idx []int32, wts []float32, logits, bias []float32, r model.GroupRoute, scratch []float32) {
	E, G := len(logits), r.Groups
	score, choice := scratch[:E], scratch[E:2*E]
	gscore, kept := scratch[2*E:2*E+G], scratch[2*E+G:2*E+2*G]
	for e, v := range logits {
		score[e] = 1 / (1 + expf(-v))
		choice[e] = score[e] + bias[e]
	}
	epg := E / G
	for g := range G {
		first, second := float32(math.Inf(-1)), float32(math.Inf(-1))
		for _, v := range choice[g*epg : (g+1)*epg] {
			if v > first {
				first, second = v, first
			} else if v > second {
				second = v
			}
		}
		if epg == 1 {
			second = 0
		}
		gscore[g], kept[g] = first+second, 0
	}
	for range r.TopKGroups {
		best := -1
		for g, v := range gscore {
			if kept[g] == 0 && (best < 0 || v > gscore[best]) {
				best = g
			}
		}
		kept[best] = 1
	}
	for j := range idx {
		best := -1
		for e, v := range choice {
			if kept[e/epg] == 0 || takenBefore(idx[:j], e) {
				continue
			}
			if best < 0 || v > choice[best] {
				best = e
			}
		}
		idx[j] = int32(best)
	}
	var sum float32
	for j, e := range idx {
		wts[j] = score[e]
		sum += wts[j]
	}
	for j := range wts {
		if r.Renorm {
			wts[j] /= sum + 1e-20
		}
		wts[j] *= r.Scale
	}
}

func takenBefore(idx []int32, e int) bool {
	for _, p := range idx {
		if int(p) == e {
			return true
		}
	}
	return false
}
