//go:build cgo && linux

package backend

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/xrun-dev/xrun/datasets"
	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/backendtest"
	"github.com/xrun-dev/xrun/engine/cpu"
	"github.com/xrun-dev/xrun/engine/model"
)

var moeConfigs = []struct{ dtype, gemm string }{
	{"float16", "auto"}, {"float16", "disable"}, {"bfloat16", "auto"}, {"bfloat16", "disable"},
}

func candidate(gemm, dtype string) backendtest.NewBackend {
	return func() (model.Backend, error) { return New(model.BackendOptions{Gemm: gemm, Dtype: dtype}) }
}

// TestConformance runs engine/backendtest's op-by-op comparison with the
// CPU backend (route_moe covers every routing method, the counts, the
// forced path and the expert layer) on both dtypes and GEMM paths.
func TestConformance(t *testing.T) {
	needGPU(t)
	for _, c := range moeConfigs {
		t.Run(c.dtype+"/"+c.gemm, func(t *testing.T) { backendtest.Check(t, candidate(c.gemm, c.dtype), 1e-2) })
	}
}

// TestMoEModelCheck runs the MoE zoo model and the tiny Mixtral's shapes
// (random weights) through backendtest.CheckModel: a prefill batch and a
// mixed batch, logits against the CPU backend's.
func TestMoEModelCheck(t *testing.T) {
	needGPU(t)
	mixtral, err := engine.LoadHFConfig(filepath.Join("..", "..", "testdata", "hf", "tiny-mixtral"))
	if err != nil {
		t.Fatal(err)
	}
	moe, _ := engine.ZooModel("tiny-moe")
	for _, cfg := range []model.Config{moe, mixtral} {
		for _, c := range moeConfigs {
			t.Run(fmt.Sprintf("%s/%s/%s", cfg.Name, c.dtype, c.gemm), func(t *testing.T) {
				bound := tol
				if c.dtype == "bfloat16" {
					bound = 5e-2
				}
				backendtest.CheckModel(t, candidate(c.gemm, c.dtype), cfg, bound)
			})
		}
	}
}

func newMoEModel(t testing.TB, be model.Backend, cfg model.Config, r model.Routing) *model.Model {
	t.Helper()
	m, err := model.New(be, cfg, model.Options{Seed: 7, Routing: r})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Reserve(model.Capacity{MaxTokens: 256, MaxLogitRows: 64, Slots: 8, MaxLen: 128}); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestMoEMatchesCPU runs tiny-moe through the scripted iterations (prefill,
// mixed, then decode padded to graph buckets: eager, captured, replayed)
// with learned and perfect routing, against the CPU backend: logits per
// iteration, and the expert counts of every layer. Perfect routing's counts
// must be identical (padding rows are not counted); learned routing's must
// route every real token k times.
func TestMoEMatchesCPU(t *testing.T) {
	needGPU(t)
	cfg, _ := engine.ZooModel("tiny-moe")
	sc := script(cfg.Vocab)
	for _, routing := range []model.Routing{{Mode: model.Learned}, {Mode: model.Perfect}} {
		ref, err := cpu.New(model.BackendOptions{Gemm: "auto"})
		if err != nil {
			t.Fatal(err)
		}
		defer ref.Close()
		mc := newMoEModel(t, ref, cfg, routing)
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
				for i, s := range sc {
					got := runStep(t, m, s)
					relErr(t, fmt.Sprintf("iteration %d (%d sequences)", i, len(s)), got, want[i], bound)
					gc := make([]int32, cfg.Layers*cfg.Experts)
					if err := m.ExpertCounts(gc); err != nil {
						t.Fatal(err)
					}
					tokens := s.tokens()
					for l := range cfg.Layers {
						row := gc[l*cfg.Experts : (l+1)*cfg.Experts]
						if sum := sum32(row); int(sum) != tokens*cfg.TopK {
							t.Errorf("iteration %d layer %d: %d routed (%v), want %d", i, l, sum, row, tokens*cfg.TopK)
						}
					}
					if routing.Mode == model.Perfect && !slices.Equal(gc, wantCounts[i]) {
						t.Errorf("iteration %d: counts %v, CPU %v", i, gc, wantCounts[i])
					}
				}
			})
		}
	}
}

