package cpu

import (
	"fmt"
	"math"

	"github.com/xrun-dev/xrun/engine/model"
)

// GPT-OSS's ops (model.OSSBackend): bias adds, attention with sinks over a
// sliding window on a ring cache, and experts with biases and the clamped
// SwiGLU (the experts run MoE's code with moeExtras).

// ossCache is a Ring KV cache: per layer, per slot and KV head, K and V
// rows [LayerCapacity][head dim], position p at p mod LayerCapacity. A
// sliding layer holds its window only; attention reads the positions
// before a sequence's new tokens from here and the new ones from the QKV
// rows, then writes the new ones, so a chunk longer than the window
// overwrites nothing it still needs.
type ossCache struct {
	c    model.KVConfig
	lcap []int // positions each layer keeps
	off  []int // each layer's first element in k and v
	k, v []float32
}

func (c *ossCache) Config() model.KVConfig { return c.c }

// at is the offset of (layer, slot, KV head, position p) in k and v.
func (c *ossCache) at(layer, slot, head, p int) int {
	L := c.lcap[layer]
	return c.off[layer] + ((slot*c.c.KVHeads+head)*L+p%L)*c.c.HeadDim
}

func (b *Backend) newOSSCache(c model.KVConfig) (model.KVCache, error) {
	if c.Paged() || c.FP8 || c.MLA() {
		return nil, fmt.Errorf("KV cache: GPT-OSS's ring cache is neither paged, FP8 nor MLA on the CPU backend")
	}
	if c.Layers <= 0 || c.Slots <= 0 || c.Capacity <= 0 || c.KVHeads <= 0 || c.HeadDim <= 0 || c.Heads%c.KVHeads != 0 {
		return nil, fmt.Errorf("KV cache %+v: sizes must be positive, heads a multiple of KV heads", c)
	}
	kc := &ossCache{c: c, lcap: make([]int, c.Layers), off: make([]int, c.Layers)}
	n := 0
	for l := range c.Layers {
		kc.lcap[l], kc.off[l] = c.LayerCapacity(l), n
		n += c.Slots * c.KVHeads * kc.lcap[l] * c.HeadDim
	}
	kc.k, kc.v = make([]float32, n), make([]float32, n)
	return kc, nil
}

// maxOSSSlots is MaxKVSlots for a ring cache: sliding layers count their
// window only.
func (b *Backend) maxOSSSlots(c model.KVConfig) int {
	per := c.SlotBytes(4)
	if per <= 0 {
		return 0
	}
	return int(min(b.kvBudget()/per, 1<<30))
}

// AddBias: x[r] += bias.
func (b *Backend) AddBias(x, bias model.Tensor, rows int) {
	t0 := b.begin()
	xt, bt := ft(x), ft(bias)
	n := xt.cols()
	if len(bt.f) != n {
		b.fail(fmt.Errorf("bias %s: %d values for rows of %d", bt.name, len(bt.f), n))
		return
	}
	for r := range rows {
		row := xt.f[r*n : (r+1)*n]
		for i, v := range bt.f {
			row[i] += v
		}
	}
	b.end("cpu_bias_add", t0)
}

// ossAttnTask is one OSSAttention: items are (sequence, KV head, block of
// tokens), as Attention's.
type ossAttnTask struct {
	items   []attnItem
	out     []float32
	qkv     []float32
	sinks   []float32
	cache   *ossCache
	layer   int
	window  int
	batch   *model.Batch
	scratch [][]float32 // per worker: scores
	scale   float32
	hl      model.HeadLayout
	qkvCols int
}

