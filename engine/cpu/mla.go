package cpu

import (
	"fmt"

	"github.com/xrun-dev/xrun/engine/model"
)

// Multi-head latent attention (model.MLABackend) in float32. The cache
// holds, per (layer, slot, position), the normalised latent and the rotary
// key: [layer][slot][pos][Latent + RopeDim], nothing padded. Work is done
// in two parallel passes: the rows (normalise, rotate, write the cache),
// then items of (sequence, head, up to mlaBlock tokens) attending over the
// cache. Both forms are plain loops over dot products and axpys: this is
// the oracle the GPU kernels will be checked against, not a fast path.

// mlaCache is the CPU backend's MLA cache.
type mlaCache struct {
	c    model.KVConfig
	rows []float32
}

func (c *mlaCache) Config() model.KVConfig { return c.c }

// at is the offset of (layer, slot, position)'s row.
func (c *mlaCache) at(layer, slot, pos int) int {
	return ((layer*c.c.Slots+slot)*c.c.Capacity + pos) * (c.c.Latent + c.c.RopeDim)
}

// mlaBlock is how many tokens of one sequence an attention item takes.
const mlaBlock = 16

// mlaScratch is one worker's attention scratch, sized by newMLACache.
type mlaScratch struct {
	k, v   []float32 // plain form: one head's decompressed keys (nope part) and values
	s      []float32 // scores, a row of capacity per token
	ql, ol []float32 // absorbed form: the query and the output in latent space
}

func (b *Backend) newMLACache(c model.KVConfig) (model.KVCache, error) {
	n := c.Layers * c.Slots * c.Capacity * (c.Latent + c.RopeDim)
	if n <= 0 || c.Heads <= 0 || c.RopeDim%2 != 0 {
		return nil, fmt.Errorf("MLA cache %+v: sizes must be positive, the rotary dimension even", c)
	}
	for len(b.mlaScratch) < b.pool.workers {
		b.mlaScratch = append(b.mlaScratch, mlaScratch{})
	}
	for w := range b.mlaScratch {
		a := &b.mlaScratch[w]
		if len(a.s) < mlaBlock*c.Capacity {
			a.s = make([]float32, mlaBlock*c.Capacity)
		}
		if len(a.ql) < mlaBlock*c.Latent {
			a.ql, a.ol = make([]float32, mlaBlock*c.Latent), make([]float32, mlaBlock*c.Latent)
		}
	}
	return &mlaCache{c: c, rows: make([]float32, n)}, nil
}

// mlaPrepTask normalises, rotates and caches each batch token's rows.
type mlaPrepTask struct {
	q, ckv, norm, table []float32
	cache               *mlaCache
	layer               int
	slot, pos           []int32
	s                   model.MLAShape
	per, rows           int
}

func (t *mlaPrepTask) run(c, _ int) {
	s := t.s
	L, dr, qw := s.Latent, s.RopeDim, s.QWidth()
	for r := c * t.per; r < min((c+1)*t.per, t.rows); r++ {
		p := int(t.pos[r])
		tab := t.table[p*dr : (p+1)*dr]
		kv := t.ckv[r*(L+dr) : (r+1)*(L+dr)]
		rmsNormRow(kv[:L], kv[:L], t.norm, s.Eps)
		mlaRope(kv[L:], tab, s.Interleave)
		q := t.q[r*qw : (r+1)*qw]
		for h := range s.Heads {
			o := h*(s.NopeDim+dr) + s.NopeDim
			mlaRope(q[o:o+dr], tab, s.Interleave)
		}
		at := t.cache.at(t.layer, int(t.slot[r]), p)
		copy(t.cache.rows[at:at+L+dr], kv)
	}
}

// mlaRope rotates x by a RoPE table row (cos | sin). Interleaved, the pairs
// are adjacent elements and stay in place: transformers moves them to the
// two halves first, a permutation applied alike to queries and keys, which
// leaves every score the same.
func mlaRope(x, tab []float32, interleave bool) {
	half := len(x) / 2
	if !interleave {
		ropeHead(x, tab)
		return
	}
	cos, sin := tab[:half], tab[half:2*half]
	for i := range half {
		a, b := x[2*i], x[2*i+1]
		x[2*i] = a*cos[i] - b*sin[i]
		x[2*i+1] = b*cos[i] + a*sin[i]
	}
}

// mlaItem is (sequence, head, token block) of one MLA attention op.
type mlaItem struct {
	slot, head int32
	t0, t1     int32
	absorb     bool
}

type mlaTask struct {
	items   []mlaItem
	out, q  []float32
	kvb     []float32 // [Heads][NopeDim + VDim][Latent]
	cache   *mlaCache
	layer   int
	pos     []int32
	s       model.MLAShape
	scratch []mlaScratch
}

