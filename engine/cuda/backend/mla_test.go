//go:build cgo && linux

package backend

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/backendtest"
	"github.com/xrun-dev/xrun/engine/cpu"
	"github.com/xrun-dev/xrun/engine/model"
	"github.com/xrun-dev/xrun/engine/safetensors"
)

// The DeepSeek-V3 architecture on the GPU: the ops against the CPU backend
// (backendtest.CheckMLA), the whole model against the CPU and against
// transformers' logits, and a run through the engine.

// TestMLAConformance runs backendtest's MLA checks (attention over three
// iterations of a shared latent cache, both forms asked for; grouped
// routing learned and forced, with the counts) in float16. Not in
// bfloat16: the check feeds the oracle unrounded logits and compares the
// expert counts exactly, while bf16's rounding of 256 logits legitimately
// moves near-tied experts (the check forgives that in the expert sets, not
// in the counts); TestRouteGrouped and TestMLAKernels in engine/cuda
// cover bf16 on inputs both sides share.
func TestMLAConformance(t *testing.T) {
	needGPU(t)
	backendtest.CheckMLA(t, func() (model.Backend, error) {
		return New(model.BackendOptions{Gemm: "auto", Dtype: "float16"})
	}, 1e-2)
}

// groupSpy is routeSpy for grouped routing: a CPU backend that measures,
// per iteration, how close its learned grouped routing came to a tie (the
// k-th and (k+1)-th biased scores, and the last kept and first dropped
// group scores, as a fraction of the row's spread of biased scores).
type groupSpy struct {
	*cpu.Backend
	gap     float32
	closest []float32
	desc    []string
	first   []int // the first token row with a tie within gap, or -1
}

func newGroupSpy(t testing.TB, gap float32) *groupSpy {
	ref, err := cpu.New(model.BackendOptions{Gemm: "auto"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ref.Close() })
	return &groupSpy{Backend: ref, gap: gap}
}

func (s *groupSpy) SetBatch(b *model.Batch) error {
	s.closest, s.desc, s.first = append(s.closest, 1), append(s.desc, ""), append(s.first, -1)
	return s.Backend.SetBatch(b)
}

func (s *groupSpy) RouteGrouped(idx, weights, logits, bias, forced model.Tensor, forcedRow, rows int, r model.GroupRoute, counts model.Tensor, layer int) {
	last := len(s.closest) - 1
	if forced == nil && last >= 0 {
		E := logits.Shape()[1]
		l, b := make([]float32, rows*E), make([]float32, E)
		if s.Backend.ReadFloat32(l, logits, rows) == nil && s.Backend.ReadFloat32(b, bias, 1) == nil {
			for row := range rows {
				f := groupGap(l[row*E:(row+1)*E], b, r)
				if f < s.closest[last] {
					s.closest[last] = f
					s.desc[last] = fmt.Sprintf("layer %d token %d: grouped routing decided by %.2g%% of the spread", layer, row, 100*f)
				}
				if f <= s.gap && (s.first[last] < 0 || row < s.first[last]) {
					s.first[last] = row
				}
			}
		}
	}
	s.Backend.RouteGrouped(idx, weights, logits, bias, forced, forcedRow, rows, r, counts, layer)
}

// groupGap is the smaller of the expert and the group margins of one row,
// over the spread of its biased scores.
func groupGap(logits, bias []float32, r model.GroupRoute) float32 {
	E := len(logits)
	epg := E / r.Groups
	choice := make([]float64, E)
	for e, v := range logits {
		choice[e] = 1/(1+math.Exp(-float64(v))) + float64(bias[e])
	}
	desc := func(v []float64) []float64 {
		v = slices.Clone(v)
		sort.Sort(sort.Reverse(sort.Float64Slice(v)))
		return v
	}
	all := desc(choice)
	spread := all[0] - all[E-1]
	if spread <= 0 {
		return 0
	}
	gap := math.Inf(1)
	if r.K < E {
		gap = all[r.K-1] - all[r.K]
	}
	if r.TopKGroups < r.Groups {
		gs := make([]float64, r.Groups)
		for g := range gs {
			s := desc(choice[g*epg : (g+1)*epg])
			gs[g] = s[0]
			if epg > 1 {
				gs[g] += s[1]
			}
		}
		gs = desc(gs)
		gap = math.Min(gap, gs[r.TopKGroups-1]-gs[r.TopKGroups])
	}
	return float32(gap / spread)
}

