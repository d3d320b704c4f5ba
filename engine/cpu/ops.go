package cpu

import (
	"fmt"
	"math"

	"github.com/xrun-dev/xrun/engine/fp8"
	"github.com/xrun-dev/xrun/engine/model"
)

// Row-wise ops share one task type: each chunk is a run of rows.
type rowKind int

const (
	rowEmbed rowKind = iota
	rowRMSNorm
	rowAddRMSNorm
	rowAdd
	rowSwiGLU
	rowRoPE
	rowHeadNorm
	rowGather
)

type rowTask struct {
	kind       rowKind
	rows, per  int
	out, x, w  []float32
	res, w2    []float32
	ids        []int32
	pos        []int32
	cols, xcol int
	eps        float32
	hl         model.HeadLayout
}

// minRowWork is the least work (floats touched) worth a chunk of its own.
const minRowWork = 1 << 14

func (b *Backend) runRows(t *rowTask, work int) {
	if t.rows <= 0 {
		return
	}
	chunks := b.pool.split(t.rows, work, minRowWork)
	t.per = (t.rows + chunks - 1) / chunks
	b.pool.run(t, (t.rows+t.per-1)/t.per)
}

func (t *rowTask) run(c, _ int) {
	lo, hi := c*t.per, min((c+1)*t.per, t.rows)
	n := t.cols
	switch t.kind {
	case rowEmbed, rowGather:
		for r := lo; r < hi; r++ {
			src := int(t.ids[r])
			copy(t.out[r*n:(r+1)*n], t.x[src*n:(src+1)*n])
		}
	case rowRMSNorm:
		for r := lo; r < hi; r++ {
			rmsNormRow(t.out[r*n:(r+1)*n], t.x[r*n:(r+1)*n], t.w, t.eps)
		}
	case rowAddRMSNorm:
		for r := lo; r < hi; r++ {
			res := t.res[r*n : (r+1)*n]
			for i, d := range t.x[r*n : (r+1)*n] {
				res[i] += d
			}
			rmsNormRow(t.out[r*n:(r+1)*n], res, t.w, t.eps)
		}
	case rowAdd:
		for r := lo; r < hi; r++ {
			dst := t.out[r*n : (r+1)*n]
			for i, v := range t.x[r*n : (r+1)*n] {
				dst[i] += v
			}
		}
	case rowSwiGLU:
		for r := lo; r < hi; r++ {
			swigluRow(t.out[r*n:(r+1)*n], t.x[r*t.xcol:(r+1)*t.xcol])
		}
	case rowRoPE:
		D := t.hl.HeadDim
		for r := lo; r < hi; r++ {
			row := t.out[r*t.xcol : (r+1)*t.xcol]
			tab := t.w[int(t.pos[r])*D : int(t.pos[r]+1)*D]
			for h := range t.hl.Heads + t.hl.KVHeads {
				ropeHead(row[h*D:(h+1)*D], tab)
			}
		}
	case rowHeadNorm:
		D := t.hl.HeadDim
		for r := lo; r < hi; r++ {
			row := t.out[r*t.xcol : (r+1)*t.xcol]
			for h := range t.hl.Heads + t.hl.KVHeads {
				w := t.w
				if h >= t.hl.Heads {
					w = t.w2
				}
				head := row[h*D : (h+1)*D]
				rmsNormRow(head, head, w, t.eps)
			}
		}
	}
}

func rmsNormRow(out, x, w []float32, eps float32) {
	inv := rsqrt(sumSquares(x)/float32(len(x)) + eps)
	w = w[:len(x)]
	out = out[:len(x)]
	for i, v := range x {
		out[i] = w[i] * (v * inv)
	}
}

func swigluRow(out, gu []float32) {
	n := len(out)
	siluMul(out, gu[:n], gu[n:2*n])
}

// ropeHead rotates one head by a table row (cos | sin), rotate-half style.
func ropeHead(x, tab []float32) {
	half := len(x) / 2
	cos, sin := tab[:half], tab[half:2*half]
	x1, x2 := x[:half], x[half:2*half]
	for i := range half {
		a, b := x1[i], x2[i]
		x1[i] = a*cos[i] - b*sin[i]
		x2[i] = b*cos[i] + a*sin[i]
	}
}