// MLAAttention implements model.MLABackend.
func (b *Backend) MLAAttention(out, q, ckv, kvNorm, kvb, table model.Tensor, cache model.KVCache, layer int, s model.MLAShape, absorb bool) {
	t0 := b.begin()
	c, ok := cache.(*mlaCache)
	if !ok {
		b.fail(fmt.Errorf("mla attention: %T is not an MLA cache", cache))
		return
	}
	bt := b.batch
	qt, kt, wt, tab := ft(q), ft(ckv), ft(kvb), ft(table)
	switch {
	case qt.cols() != s.QWidth() || kt.cols() != s.Latent+s.RopeDim || ft(out).cols() != s.Heads*s.VDim:
		b.fail(fmt.Errorf("mla attention: q %v, ckv %v, out %v do not fit %+v", qt.shape, kt.shape, ft(out).shape, s))
		return
	case len(wt.shape) != 3 || wt.shape[0] != s.Heads || wt.shape[1] != s.NopeDim+s.VDim || wt.shape[2] != s.Latent || wt.f == nil:
		b.fail(fmt.Errorf("mla attention: kv_b %v, want a head stack [%d %d %d]", wt.shape, s.Heads, s.NopeDim+s.VDim, s.Latent))
		return
	case tab.cols() != s.RopeDim:
		b.fail(fmt.Errorf("mla attention: RoPE table %v for rotary dimension %d", tab.shape, s.RopeDim))
		return
	}
	for i, slot := range b.tokSlot {
		p := int(bt.Positions[i])
		if p >= c.c.Capacity || int(slot) >= c.c.Slots || p >= tab.shape[0] {
			b.fail(fmt.Errorf("mla attention: slot %d position %d outside the cache (%d slots x %d) or the RoPE table (%d)", slot, p, c.c.Slots, c.c.Capacity, tab.shape[0]))
			return
		}
	}
	T := len(bt.Tokens)
	pt := &b.mlaPrepT
	*pt = mlaPrepTask{q: qt.f, ckv: kt.f, norm: ft(kvNorm).f, table: tab.f, cache: c, layer: layer, slot: b.tokSlot, pos: bt.Positions, s: s, rows: T}
	chunks := b.pool.split(T, s.QWidth()+s.Latent, minRowWork)
	pt.per = (T + chunks - 1) / chunks
	b.pool.run(pt, (T+pt.per-1)/pt.per)

	items := b.mlaItems[:0]
	for _, sq := range bt.Seqs {
		for h := range s.Heads {
			for r := sq.Start; r < sq.Start+sq.Len; r += mlaBlock {
				items = append(items, mlaItem{slot: sq.Slot, head: int32(h), t0: r, t1: min(r+mlaBlock, sq.Start+sq.Len), absorb: absorb && sq.Len == 1})
			}
		}
	}
	b.mlaItems = items
	t := &b.mlaT
	*t = mlaTask{items: items, out: ft(out).f, q: qt.f, kvb: wt.f, cache: c, layer: layer, pos: bt.Positions, s: s, scratch: b.mlaScratch}
	b.pool.run(t, len(items))
	b.end("cpu_mla_attention", t0)
}

func (t *mlaTask) run(c, w int) {
	it := t.items[c]
	s := t.s
	L, dn, dr, dv := s.Latent, s.NopeDim, s.RopeDim, s.VDim
	a := &t.scratch[w]
	wh := t.kvb[int(it.head)*(dn+dv)*L : int(it.head+1)*(dn+dv)*L]
	wuk, wuv := wh[:dn*L], wh[dn*L:]
	base := t.cache.at(t.layer, int(it.slot), 0)
	row := func(p int) []float32 { return t.cache.rows[base+p*(L+dr) : base+(p+1)*(L+dr)] }
	nMax := int(t.pos[it.t1-1]) + 1 // positions increase within a sequence
	capa := t.cache.c.Capacity
	qw, ow := s.QWidth(), s.Heads*dv

	if !it.absorb {
		// Plain: decompress this head's keys and values at every position.
		if len(a.k) < nMax*dn || len(a.v) < nMax*dv {
			a.k, a.v = make([]float32, capa*dn), make([]float32, capa*dv)
		}
		for p := range nMax {
			cp := row(p)[:L]
			for i := range dn {
				a.k[p*dn+i] = dot(wuk[i*L:(i+1)*L], cp)
			}
			for i := range dv {
				a.v[p*dv+i] = dot(wuv[i*L:(i+1)*L], cp)
			}
		}
	}
	for tok := int(it.t0); tok < int(it.t1); tok++ {
		r := tok - int(it.t0)
		qh := t.q[tok*qw+int(it.head)*(dn+dr):]
		qn, qr := qh[:dn], qh[dn:dn+dr]
		n := int(t.pos[tok]) + 1
		sc := a.s[r*capa : r*capa+n]
		o := t.out[tok*ow+int(it.head)*dv : tok*ow+int(it.head+1)*dv]
		if it.absorb {
			// W_UK into the query: ql = W_UKᵀ·q_nope.
			ql := a.ql[r*L : (r+1)*L]
			clear(ql)
			for i, x := range qn {
				axpy(x, wuk[i*L:(i+1)*L], ql)
			}
			for p := range n {
				cp := row(p)
				sc[p] = dot(ql, cp[:L]) + dot(qr, cp[L:])
			}
		} else {
			for p := range n {
				sc[p] = dot(qn, a.k[p*dn:(p+1)*dn]) + dot(qr, row(p)[L:])
			}
		}
		mx := maxOf(sc)
		inv := 1 / expSum(sc, s.Scale, -mx*s.Scale)
		if it.absorb {
			// W_UV into the output: o = W_UV·(Σ p·c).
			ol := a.ol[r*L : (r+1)*L]
			clear(ol)
			for p, e := range sc {
				axpy(e, row(p)[:L], ol)
			}
			for i := range dv {
				o[i] = dot(wuv[i*L:(i+1)*L], ol) * inv
			}
			continue
		}
		clear(o)
		for p, e := range sc {
			axpy(e, a.v[p*dv:(p+1)*dv], o)
		}
		for i := range o {
			o[i] *= inv
		}
	}
}
