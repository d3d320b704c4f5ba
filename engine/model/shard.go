package model

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Tensor and expert parallelism: a model split over ranks, each rank a
// Model on its own backend holding a slice of every weight, the ranks
// running the same batch in lockstep and exchanging partial results
// through Collectives.
//
// Tensor parallelism is Megatron-LM's (and TensorRT-LLM's): over the TP
// group, the QKV and gate/up GEMMs are split by output columns
// (column-parallel: each rank its heads/tp query heads with their KV
// heads, its FFN/tp intermediate columns), the o and down GEMMs by input
// columns (row-parallel: each rank a partial sum of the full output),
// followed by one all-reduce; the LM head is split by vocabulary and its
// logits all-gathered, so every rank picks the same greedy token with the
// backend's own argmax (ties to the lowest id, as unsplit). Where a model
// has fewer KV heads than ranks, each KV head is replicated on the
// tp/kv_heads ranks whose query heads read it, as TensorRT-LLM does. The
// embedding, the norms and the MoE router are replicated.
//
// Expert parallelism splits MoE layers over the EP group (every rank):
// ranks are moe_tp consecutive ranks per expert group; an expert group
// holds experts/(size/moe_tp) whole experts, and within it each rank holds
// FFN/moe_tp of each expert's intermediate columns (TensorRT-LLM's
// moe_tp_size). Every rank routes every token identically (the same
// router, the same hidden state), computes its experts' share of the
// tokens routed to them, and one all-reduce combines the shares. That is
// the plain correct dispatch and combine: TensorRT-LLM's all-to-all sends
// each token only to the ranks holding its experts, an optimisation of
// communication volume with the same result, left for the GPU backend.
//
// Random weights are the full tensor's values at the slice's coordinates
// (RandomValue is counter-based), and checkpoint tensors are read whole
// and sliced, so a split model multiplies exactly the unsplit model's
// weights: its tokens are the unsplit model's, its logits equal up to the
// rounding of the partial sums' order.

// Parallel places a model as one rank of a split model.
type Parallel struct {
	// TP is the tensor-parallel group: attention heads, dense MLP width
	// and the vocabulary are split over its ranks. nil or of size 1: not
	// split, e.g. attention replicated on every rank of an EP group.
	TP Collective
	// EP is the group MoE layers are split over (nil: each rank runs
	// every expert in full, as unsplit).
	EP Collective
	// MoETP is how many consecutive ranks of EP split each expert's
	// intermediate width (TensorRT-LLM's moe_tp_size; 0 means 1); EP's
	// size / MoETP expert groups hold the experts.
	MoETP int
}

// ErrNoExpertShard is a backend without ExpertShard asked to split experts.
var ErrNoExpertShard = errors.New("the backend cannot run a slice of a MoE layer's experts (expert parallelism)")

// ExpertShard is implemented by backends that can run part of a MoE
// layer's experts (the CPU's): expert parallelism needs it.
type ExpertShard interface {
	// MoEShard is MoE over experts first .. first+E-1 only (E = gateUp's
	// experts, gateUp[e] being expert first+e): idx holds the router's
	// global expert ids, and slots routed to other experts add nothing.
	MoEShard(out, x, idx, weights, gateUp, down Tensor, rows, k, first int)
}

// ShardError is a split a model's shape does not allow; Param names the
// parameter to blame (tp or ep).
type ShardError struct {
	Param string
	Msg   string
}

func (e *ShardError) Error() string { return e.Param + ": " + e.Msg }