// fail records the first error, reported at the next synchronising call.
func (b *Backend) fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

func (b *Backend) Embed(out, table model.Tensor) {
	t0 := b.begin()
	o, tab := ft(out), ft(table)
	for _, id := range b.batch.Tokens {
		if id < 0 || int(id) >= tab.shape[0] {
			b.fail(fmt.Errorf("token id %d outside the vocabulary (%d)", id, tab.shape[0]))
			return
		}
	}
	t := &b.rowT
	*t = rowTask{kind: rowEmbed, rows: len(b.batch.Tokens), out: o.f, x: tab.f, ids: b.batch.Tokens, cols: tab.cols()}
	b.runRows(t, t.cols)
	b.end("cpu_embedding", t0)
}

func (b *Backend) RMSNorm(out, x, w model.Tensor, rows int, eps float32) {
	t0 := b.begin()
	t := &b.rowT
	*t = rowTask{kind: rowRMSNorm, rows: rows, out: ft(out).f, x: ft(x).f, w: ft(w).f, cols: ft(x).cols(), eps: eps}
	b.runRows(t, 2*t.cols)
	b.end("cpu_rmsnorm", t0)
}

func (b *Backend) AddRMSNorm(residual, delta, w, out model.Tensor, rows int, eps float32) {
	t0 := b.begin()
	t := &b.rowT
	*t = rowTask{kind: rowAddRMSNorm, rows: rows, res: ft(residual).f, x: ft(delta).f, w: ft(w).f, out: ft(out).f,
		cols: ft(residual).cols(), eps: eps}
	b.runRows(t, 3*t.cols)
	b.end("cpu_add_rmsnorm", t0)
}

func (b *Backend) Add(dst, src model.Tensor, rows int) {
	t0 := b.begin()
	t := &b.rowT
	*t = rowTask{kind: rowAdd, rows: rows, out: ft(dst).f, x: ft(src).f, cols: ft(dst).cols()}
	b.runRows(t, t.cols)
	b.end("cpu_add", t0)
}

func (b *Backend) SwiGLU(out, gateUp model.Tensor, rows int) {
	t0 := b.begin()
	t := &b.rowT
	*t = rowTask{kind: rowSwiGLU, rows: rows, out: ft(out).f, x: ft(gateUp).f, cols: ft(out).cols(), xcol: ft(gateUp).cols()}
	b.runRows(t, 8*t.cols)
	b.end("cpu_swiglu", t0)
}

func (b *Backend) RoPE(qkv, table model.Tensor, h model.HeadLayout) {
	t0 := b.begin()
	t := &b.rowT
	q := ft(qkv)
	*t = rowTask{kind: rowRoPE, rows: len(b.batch.Tokens), out: q.f, w: ft(table).f, pos: b.batch.Positions,
		xcol: q.cols(), hl: h}
	if tab := ft(table); len(b.batch.Positions) > 0 && int(maxPos(b.batch.Positions)) >= tab.shape[0] {
		b.fail(fmt.Errorf("position %d beyond the RoPE table (%d)", maxPos(b.batch.Positions), tab.shape[0]))
		return
	}
	b.runRows(t, 2*(h.Heads+h.KVHeads)*h.HeadDim)
	b.end("cpu_rope", t0)
}

func maxPos(p []int32) int32 {
	m := p[0]
	for _, v := range p {
		m = max(m, v)
	}
	return m
}

func (b *Backend) HeadNorm(qkv, qw, kw model.Tensor, h model.HeadLayout, eps float32) {
	t0 := b.begin()
	t := &b.rowT
	q := ft(qkv)
	*t = rowTask{kind: rowHeadNorm, rows: len(b.batch.Tokens), out: q.f, w: ft(qw).f, w2: ft(kw).f,
		xcol: q.cols(), hl: h, eps: eps}
	b.runRows(t, 3*(h.Heads+h.KVHeads)*h.HeadDim)
	b.end("cpu_qk_norm", t0)
}

