package cpu

import (
	"fmt"
	"math"

	"github.com/xrun-dev/xrun/engine/model"
)

// routeTask picks each token's experts and weights.
type routeTask struct {
	idx       []int32
	wts       []float32
	logits    []float32
	forced    []int32
	experts   int
	k         int
	rows, per int
	method    string
	probs     [][]float32 // per worker
}

func (b *Backend) Route(idx, weights, logits, forced model.Tensor, forcedRow, rows, k int, method string, counts model.Tensor, layer int) {
	if rows <= 0 {
		return
	}
	t0 := b.begin()
	lg := ft(logits)
	E := lg.cols()
	t := &b.routeT
	probs := t.probs
	*t = routeTask{idx: ft(idx).i, wts: ft(weights).f, logits: lg.f, experts: E, k: k, rows: rows, method: method, probs: probs}
	if f := ft(forced); f != nil {
		if (forcedRow+rows)*k > len(f.i) {
			b.fail(fmt.Errorf("route: forced rows %d..%d beyond the table (%d)", forcedRow, forcedRow+rows, f.shape[0]))
			return
		}
		t.forced = f.i[forcedRow*k : (forcedRow+rows)*k]
	}
	for len(t.probs) < b.pool.workers {
		t.probs = append(t.probs, nil)
	}
	for w := range t.probs {
		if len(t.probs[w]) < E {
			t.probs[w] = make([]float32, E)
		}
	}
	chunks := b.pool.split(rows, 4*E, minRowWork)
	t.per = (rows + chunks - 1) / chunks
	b.pool.run(t, (rows+t.per-1)/t.per)
	// Counting after the parallel part keeps the counts free of races.
	if c := ft(counts); c != nil {
		row := c.i[layer*E : (layer+1)*E]
		for _, e := range t.idx[:rows*k] {
			row[e]++
		}
	}
	b.end("cpu_moe_route", t0)
}

func (t *routeTask) run(c, w int) {
	k := t.k
	for r := c * t.per; r < min((c+1)*t.per, t.rows); r++ {
		idx, wts := t.idx[r*k:(r+1)*k], t.wts[r*k:(r+1)*k]
		if t.forced != nil {
			copy(idx, t.forced[r*k:(r+1)*k])
			for j := range wts {
				wts[j] = 1 / float32(k)
			}
			continue
		}
		routeRow(idx, wts, t.logits[r*t.experts:(r+1)*t.experts], t.method, t.probs[w][:t.experts])
	}
}

// routeRow routes one token; probs is scratch of len(logits).
func routeRow(idx []int32, wts []float32, logits []float32, method string, probs []float32) {
	switch method {
	case model.RoutingTopKSoftmax:
		topK(idx, logits)
		mx := logits[idx[0]]
		var sum float32
		for j, e := range idx {
			wts[j] = expf(logits[e] - mx)
			sum += wts[j]
		}
		for j := range wts {
			wts[j] /= sum
		}
	default: // softmax first
		softmax(probs, logits)
		topK(idx, probs)
		var sum float32
		for j, e := range idx {
			wts[j] = probs[e]
			sum += wts[j]
		}
		if method == model.RoutingSoftmaxTopKRenorm {
			for j := range wts {
				wts[j] /= sum
			}
		}
	}
}

func softmax(out, x []float32) {
	mx := float32(math.Inf(-1))
	for _, v := range x {
		mx = max(mx, v)
	}
	var sum float32
	for i, v := range x {
		out[i] = expf(v - mx)
		sum += out[i]
	}
	inv := 1 / sum
	for i := range out {
		out[i] *= inv
	}
}

// topK writes the indices of the len(idx) largest values, largest first,
// the lowest index first among equals.
func topK(idx []int32, x []float32) {
	for j := range idx {
		best := -1
		for i, v := range x {
			taken := false
			for _, p := range idx[:j] {
				if int(p) == i {
					taken = true
					break
				}
			}
			if !taken && (best < 0 || v > x[best]) {
				best = i
			}
		}
		idx[j] = int32(best)
	}
}