// CheckShard reports whether cfg can be split tp ways (attention, dense
// MLPs, vocabulary) with its experts in ep groups of moeTP ranks each:
// every size split must divide evenly.
func CheckShard(cfg Config, tp, ep, moeTP int) error {
	bad := func(param, format string, a ...any) error {
		return &ShardError{Param: param, Msg: fmt.Sprintf(format, a...)}
	}
	name := cfg.Name
	if tp < 1 || ep < 1 || moeTP < 1 {
		return bad("tp", "parallel sizes must be positive (tp %d, ep %d, moe_tp %d)", tp, ep, moeTP)
	}
	if tp*ep*moeTP == 1 {
		return nil
	}
	switch {
	case cfg.MLA() || cfg.SharedExperts > 0 || cfg.DenseLayers > 0:
		p := "tp"
		if tp == 1 {
			p = "ep"
		}
		return bad(p, "model %s has the DeepSeek-V3 architecture (multi-head latent attention, shared experts), which cannot be split yet; expected tp 1 and ep 1", name)
	case cfg.IsOSS():
		return bad(map[bool]string{true: "tp", false: "ep"}[tp > 1], "model %s has GPT-OSS's attention sinks, biases or clamped SwiGLU, which cannot be split yet; expected tp 1 and ep 1", name)
	case cfg.Heads%tp != 0:
		return bad("tp", "model %s has %d attention heads (num_attention_heads), not a multiple of tp %d", name, cfg.Heads, tp)
	case cfg.KVHeads%tp != 0 && tp%cfg.KVHeads != 0:
		return bad("tp", "model %s has %d KV heads (num_key_value_heads): tp %d must divide them or be a multiple of them", name, cfg.KVHeads, tp)
	case cfg.MoELayers() < cfg.Layers && cfg.DenseWidth()%tp != 0:
		return bad("tp", "model %s has an MLP width (intermediate_size) of %d, not a multiple of tp %d", name, cfg.DenseWidth(), tp)
	case cfg.Vocab%tp != 0:
		return bad("tp", "model %s has a vocabulary (vocab_size) of %d, not a multiple of tp %d", name, cfg.Vocab, tp)
	case !cfg.MoE() && ep > 1:
		return bad("ep", "model %s is dense: expert parallelism needs a MoE model; expected ep 1", name)
	case cfg.MoE() && cfg.Experts%ep != 0:
		return bad("ep", "model %s has %d experts (num_experts), not a multiple of ep %d", name, cfg.Experts, ep)
	case cfg.MoE() && cfg.FFN%moeTP != 0:
		return bad("tp", "model %s has an expert width (intermediate_size) of %d, not a multiple of the %d ranks splitting each expert (tp / ep)", name, cfg.FFN, moeTP)
	}
	return nil
}

// shardPlan is one rank's slice of the model.
type shardPlan struct {
	p    Parallel
	full HeadLayout // the unsplit model's
	// Attention and dense MLPs: TP size and rank, this rank's query heads
	// and KV heads (the first one's global index), dense width, vocabulary.
	tp, tr                 int
	heads, kvHeads, kvHead int
	ffn, vocab             int
	// MoE: expert groups, this rank's group, its experts (the first
	// global id), moe_tp size and rank, each expert's width here.
	groups, group, experts, first int
	moeTP, mr, moeFFN             int

	logits Tensor // this rank's logits [MaxLogitRows, vocab] before the gather
}

func size(c Collective) int {
	if c == nil {
		return 1
	}
	return c.Size()
}

func rank(c Collective) int {
	if c == nil {
		return 0
	}
	return c.Rank()
}

// newShardPlan is p's slice of cfg, or nil when p splits nothing.
func newShardPlan(cfg Config, p Parallel) (*shardPlan, error) {
	tp, moe := size(p.TP), size(p.EP)
	if p.MoETP <= 0 || !cfg.MoE() {
		p.MoETP = 1
	}
	if tp == 1 && moe == 1 {
		return nil, nil
	}
	if moe%p.MoETP != 0 {
		return nil, &ShardError{Param: "ep", Msg: fmt.Sprintf("%d ranks do not split into expert groups of %d", moe, p.MoETP)}
	}
	if !cfg.MoE() && moe > 1 {
		return nil, &ShardError{Param: "ep", Msg: fmt.Sprintf("model %s is dense: expert parallelism needs a MoE model", cfg.Name)}
	}
	if err := CheckShard(cfg, tp, moe/p.MoETP, p.MoETP); err != nil {
		return nil, err
	}
	s := &shardPlan{p: p, full: cfg.HeadLayout(), tp: tp, tr: rank(p.TP), heads: cfg.Heads / tp, ffn: cfg.DenseWidth() / tp, vocab: cfg.Vocab / tp,
		groups: moe / p.MoETP, moeTP: p.MoETP, experts: cfg.Experts, moeFFN: cfg.FFN}
	s.kvHeads = max(cfg.KVHeads/tp, 1)
	// This rank's first KV head: the one its first query head reads (a KV
	// head's query heads are consecutive).
	s.kvHead = s.tr * s.heads / (cfg.Heads / cfg.KVHeads)
	if cfg.MoE() {
		r := rank(p.EP)
		s.group, s.mr = r/p.MoETP, r%p.MoETP
		s.experts = cfg.Experts / s.groups
		s.first = s.group * s.experts
		s.moeFFN = cfg.FFN / p.MoETP
	}
	return s, nil
}