func (b *Backend) GatherRows(out, x model.Tensor) {
	t0 := b.begin()
	t := &b.rowT
	*t = rowTask{kind: rowGather, rows: len(b.batch.LogitRows), out: ft(out).f, x: ft(x).f, ids: b.batch.LogitRows, cols: ft(x).cols()}
	b.runRows(t, t.cols)
	b.end("cpu_gather_rows", t0)
}

// MatMul is the gemm_plugin GEMM.
func (b *Backend) MatMul(out, x, w model.Tensor, rows int) {
	t0 := b.begin()
	o, xi, wt := ft(out), ft(x), ft(w)
	n, k := wt.shape[0], wt.shape[1]
	if xi.cols() != k || o.cols() != n {
		b.fail(fmt.Errorf("matmul %s: x has %d columns, out %d, weight is %v", wt.name, xi.cols(), o.cols(), wt.shape))
		return
	}
	var pw *packed
	if wt.pk != nil {
		pw = wt.pk[0]
	}
	if wt.q != nil {
		xq, sx := b.fp8.quantizeInput(xi.f, rows, k, wt.q)
		b.gemm(o.f, n, xq, k, rows, n, k, wt.f, pw)
		scaleOutput(o.f, n, rows, n, sx, wt.q.scale)
		if b.prof.on {
			b.end("cpu_fp8_"+b.gemmName(), t0)
		}
		return
	}
	b.gemm(o.f, n, xi.f, k, rows, n, k, wt.f, pw)
	b.end(b.gemmName(), t0)
}

// Attention: keys and values of the batch go into the cache, then every
// token attends to its sequence's positions 0..pos. Work items are (sequence,
// KV head, block of tokens); an item gathers the queries of its tokens ×
// the GQA group of heads sharing the KV head into rows, computes scores for
// all rows with the GEMM micro-kernel (K is stored in panels), takes a
// causal softmax per row, and multiplies by V with the micro-kernel again.
type attnItem struct {
	seq, head int32
	t0, t1    int32 // batch rows
}

type attnTask struct {
	items   []attnItem
	out     []float32
	qkv     []float32
	cache   *kvCache
	layer   int
	batch   *model.Batch
	pos     []int32
	scratch []attnScratch
	scale   float32
	hl      model.HeadLayout
	qkvCols int
}

// attnBlock is how many tokens of one sequence an item takes: up to 16,
// fewer when long contexts would make the score scratch large.
func attnBlock(h model.HeadLayout, pad int) int {
	g := h.Heads / h.KVHeads
	return max(1, min(16, (1<<20)/(g*pad)))
}