// moeScratch holds the expert-sorted copies of an iteration's routed rows.
type moeScratch struct {
	count, offset []int
	order         []int32 // sorted position -> t*k+j
	where         []int32 // t*k+j -> sorted position
	xs, gu, act   []float32
	ys            []float32
	items         []moeItem
	sxBuf         []float32 // FP8: the input's scales, kept while the activations are quantized
}

type moeItem struct{ expert, lo, hi int }

type moeTask struct {
	s             *moeScratch
	x, out        []float32
	wts           []float32
	gateUp, down  *tensor
	H, F, k, rows int
	combine       bool
	per           int
	scratch       [][]float32
	// FP8 experts run in two phases around the quantization of the
	// intermediate activations, whose per-tensor scale spans every
	// expert's rows: moeUp (gather, gate/up GEMM, SwiGLU), then moeDown.
	phase  int
	sx, sa []float32 // the input's and the activations' scales (per token or one)
	ex     moeExtras // GPT-OSS's biases and activation (gptoss.go)
	mx     *mxfp4Scratch
}

// Phases of an FP8 MoE item (moeTask.phase); moeAll runs both at once.
const (
	moeAll = iota
	moeUp
	moeDown
)

// moeRowsPerItem bounds a work item to a few micro-tiles of one expert.
const moeRowsPerItem = 8 * mr

// MoE runs every expert on the rows routed to it and combines the results
// with the routing weights. Rows are sorted by expert (counting sort,
// stable in token order), experts × row blocks run in parallel, and the
// combine sums each token's k results in slot order (deterministic).
func (b *Backend) MoE(out, x, idx, weights, gateUp, down model.Tensor, rows, k int) {
	b.moeRun(out, x, idx, weights, gateUp, down, rows, k, 0, false)
}

// moeRun is MoE over the experts first.. held in gateUp and down; with
// shard, slots routed to other experts are skipped (MoEShard), else they
// are an error.
func (b *Backend) moeRun(out, x, idx, weights, gateUp, down model.Tensor, rows, k, first int, shard bool) {
	if rows <= 0 {
		return
	}
	t0 := b.begin()
	gu, dn := ft(gateUp), ft(down)
	E, F2, H := gu.shape[0], gu.shape[1], gu.shape[2]
	F := F2 / 2
	s := &b.moe
	n := rows * k
	grow := func(buf []float32, size int) []float32 {
		if len(buf) < size {
			return make([]float32, size)
		}
		return buf
	}
	s.xs, s.gu, s.act, s.ys = grow(s.xs, n*H), grow(s.gu, n*F2), grow(s.act, n*F), grow(s.ys, n*H)
	if len(s.count) < E {
		s.count, s.offset = make([]int, E), make([]int, E+1)
	}
	if len(s.order) < n {
		s.order, s.where = make([]int32, n), make([]int32, n)
	}
	ids := ft(idx).i[:n]
	clear(s.count)
	for _, e := range ids {
		e -= int32(first)
		if e < 0 || int(e) >= E {
			if shard {
				continue
			}
			b.fail(fmt.Errorf("moe: expert id %d outside 0..%d", e, E-1))
			return
		}
		s.count[e]++
	}
	s.offset[0] = 0
	for e := range E {
		s.offset[e+1] = s.offset[e] + s.count[e]
	}
	fill := s.count[:E]
	copy(fill, s.offset[:E])
	for a, e := range ids {
		e -= int32(first)
		if e < 0 || int(e) >= E {
			s.where[a] = -1 // another rank's expert
			continue
		}
		p := fill[e]
		fill[e]++
		s.order[p], s.where[a] = int32(a), int32(p)
	}
	s.items = s.items[:0]
	for e := range E {
		for lo := s.offset[e]; lo < s.offset[e+1]; lo += moeRowsPerItem {
			s.items = append(s.items, moeItem{expert: e, lo: lo, hi: min(lo+moeRowsPerItem, s.offset[e+1])})
		}
	}
	t := &b.moeT
	*t = moeTask{s: s, x: ft(x).f, out: ft(out).f, wts: ft(weights).f, gateUp: gu, down: dn,
		H: H, F: F, k: k, rows: rows, scratch: b.scratch16, ex: b.oss.ex, mx: b.mxfp4Prepare(gu, dn)}
	if gu.q != nil && dn.q != nil {
		b.moeFP8(t, s.offset[E])
	} else {
		b.pool.run(t, len(s.items))
	}
	t.combine = true
	chunks := b.pool.split(rows, k*H, minRowWork)
	t.per = (rows + chunks - 1) / chunks
	b.pool.run(t, (rows+t.per-1)/t.per)
	b.end("cpu_moe_experts", t0)
}