// local is the shape this rank computes: its heads and KV heads, its MLP
// (or expert) width. The vocabulary, the experts the router picks from
// and everything else stay the full model's.
func (s *shardPlan) local(cfg Config) Config {
	if s == nil {
		return cfg
	}
	cfg.Heads, cfg.KVHeads = s.heads, s.kvHeads
	if cfg.MoE() {
		cfg.FFN = s.moeFFN
	} else {
		cfg.FFN = s.ffn
	}
	return cfg
}

// splitsExperts reports whether MoE layers are split over EP.
func (s *shardPlan) splitsExperts() bool { return s != nil && s.groups*s.moeTP > 1 }

// span is n consecutive indices from lo.
type span struct{ lo, n int }

// cut selects a slice of a [rows, cols] or [stack, rows, cols] weight:
// the stack span (Experts: whole experts), row spans concatenated, one
// column span. nil fields take everything.
type cut struct {
	stack *span
	rows  []span
	cols  *span
}

// cutFor is the slice of weight name (of kind, full shape) this rank
// holds, or nil for a weight every rank holds whole. A GEMM weight it
// does not know is an error rather than a silently unsplit weight.
func (s *shardPlan) cutFor(name string, kind WeightKind, shape []int) (*cut, error) {
	if s == nil {
		return nil, nil
	}
	tp, tr := s.tp, s.tr
	switch kind {
	case Matrix:
		switch {
		case tp == 1 || strings.HasSuffix(name, "gate.weight"):
			// Unsplit, or the MoE router, which every rank runs whole.
			return nil, nil
		case strings.HasSuffix(name, "self_attn.qkv_proj.weight"):
			return s.qkvCut(), nil
		case strings.HasSuffix(name, "self_attn.o_proj.weight"):
			w := shape[1] / tp
			return &cut{cols: &span{tr * w, w}}, nil
		case strings.HasSuffix(name, "mlp.gate_up_proj.weight"):
			f := shape[0] / 2
			w := f / tp
			return &cut{rows: []span{{tr * w, w}, {f + tr*w, w}}}, nil
		case strings.HasSuffix(name, "mlp.down_proj.weight"):
			w := shape[1] / tp
			return &cut{cols: &span{tr * w, w}}, nil
		case name == "lm_head.weight" || name == "model.embed_tokens.weight":
			return &cut{rows: []span{{tr * s.vocab, s.vocab}}}, nil
		}
	case Experts:
		if !s.splitsExperts() {
			return nil, nil
		}
		c := &cut{stack: &span{s.first, s.experts}}
		f, w := s.moeFFN*s.moeTP, s.moeFFN
		switch {
		case strings.HasSuffix(name, "gate_up_proj") || strings.HasSuffix(name, ".gate_up"):
			c.rows = []span{{s.mr * w, w}, {f + s.mr*w, w}}
			return c, nil
		case strings.HasSuffix(name, "down_proj") || strings.HasSuffix(name, ".down"):
			c.cols = &span{s.mr * w, w}
			return c, nil
		}
	default:
		return nil, nil
	}
	return nil, fmt.Errorf("weight %s: no rule to split it over ranks (tp %d, %d expert groups of %d)", name, tp, s.groups, s.moeTP)
}

// qkvCut is the rows of a fused QKV weight this rank holds: its query
// heads, then its KV heads' key rows and value rows.
func (s *shardPlan) qkvCut() *cut {
	full := s.full
	d := full.HeadDim
	return &cut{rows: []span{
		{s.tr * s.heads * d, s.heads * d},
		{(full.Heads + s.kvHead) * d, s.kvHeads * d},
		{(full.Heads + full.KVHeads + s.kvHead) * d, s.kvHeads * d},
	}}
}

// shape is the shape of the slice of a weight of shape full.
func (c *cut) shape(full []int) []int {
	out := slices.Clone(full)
	n := len(out)
	if c.stack != nil {
		out[0] = c.stack.n
	}
	if c.rows != nil {
		out[n-2] = 0
		for _, r := range c.rows {
			out[n-2] += r.n
		}
	}
	if c.cols != nil {
		out[n-1] = c.cols.n
	}
	return out
}