func (b *Backend) Attention(out, qkv model.Tensor, cache model.KVCache, layer int) {
	t0 := b.begin()
	c := cache.(*kvCache)
	hl := c.c.HeadLayout
	q := ft(qkv)
	W, D := q.cols(), hl.HeadDim
	bt := b.batch
	for _, s := range bt.Seqs {
		if c.c.Paged() && int(s.Past+s.Len) > int(s.NBlocks)*c.unit {
			b.fail(fmt.Errorf("attention: slot %d has %d KV blocks for %d positions", s.Slot, s.NBlocks, s.Past+s.Len))
			return
		}
		for _, blk := range bt.SeqBlocks(s) {
			if blk < 0 || int(blk) >= c.units {
				b.fail(fmt.Errorf("attention: KV block %d outside the pool of %d", blk, c.units))
				return
			}
		}
	}
	for i, slot := range b.tokSlot {
		p := int(bt.Positions[i])
		if p >= c.c.Capacity || int(slot) >= c.c.Slots {
			b.fail(fmt.Errorf("attention: slot %d position %d outside the KV cache (%d slots x %d)", slot, p, c.c.Slots, c.c.Capacity))
			return
		}
		unit, off := c.locate(slot, bt.SeqBlocks(bt.Seqs[b.tokSeq[i]]), p)
		row := q.f[i*W : (i+1)*W]
		for h := range hl.KVHeads {
			base := c.at(layer, unit, h)
			ko, vo := base+(off/nr)*D*nr+off%nr, base+off*D
			k, v := row[(hl.Heads+h)*D:(hl.Heads+h+1)*D], row[(hl.Heads+hl.KVHeads+h)*D:(hl.Heads+hl.KVHeads+h+1)*D]
			if c.c.FP8 {
				ki, vi := 1/c.ks[layer], 1/c.vs[layer]
				for d, x := range k {
					c.k8[ko+d*nr] = fp8.Encode(x * ki)
				}
				for d, x := range v {
					c.v8[vo+d] = fp8.Encode(x * vi)
				}
				continue
			}
			for d, x := range k {
				c.k[ko+d*nr] = x
			}
			copy(c.v[vo:vo+D], v)
		}
	}
	block := int32(attnBlock(hl, c.pad))
	items := b.items[:0]
	for si, s := range bt.Seqs {
		for h := range hl.KVHeads {
			for r := s.Start; r < s.Start+s.Len; r += block {
				items = append(items, attnItem{seq: int32(si), head: int32(h), t0: r, t1: min(r+block, s.Start+s.Len)})
			}
		}
	}
	b.items = items
	t := &b.attnT
	*t = attnTask{items: items, out: ft(out).f, qkv: q.f, cache: c, layer: layer, batch: bt, pos: bt.Positions,
		scratch: b.attn, scale: float32(1 / math.Sqrt(float64(D))), hl: hl, qkvCols: W}
	b.pool.run(t, len(items))
	b.end("cpu_attention", t0)
}

func (t *attnTask) run(c, w int) {
	it := t.items[c]
	hl := t.hl
	D, G := hl.HeadDim, hl.Heads/hl.KVHeads
	a := &t.scratch[w]
	rows := int(it.t1-it.t0) * G
	// Row r is token t0 + r/G, query head head*G + r%G.
	for r := range rows {
		tok, qh := int(it.t0)+r/G, int(it.head)*G+r%G
		copy(a.q[r*D:(r+1)*D], t.qkv[tok*t.qkvCols+qh*D:])
	}
	nMax := int(t.pos[it.t1-1]) + 1 // positions increase within a sequence
	pad := (nMax + nr - 1) / nr * nr
	K, V := t.keysValues(it, a, nMax, pad)
	sc := a.s[:rows*pad]
	for p0 := 0; p0 < nMax; p0 += nr {
		panel := K[(p0/nr)*D*nr:]
		for r0 := 0; r0 < rows; r0 += mr {
			microKernel(min(mr, rows-r0), D, a.q[r0*D:], D, panel, nr, sc[r0*pad+p0:], pad)
		}
	}
	for r := range rows {
		n := int(t.pos[int(it.t0)+r/G]) + 1
		row := sc[r*pad : r*pad+n]
		mx := maxOf(row)
		a.sum[r] = expSum(row, t.scale, -mx*t.scale)
		clear(sc[r*pad+n : r*pad+nMax]) // later positions get no weight
	}
	o := a.o[:rows*D]
	if D%nr == 0 {
		for d0 := 0; d0 < D; d0 += nr {
			for r0 := 0; r0 < rows; r0 += mr {
				microKernel(min(mr, rows-r0), nMax, sc[r0*pad:], pad, V[d0:], D, o[r0*D+d0:], D)
			}
		}
	} else {
		for r := range rows {
			or := o[r*D : (r+1)*D]
			clear(or)
			for j, e := range sc[r*pad : r*pad+nMax] {
				axpy(e, V[j*D:(j+1)*D], or)
			}
		}
	}
	outCols := hl.Heads * D
	for r := range rows {
		tok, qh := int(it.t0)+r/G, int(it.head)*G+r%G
		inv := 1 / a.sum[r]
		dst := t.out[tok*outCols+qh*D : tok*outCols+(qh+1)*D]
		for i, v := range o[r*D : (r+1)*D] {
			dst[i] = v * inv
		}
	}
}