// TestMLAMatchesCPU runs tiny-deepseek (MLA, a dense first layer, grouped
// routing, a shared expert) with random weights through the scripted
// iterations (prefill, mixed, decode padded to graph buckets: eager,
// captured, replayed), learned and perfect routing, against the CPU
// backend: logits, greedy tokens and expert counts per iteration. As in
// TestMoEMatchesCPU, logits after a near tie in the CPU's learned routing
// are reported, not compared, from there on.
func TestMLAMatchesCPU(t *testing.T) {
	needGPU(t)
	cfg, _ := engine.ZooModel("tiny-deepseek")
	sc := script(cfg.Vocab)
	for _, routing := range []model.Routing{{Mode: model.Learned}, {Mode: model.Perfect}} {
		spy := newGroupSpy(t, 0)
		mc := newMoEModel(t, spy, cfg, routing)
		var want [][]float32
		var wantCounts [][]int32
		for _, s := range sc {
			want = append(want, runStep(t, mc, s))
			c := make([]int32, cfg.Layers*cfg.Experts)
			if err := mc.ExpertCounts(c); err != nil {
				t.Fatal(err)
			}
			wantCounts = append(wantCounts, c)
		}
		for _, c := range moeConfigs {
			t.Run(fmt.Sprintf("%s/%s/%s", routing, c.dtype, c.gemm), func(t *testing.T) {
				bound := tol
				if c.dtype == "bfloat16" {
					bound = 5e-2
				}
				m := newMoEModel(t, newBackend(t, c.gemm, c.dtype), cfg, routing)
				tie, stopped := "", false
				V := cfg.Vocab
				for i, s := range sc {
					got := runStep(t, m, s)
					if tie == "" && routing.Mode == model.Learned && spy.closest[i] <= tieGap(c.dtype) {
						tie = fmt.Sprintf("iteration %d, %s", i, spy.desc[i])
					}
					what := fmt.Sprintf("iteration %d (%d sequences)", i, len(s))
					switch e := cpu.RelErr(got, want[i]); {
					case stopped:
					case tie != "" && !(e < bound):
						t.Logf("%s: relative error %.3g after a near tie in the CPU's routing (%s); not compared from here on", what, e, tie)
						stopped = true
					default:
						relErr(t, what, got, want[i], bound)
						for j := range s {
							g, w := got[j*V:(j+1)*V], want[i][j*V:(j+1)*V]
							if a, b := refArgmax(g), refArgmax(w); a != b && !nearTie(w) && !nearTie(g) {
								t.Errorf("%s: sequence %d's greedy token %d, CPU %d", what, j, a, b)
							}
						}
					}
					gc := make([]int32, cfg.Layers*cfg.Experts)
					if err := m.ExpertCounts(gc); err != nil {
						t.Fatal(err)
					}
					switch {
					case routing.Mode == model.Perfect && !slices.Equal(gc, wantCounts[i]):
						t.Errorf("%s: expert counts %v, CPU %v", what, gc, wantCounts[i])
					case routing.Mode == model.Learned:
						tokens := 0
						for _, q := range s {
							tokens += len(q.toks)
						}
						for l := range cfg.Layers {
							sum := int32(0)
							for _, n := range gc[l*cfg.Experts : (l+1)*cfg.Experts] {
								sum += n
							}
							want := int32(tokens * cfg.TopK)
							if !cfg.MoELayer(l) {
								want = 0
							}
							if sum != want {
								t.Errorf("%s: layer %d routed %d pairs, want %d", what, l, sum, want)
							}
						}
					}
				}
			})
		}
	}
}