// each calls f(dst, src, n) for every run of n consecutive elements the
// cut takes from a weight of shape full (flat indices, row-major).
func (c *cut) each(full []int, f func(dst, src, n int)) {
	for _, r := range c.runs(full) {
		for i := range r.Rows {
			f(int(r.Dst+i*r.Cols), int(r.Src+i*r.Stride), int(r.Cols))
		}
	}
}

// apply slices a checkpoint tensor (any dtype but FP8: its scales are not
// sliced).
func (c *cut) apply(h HostTensor) HostTensor {
	es := DTypeSize(h.DType)
	out := HostTensor{Shape: c.shape(h.Shape), DType: h.DType}
	n := 1
	for _, d := range out.Shape {
		n *= d
	}
	out.Data = make([]byte, n*es)
	c.each(h.Shape, func(dst, src, k int) {
		copy(out.Data[dst*es:(dst+k)*es], h.Data[src*es:(src+k)*es])
	})
	return out
}

// runs are the blocks of the random weight of shape full that make the
// slice: one per (expert, row span), each of whole rows of the column span.
func (c *cut) runs(full []int) []RandomRun {
	n := len(full)
	R, C := full[n-2], full[n-1]
	stack := span{0, 1}
	if n == 3 {
		stack = span{0, full[0]}
	}
	if c.stack != nil {
		stack = *c.stack
	}
	rows := c.rows
	if rows == nil {
		rows = []span{{0, R}}
	}
	cols := span{0, C}
	if c.cols != nil {
		cols = *c.cols
	}
	var out []RandomRun
	dst := int64(0)
	for e := stack.lo; e < stack.lo+stack.n; e++ {
		for _, rs := range rows {
			out = append(out, RandomRun{Dst: dst, Src: int64((e*R+rs.lo)*C + cols.lo), Rows: int64(rs.n), Cols: int64(cols.n), Stride: int64(C)})
			dst += int64(rs.n * cols.n)
		}
	}
	return out
}

// random is the slice of the random weight (seed, scale) of shape full,
// made on the host.
func (c *cut) random(full []int, seed uint64, scale float32) HostTensor {
	shape := c.shape(full)
	n := 1
	for _, d := range shape {
		n *= d
	}
	v := make([]float32, n)
	RandomRuns(v, c.runs(full), seed, scale)
	return HostF32(shape, v)
}

// reduceTP sums a row-parallel GEMM's partial outputs over the TP group.
func (m *Model) reduceTP(t Tensor, rows int) {
	if s := m.shard; s != nil && s.tp > 1 {
		s.p.TP.AllReduceSum(t, rows)
	}
}

// moe runs a MoE layer's experts: all of them, or this rank's share,
// summed over the EP group.
func (m *Model) moe(ly *layer, rows int) {
	s, k := m.shard, m.cfg.TopK
	if !s.splitsExperts() {
		m.be.MoE(m.delta, m.h, m.idx, m.wts, ly.gateUp, ly.down, rows, k)
		return
	}
	if s.groups > 1 {
		m.be.(ExpertShard).MoEShard(m.delta, m.h, m.idx, m.wts, ly.gateUp, ly.down, rows, k, s.first)
	} else {
		m.be.MoE(m.delta, m.h, m.idx, m.wts, ly.gateUp, ly.down, rows, k)
	}
	s.p.EP.AllReduceSum(m.delta, rows)
}

// lmHeadRows computes the logits of the rows rows of m.g: this rank's share
// of the vocabulary, gathered from every rank.
func (m *Model) lmHeadRows(rows int) {
	s := m.shard
	if s == nil || s.tp == 1 {
		m.be.MatMul(m.logits, m.g, m.lmHead, rows)
		return
	}
	m.be.MatMul(s.logits, m.g, m.lmHead, rows)
	s.p.TP.AllGather(m.logits, s.logits, rows)
}

// syncShard reports the failures of this rank's collectives (Barrier on each
// group), after the backend's own synchronisation.
func (m *Model) syncShard(err error) error {
	s := m.shard
	if err != nil || s == nil {
		return err
	}
	for _, c := range []Collective{s.p.TP, s.p.EP} {
		if c != nil && c.Size() > 1 {
			if err := c.Barrier(); err != nil {
				return fmt.Errorf("collective: %w", err)
			}
		}
	}
	return nil
}