// OSSAttention: attention with sinks over a window (model.OSSBackend).
func (b *Backend) OSSAttention(out, qkv, sinks model.Tensor, cache model.KVCache, layer, window int) {
	t0 := b.begin()
	c, ok := cache.(*ossCache)
	if !ok {
		b.fail(fmt.Errorf("attention: GPT-OSS attention needs a ring KV cache (KVConfig.Ring)"))
		return
	}
	hl := c.c.HeadLayout
	q := ft(qkv)
	bt := b.batch
	var sk []float32
	if s := ft(sinks); s != nil {
		if len(s.f) != hl.Heads {
			b.fail(fmt.Errorf("attention: %d sinks for %d heads", len(s.f), hl.Heads))
			return
		}
		sk = s.f
	}
	for i, slot := range b.tokSlot {
		if p := int(bt.Positions[i]); p >= c.c.Capacity || int(slot) >= c.c.Slots {
			b.fail(fmt.Errorf("attention: slot %d position %d outside the KV cache (%d slots x %d)", slot, p, c.c.Slots, c.c.Capacity))
			return
		}
	}
	items := b.items[:0]
	for si, s := range bt.Seqs {
		for h := range hl.KVHeads {
			for r := s.Start; r < s.Start+s.Len; r += 16 {
				items = append(items, attnItem{seq: int32(si), head: int32(h), t0: r, t1: min(r+16, s.Start+s.Len)})
			}
		}
	}
	b.items = items
	for len(b.oss.scores) < b.pool.workers {
		b.oss.scores = append(b.oss.scores, nil)
	}
	for w := range b.oss.scores {
		if len(b.oss.scores[w]) < c.c.Capacity {
			b.oss.scores[w] = make([]float32, c.c.Capacity)
		}
	}
	t := &b.oss.attnT
	*t = ossAttnTask{items: items, out: ft(out).f, qkv: q.f, sinks: sk, cache: c, layer: layer, window: window, batch: bt,
		scratch: b.oss.scores, scale: float32(1 / math.Sqrt(float64(hl.HeadDim))), hl: hl, qkvCols: q.cols()}
	b.pool.run(t, len(items))
	// The new keys and values go in only now: the items above read the
	// old positions a ring slot may hold.
	D, W := hl.HeadDim, q.cols()
	for i, slot := range b.tokSlot {
		p := int(bt.Positions[i])
		row := q.f[i*W : (i+1)*W]
		for h := range hl.KVHeads {
			o := c.at(layer, int(slot), h, p)
			copy(c.k[o:o+D], row[(hl.Heads+h)*D:])
			copy(c.v[o:o+D], row[(hl.Heads+hl.KVHeads+h)*D:])
		}
	}
	b.end("cpu_attention_sinks", t0)
}

func (t *ossAttnTask) run(ci, w int) {
	it := t.items[ci]
	hl, kc := t.hl, t.cache
	D, G := hl.HeadDim, hl.Heads/hl.KVHeads
	s := t.batch.Seqs[it.seq]
	past := int(s.Past)
	sc := t.scratch[w]
	outCols := hl.Heads * D
	// key and value of position j (lo <= j <= p) of the sequence.
	kv := func(j int) (k, v []float32) {
		if j < past {
			o := kc.at(t.layer, int(s.Slot), int(it.head), j)
			return kc.k[o : o+D], kc.v[o : o+D]
		}
		row := t.qkv[(int(s.Start)+j-past)*t.qkvCols:]
		h := int(it.head)
		return row[(hl.Heads+h)*D : (hl.Heads+h+1)*D], row[(hl.Heads+hl.KVHeads+h)*D : (hl.Heads+hl.KVHeads+h+1)*D]
	}
	for tok := int(it.t0); tok < int(it.t1); tok++ {
		p := past + tok - int(s.Start)
		lo := 0
		if t.window > 0 {
			lo = max(0, p-t.window+1)
		}
		for g := range G {
			qh := int(it.head)*G + g
			q := t.qkv[tok*t.qkvCols+qh*D : tok*t.qkvCols+(qh+1)*D]
			row := sc[:p+1-lo]
			mx := float32(math.Inf(-1))
			for j := lo; j <= p; j++ {
				k, _ := kv(j)
				row[j-lo] = dot(q, k) * t.scale
				mx = max(mx, row[j-lo])
			}
			var sink float32
			if t.sinks != nil {
				sink = t.sinks[qh]
				mx = max(mx, sink)
			}
			var sum float32
			for j := range row {
				row[j] = expf(row[j] - mx)
				sum += row[j]
			}
			if t.sinks != nil {
				sum += expf(sink - mx)
			}
			dst := t.out[tok*outCols+qh*D : tok*outCols+(qh+1)*D]
			clear(dst)
			for j := lo; j <= p; j++ {
				_, v := kv(j)
				axpy(row[j-lo], v, dst)
			}
			inv := 1 / sum
			for i := range dst {
				dst[i] *= inv
			}
		}
	}
}