// TestGoldenHFDeepSeek checks the GPU against transformers' float32 logits
// of tiny-deepseek-v3 (MLA with q compression, YaRN with its mscale,
// interleaved rotation, grouped routing with its correction bias, a
// shared expert, a dense first layer), as TestGoldenHF does the others:
// the prompt's logits in one prefill and token by token through the cache
// and the decode graphs, and the greedy tokens, up to a near tie (the
// GPU's own top two logits, or the reference's grouped routing).
func TestGoldenHFDeepSeek(t *testing.T) {
	needGPU(t)
	dir := filepath.Join("..", "..", "testdata", "hf", "tiny-deepseek-v3")
	cases := backendtest.ReadGolden(t, dir)
	cfg, err := engine.LoadHFConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	src, err := safetensors.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	// Where the reference's routing nearly ties, on the whole sequence.
	ties := make([]int, len(cases))
	for ci, c := range cases {
		spy := newGroupSpy(t, tieGap("float16"))
		seq := append(slices.Clone(c.Input), c.Greedy...)
		m, err := model.New(spy, cfg, model.Options{Weights: src})
		if err == nil {
			err = m.Reserve(model.Capacity{MaxTokens: len(seq), MaxLogitRows: 1, Slots: 1, MaxLen: len(seq)})
		}
		var b model.Batch
		b.Add(0, 0, seq, true)
		if err == nil {
			err = m.Forward(&b)
		}
		if err != nil {
			t.Fatal(err)
		}
		ties[ci] = spy.first[0]
		if ties[ci] >= 0 {
			t.Logf("case %d: near tie in the reference's routing at position %d: %s", ci, ties[ci], spy.desc[0])
		}
	}
	for _, gemm := range []string{"auto", "disable"} {
		t.Run(gemm, func(t *testing.T) {
			m := newModel(t, newBackend(t, gemm, "float16"), cfg, src)
			V := cfg.Vocab
			for ci, c := range cases {
				tiePos := ties[ci]
				compare := func(what string, got []float32) {
					n := len(got) / V
					if tiePos >= 0 && tiePos < n {
						n = tiePos
						t.Logf("%s: rows from %d on not compared (near tie in the routing)", what, n)
					}
					if n > 0 {
						relErr(t, what, got[:n*V], c.Logits[:n*V], 1e-2)
					}
				}
				var b model.Batch
				start := b.Add(ci, 0, c.Input, false)
				b.LogitRows = b.LogitRows[:0]
				for i := range c.Input {
					b.LogitRows = append(b.LogitRows, int32(start+i))
				}
				if err := m.Forward(&b); err != nil {
					t.Fatal(err)
				}
				logits := make([]float32, len(c.Input)*V)
				if err := m.ReadLogits(logits); err != nil {
					t.Fatal(err)
				}
				compare(fmt.Sprintf("case %d prefill logits", ci), logits)
				seq := slices.Clone(c.Input)
				var rows []float32
				one := make([]float32, V)
				next := make([]int32, 1)
				for pos := 0; pos < len(c.Input)+len(c.Greedy)-1; pos++ {
					b.Reset()
					b.Add(4+ci, pos, seq[pos:pos+1], true)
					if err := m.Forward(&b); err != nil {
						t.Fatal(err)
					}
					if err := m.ReadLogits(one); err != nil {
						t.Fatal(err)
					}
					if err := m.Argmax(next); err != nil {
						t.Fatal(err)
					}
					if pos < len(c.Input) {
						rows = append(rows, one...)
					}
					if pos < len(c.Input)-1 {
						continue
					}
					k := len(seq) - len(c.Input)
					if next[0] != c.Greedy[k] {
						if nearTie(one) || tiePos >= 0 && tiePos <= pos {
							t.Logf("case %d: greedy token %d differs (%d, reference %d) at a near tie; stopping there", ci, k, next[0], c.Greedy[k])
						} else {
							t.Errorf("case %d: greedy token %d is %d, reference %d (tokens so far %v, reference %v)", ci, k, next[0], c.Greedy[k], seq[len(c.Input):], c.Greedy)
						}
						break
					}
					seq = append(seq, next[0])
				}
				compare(fmt.Sprintf("case %d token-by-token logits", ci), rows)
			}
		})
	}
}