// keysValues are the K panels and V rows of item it's sequence and KV
// head for positions 0..nMax (pad rounds nMax up to a panel): the slot
// itself, or gathered from its blocks and dequantized into a's scratch.
func (t *attnTask) keysValues(it attnItem, a *attnScratch, nMax, pad int) (K, V []float32) {
	kc := t.cache
	D := t.hl.HeadDim
	s := t.batch.Seqs[it.seq]
	if kc.direct() {
		base := kc.at(t.layer, int(s.Slot), int(it.head))
		return kc.k[base : base+kc.pad*D], kc.v[base : base+kc.pad*D]
	}
	blocks := t.batch.SeqBlocks(s)
	K, V = a.kg[:pad*D], a.vg[:nMax*D]
	var ks, vs float32
	if kc.c.FP8 {
		ks, vs = kc.ks[t.layer], kc.vs[t.layer]
	}
	// Whole panels of 16 positions: a block holds whole panels.
	for p0 := 0; p0 < nMax; p0 += nr {
		unit, off := kc.locate(s.Slot, blocks, p0)
		src := kc.at(t.layer, unit, int(it.head)) + (off/nr)*D*nr
		dst := K[(p0/nr)*D*nr : (p0/nr+1)*D*nr]
		if kc.c.FP8 {
			fp8.Dequantize(dst, kc.k8[src:src+D*nr], ks)
		} else {
			copy(dst, kc.k[src:])
		}
	}
	for p := 0; p < nMax; {
		unit, off := kc.locate(s.Slot, blocks, p)
		n := min(kc.unit-off, nMax-p)
		src := kc.at(t.layer, unit, int(it.head)) + off*D
		if kc.c.FP8 {
			fp8.Dequantize(V[p*D:(p+n)*D], kc.v8[src:src+n*D], vs)
		} else {
			copy(V[p*D:(p+n)*D], kc.v[src:src+n*D])
		}
		p += n
	}
	return K, V
}

// Argmax reads back the greedy token of each row.
func (b *Backend) Argmax(dst []int32, logits model.Tensor, rows int) error {
	t0 := b.begin()
	if err := b.takeErr(); err != nil {
		return err
	}
	l := ft(logits)
	t := &b.argmaxT
	*t = argmaxTask{dst: dst, x: l.f, cols: l.cols(), rows: rows}
	chunks := b.pool.split(rows, t.cols, minRowWork)
	t.per = (rows + chunks - 1) / max(chunks, 1)
	if rows > 0 {
		b.pool.run(t, (rows+t.per-1)/t.per)
	}
	b.end("cpu_argmax", t0)
	return nil
}

// ArgmaxStart makes the picks at once (ops run when called) and keeps them
// for ArgmaxWait and for the next batch's fed tokens (model.Pipeliner).
func (b *Backend) ArgmaxStart(logits model.Tensor, rows int) (int, error) {
	p := &b.pipe
	t, err := p.Next()
	if err != nil {
		return 0, err
	}
	buf := p.picks[t%2]
	if cap(buf) < rows {
		buf = make([]int32, rows)
	}
	buf = buf[:rows]
	if err := b.Argmax(buf, logits, rows); err != nil {
		return 0, err
	}
	p.picks[t%2] = buf
	p.Started(rows)
	return t, nil
}

// ArgmaxWait copies ticket's picks, the oldest outstanding, into dst.
func (b *Backend) ArgmaxWait(ticket int, dst []int32) error {
	slot, err := b.pipe.Wait(ticket, len(dst))
	if err != nil {
		return err
	}
	copy(dst, b.pipe.picks[slot])
	return nil
}

type argmaxTask struct {
	dst             []int32
	x               []float32
	cols, rows, per int
}

func (t *argmaxTask) run(c, _ int) {
	for r := c * t.per; r < min((c+1)*t.per, t.rows); r++ {
		t.dst[r] = int32(argmaxRow(t.x[r*t.cols : (r+1)*t.cols]))
	}
}

// argmaxRow is the index of the largest value, the lowest on ties; NaN
// never wins.
func argmaxRow(x []float32) int {
	best, bi := float32(math.Inf(-1)), 0
	for i, v := range x {
		if v > best {
			best, bi = v, i
		}
	}
	return bi
}