func (t *moeTask) run(c, w int) {
	s, H, F := t.s, t.H, t.F
	if t.combine {
		for r := c * t.per; r < min((c+1)*t.per, t.rows); r++ {
			o := t.out[r*H : (r+1)*H]
			clear(o)
			for j := range t.k {
				p := int(s.where[r*t.k+j])
				if p < 0 {
					continue
				}
				axpy(t.wts[r*t.k+j], s.ys[p*H:(p+1)*H], o)
			}
		}
		return
	}
	it := s.items[c]
	n := it.hi - it.lo
	xs := s.xs[it.lo*H:]
	gu := s.gu[it.lo*2*F:]
	act := s.act[it.lo*F:]
	ys := s.ys[it.lo*H:]
	if t.phase != moeDown {
		for p := it.lo; p < it.hi; p++ {
			tok := int(s.order[p]) / t.k
			copy(s.xs[p*H:(p+1)*H], t.x[tok*H:(tok+1)*H])
		}
		wd, wp := t.expert(t.gateUp, it.expert, w)
		gemmSerial(gu, 2*F, xs, H, n, 2*F, H, wd, wp, t.scratch[w])
		if t.phase == moeUp {
			// Each row's input scale is its token's (or the tensor's).
			for r := range n {
				a := t.sx[0]
				if len(t.sx) > 1 {
					a = t.sx[int(s.order[it.lo+r])/t.k]
				}
				scaleOutput(gu[r*2*F:], 2*F, 1, 2*F, []float32{a}, t.gateUp.q.scale[it.expert*2*F:])
			}
		}
		t.ex.gateUpDone(gu, act, it.expert, n, F)
		if t.phase == moeUp {
			return
		}
	}
	wd, wp := t.expert(t.down, it.expert, w)
	gemmSerial(ys, H, act, F, n, H, F, wd, wp, t.scratch[w])
	t.ex.downDone(ys, it.expert, n, H)
	if t.phase == moeDown {
		sa := t.sa
		if len(sa) > 1 {
			sa = sa[it.lo:it.hi]
		}
		scaleOutput(ys, H, n, H, sa, t.down.q.scale[it.expert*H:])
	}
}

// moeFP8 runs FP8 experts over n routed rows: the input quantized (per
// tensor over every token, or per token), gate/up GEMMs and SwiGLU per
// expert, the activations of every expert's rows quantized together (per
// tensor, or per row), then the down GEMMs.
func (b *Backend) moeFP8(t *moeTask, n int) {
	s := t.s
	xq, sx := b.fp8.quantizeInput(t.x, t.rows, t.H, t.gateUp.q)
	t.x, t.sx = xq, append(s.sxBuf[:0], sx...)
	s.sxBuf = t.sx
	t.phase = moeUp
	b.pool.run(t, len(s.items))
	aq, sa := b.fp8.quantizeInput(s.act, n, t.F, t.down.q)
	copy(s.act[:n*t.F], aq)
	t.sa = sa
	t.phase = moeDown
	b.pool.run(t, len(s.items))
}

func expertData(t *tensor, e int) []float32 {
	if t.f == nil {
		return nil
	}
	sz := t.shape[1] * t.shape[2]
	return t.f[e*sz : (e+1)*sz]
}

func expertPacked(t *tensor, e int) *packed {
	if t.pk == nil {
		return nil
	}
	return t.pk[e]
}