// TestMLAEngineRun serves a dataset of tiny-deepseek through engine.New /
// Run on the cuda backend (no refusal any more), under learned, perfect
// and uniform routing (forced tables, their window moving under graph
// replay), and checks the run's shape and its expert load.
func TestMLAEngineRun(t *testing.T) {
	needGPU(t)
	for _, mode := range []string{"learned", "perfect", "uniform"} {
		t.Run(mode, func(t *testing.T) {
			e, reqs, res := serveSmall(t, engine.Config{Model: "tiny-deepseek", Backend: "cuda", BatchSize: 8, Warmup: 2,
				Dtype: "bfloat16", RoutingMode: mode})
			if len(res.Requests) != len(reqs) {
				t.Fatalf("%d requests served, want %d", len(res.Requests), len(reqs))
			}
			for i, r := range res.Requests {
				if len(r.OutputIDs) != reqs[i].OutputTokens {
					t.Errorf("request %d: %d tokens, want %d", i, len(r.OutputIDs), reqs[i].OutputTokens)
				}
				for _, id := range r.OutputIDs {
					if id < 0 || int(id) >= e.Model().Vocab {
						t.Fatalf("request %d: token %d outside the vocabulary", i, id)
					}
				}
			}
			if l := res.ExpertLoad; l == nil || l.DenseLayers != 1 || l.Experts != 16 {
				t.Errorf("expert load %+v", l)
			}
			t.Logf("%s, %s routing: %.0f output tok/s", e.Backend(), mode, res.Metrics["system_output_throughput_tok_s"])
		})
	}
}

// TestMLACacheBudget: the latent cache takes (slots + 1) x capacity x
// layers x (kv_lora_rank + rope) elements, MemoryPlan reports that, and
// MaxKVSlots is exactly the largest cache NewKVCache accepts under the
// budget.
func TestMLACacheBudget(t *testing.T) {
	needGPU(t)
	c := model.KVConfig{Layers: 3, Capacity: 100, HeadLayout: model.HeadLayout{Heads: 128}, Latent: 512, RopeDim: 64}
	per := int64(c.Layers*c.Capacity*(c.Latent+c.RopeDim)) * 2
	be, err := New(model.BackendOptions{Dtype: "bfloat16", KVCacheBytes: 10*per + per/2})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	n := be.(model.KVBudget).MaxKVSlots(c)
	if n != 9 { // 10 slots' worth: 9 and the scratch slot
		t.Errorf("MaxKVSlots %d, want 9", n)
	}
	c.Slots = n
	if _, err := be.NewKVCache(c); err != nil {
		t.Fatalf("%d slots: %v", n, err)
	}
	b, ok := asBackend(be) // paging on wraps the Backend
	if !ok {
		t.Fatalf("backend %T", be)
	}
	if _, _, kv := b.MemoryPlan(); kv != int64(n+1)*per {
		t.Errorf("MemoryPlan: %d bytes of KV cache, want %d", kv, int64(n+1)*per)
	}
	c.Slots = n + 1
	if _, err := be.NewKVCache(c); err == nil {
		t.Errorf("%d slots: over the budget, and no error", n+1)
	}
}

// TestMLALongPrefill: a prefill of 340 rows (many token tiles of the
// attention kernel, two sequences) gives every row's logits, and a decode
// step after it, as the CPU does. Perfect routing keeps the comparison
// free of routing ties.
func TestMLALongPrefill(t *testing.T) {
	needGPU(t)
	cfg, _ := engine.ZooModel("tiny-deepseek")
	capa := model.Capacity{MaxTokens: 400, MaxLogitRows: 400, Slots: 2, MaxLen: 400}
	newM := func(be model.Backend) *model.Model {
		m, err := model.New(be, cfg, model.Options{Seed: 7, Routing: model.Routing{Mode: model.Perfect}})
		if err == nil {
			err = m.Reserve(capa)
		}
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	ref := newGroupSpy(t, 0)
	mc, mg := newM(ref), newM(newBackend(t, "auto", "float16"))
	prompt := func(seed, n int) []int32 {
		v := make([]int32, n)
		for i := range v {
			v[i] = int32((seed*7919 + i*104729) % cfg.Vocab)
		}
		return v
	}
	run := func(m *model.Model, b *model.Batch) []float32 {
		if err := m.Forward(b); err != nil {
			t.Fatal(err)
		}
		out := make([]float32, len(b.LogitRows)*cfg.Vocab)
		if err := m.ReadLogits(out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	var b model.Batch
	b.Add(0, 0, prompt(1, 300), false)
	b.Add(1, 0, prompt(2, 40), false)
	b.LogitRows = b.LogitRows[:0]
	for i := range b.NumTokens() {
		b.LogitRows = append(b.LogitRows, int32(i))
	}
	relErr(t, "prefill of 300 + 40 rows", run(mg, &b), run(mc, &b), tol)
	b.Reset()
	b.Add(0, 300, prompt(3, 1), true)
	b.Add(1, 40, prompt(4, 1), true)
	relErr(t, "decode after it", run(mg, &b), run(mc, &b), tol)
}