// ossState is the backend's GPT-OSS scratch.
type ossState struct {
	attnT  ossAttnTask
	scores [][]float32 // per worker
	ex     moeExtras   // the experts' extras while OSSMoE runs MoE
}

// moeExtras are what GPT-OSS's experts add to MoE: biases ([E, 2F] in
// [gate | up] order and [E, H]; nil: none) and the activation.
type moeExtras struct {
	guBias, downBias []float32
	act              model.GLU
}

// OSSMoE is MoE with expert biases and the activation act (model.OSSBackend).
func (b *Backend) OSSMoE(out, x, idx, weights, gateUp, down, gateUpBias, downBias model.Tensor, rows, k int, act model.GLU) {
	ex := moeExtras{act: act}
	gu, dn := ft(gateUp), ft(down)
	if gu.q != nil || dn.q != nil {
		b.fail(fmt.Errorf("moe: FP8 experts with GPT-OSS's biases are not supported"))
		return
	}
	E, F2, H := gu.shape[0], gu.shape[1], gu.shape[2]
	if t := ft(gateUpBias); t != nil {
		if len(t.f) != E*F2 {
			b.fail(fmt.Errorf("moe: gate_up bias %v for experts %v", t.shape, gu.shape))
			return
		}
		ex.guBias = t.f
	}
	if t := ft(downBias); t != nil {
		if len(t.f) != E*H {
			b.fail(fmt.Errorf("moe: down bias %v for experts %v", t.shape, dn.shape))
			return
		}
		ex.downBias = t.f
	}
	// MoE's task takes the extras from here.
	b.oss.ex = ex
	b.MoE(out, x, idx, weights, gateUp, down, rows, k)
	b.oss.ex = moeExtras{}
}

// gateUpDone adds an expert's gate/up bias to n rows of its gate_up
// output and applies the activation into act.
func (ex *moeExtras) gateUpDone(gu, act []float32, expert, n, F int) {
	if ex.guBias != nil {
		bias := ex.guBias[expert*2*F : (expert+1)*2*F]
		for r := range n {
			row := gu[r*2*F : (r+1)*2*F]
			for i, v := range bias {
				row[i] += v
			}
		}
	}
	for r := range n {
		gluRow(act[r*F:(r+1)*F], gu[r*2*F:(r+1)*2*F], ex.act)
	}
}

// downDone adds an expert's down bias to n rows of its output.
func (ex *moeExtras) downDone(ys []float32, expert, n, H int) {
	if ex.downBias == nil {
		return
	}
	bias := ex.downBias[expert*H : (expert+1)*H]
	for r := range n {
		row := ys[r*H : (r+1)*H]
		for i, v := range bias {
			row[i] += v
		}
	}
}

// gluRow is the activation act over one [gate | up] row.
func gluRow(out, gu []float32, act model.GLU) {
	F := len(out)
	if act.Limit <= 0 {
		siluMul(out, gu[:F], gu[F:2*F])
		return
	}
	g, u := gu[:F], gu[F:2*F]
	for i := range out {
		x := min(g[i], act.Limit)
		y := max(min(u[i], act.Limit), -act.Limit)
		out[i] = (y + 1) * x / (1 + expf(-act.Alpha*x))
	}
}

var _ model.OSSBackend = (*Backend)(nil)