// TestMoERandomRoutingGraphs: uniform and zipf routing through decode
// graphs. Every iteration routes each real token k times, and replays of a
// captured iteration do not repeat one window (the drift cell moves it).
func TestMoERandomRoutingGraphs(t *testing.T) {
	needGPU(t)
	cfg, _ := engine.ZooModel("tiny-moe")
	for _, routing := range []model.Routing{{Mode: model.Uniform}, {Mode: model.Zipf, S: 1.5}} {
		t.Run(routing.String(), func(t *testing.T) {
			m := newMoEModel(t, newBackend(t, "disable", "float16"), cfg, routing)
			var decode [][]int32
			for i, s := range script(cfg.Vocab) {
				out := runStep(t, m, s)
				if _, err := nanAt(out); err != nil {
					t.Fatalf("iteration %d: %v", i, err)
				}
				gc := make([]int32, cfg.Layers*cfg.Experts)
				if err := m.ExpertCounts(gc); err != nil {
					t.Fatal(err)
				}
				tokens := s.tokens()
				if sum := sum32(gc); int(sum) != cfg.Layers*tokens*cfg.TopK {
					t.Errorf("iteration %d: %d routed, want %d", i, sum, cfg.Layers*tokens*cfg.TopK)
				}
				if len(s) == 5 && tokens == 5 { // the bucket-8 decode iterations
					decode = append(decode, gc)
				}
			}
			same := 0
			for i := 1; i < len(decode); i++ {
				if slices.Equal(decode[i], decode[i-1]) {
					same++
				}
			}
			if len(decode) < 3 || same == len(decode)-1 {
				t.Errorf("decode iterations' counts %v: the random windows do not move", decode)
			}
		})
	}
}

func (s step) tokens() int {
	n := 0
	for _, q := range s {
		n += len(q.toks)
	}
	return n
}

func sum32(v []int32) int32 {
	var s int32
	for _, x := range v {
		s += x
	}
	return s
}

func nanAt(v []float32) (int, error) {
	for i, x := range v {
		if x != x {
			return i, fmt.Errorf("logit %d is NaN", i)
		}
	}
	return 0, nil
}

// TestMoEPerfectLoad serves requests through engine.New / Run on the GPU
// (decode graphs included) with each routing mode: every iteration routes
// each token k times, and perfect routing's max/mean load is exactly 1
// wherever tokens x k is a multiple of the experts.
func TestMoEPerfectLoad(t *testing.T) {
	needGPU(t)
	var reqs []datasets.Request
	for i := range 12 {
		ids := make([]int32, 3+i%7)
		for j := range ids {
			ids[j] = int32((i*37 + j*11) % 2000)
		}
		reqs = append(reqs, datasets.Request{TaskID: i, InputIDs: ids, OutputTokens: 6})
	}
	for _, mode := range []string{"learned", "perfect", "uniform", "zipf:2"} {
		t.Run(mode, func(t *testing.T) {
			e, err := engine.New(context.Background(), engine.Config{Model: "tiny-moe", Backend: "cuda", Dtype: "bfloat16",
				BatchSize: 6, MaxNumTokens: 20, RoutingMode: mode, Warmup: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			res, err := e.Run(context.Background(), reqs, engine.RunOptions{})
			if err != nil {
				t.Fatal(err)
			}
			l := res.ExpertLoad
			if l == nil || l.Layers != 2 || l.Experts != 8 || len(l.Iterations) != len(res.Iterations) {
				t.Fatalf("expert load %+v", l)
			}
			checked := 0
			for i, it := range res.Iterations {
				tokens := it.CtxTokens + it.GenRequests
				for layer := range l.Layers {
					c := l.At(i, layer)
					var sum, mx int32
					for _, v := range c {
						sum += v
						mx = max(mx, v)
					}
					if int(sum) != 2*tokens {
						t.Fatalf("iteration %d layer %d: %d routed, want %d", i, layer, sum, 2*tokens)
					}
					if mode == "perfect" && (2*tokens)%8 == 0 {
						checked++
						if int(mx)*8 != int(sum) {
							t.Errorf("perfect, iteration %d (%d tokens) layer %d: counts %v", i, tokens, layer, c)
						}
					}
				}
			}
			t.Logf("%s: max/mean %.3f per iteration, %.3f over the run; %d perfect layer-iterations checked", mode, l.MaxOverMean, l.TotalMaxOverMean, checked)
			if mode == "perfect" && checked == 0 {
				t.Error("no iteration had tokens x k a multiple of the experts")
			}
		})
	}
}
