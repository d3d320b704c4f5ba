package model_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/xrun-dev/xrun/engine/cpu"
	"github.com/xrun-dev/xrun/engine/model"
)

// split is one way of splitting a model over ranks.
type split struct {
	name  string
	ranks int
	tp    int // attention / dense / vocabulary split; ranks/tp replicas
	moeTP int // ranks splitting each expert (MoE models)
	moe   bool
}

// splitModel is a model split over ranks, each rank a goroutine per call.
type splitModel struct {
	ms    []*model.Model
	group *cpu.Group
}

// do runs f on every rank at once (the ranks meet in collectives) and
// returns the first error; a failing rank aborts the group so the others
// do not wait for it.
func (s *splitModel) do(f func(r int, m *model.Model) error) error {
	errs := make([]error, len(s.ms))
	var wg sync.WaitGroup
	for r, m := range s.ms {
		wg.Go(func() {
			if errs[r] = f(r, m); errs[r] != nil {
				s.group.Abort(errs[r])
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func newSplit(t *testing.T, cfg model.Config, sp split, opt model.Options) *splitModel {
	t.Helper()
	s := &splitModel{group: cpu.NewGroup(sp.ranks)}
	var tpGroups []*cpu.Group
	for range sp.ranks / sp.tp {
		tpGroups = append(tpGroups, cpu.NewGroup(sp.tp))
	}
	for r := range sp.ranks {
		be, err := cpu.New(model.BackendOptions{Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { be.Close() })
		o := opt
		if sp.tp > 1 {
			o.Parallel.TP = tpGroups[r/sp.tp].Comm(r % sp.tp)
		}
		if sp.moe {
			o.Parallel.EP, o.Parallel.MoETP = s.group.Comm(r), sp.moeTP
		}
		if sp.tp == sp.ranks {
			// One group for everything, as the engine builds it.
			o.Parallel.TP = s.group.Comm(r)
		}
		m, err := model.New(be, cfg, o)
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		s.ms = append(s.ms, m)
	}
	return s
}

// generate runs two prompts together, prefill then greedy decode, and
// returns every step's picks and logits (rank 0's; the test also checks
// all ranks picked the same).
func generate(t *testing.T, cfg model.Config, run func(f func(r int, m *model.Model) error) error, ranks int) ([][]int32, [][]float32) {
	t.Helper()
	prompts := [][]int32{{5, 17, 3, 99, 42, 7, 250, 11}, {300, 1, 64}}
	capa := model.Capacity{MaxTokens: 16, MaxLogitRows: 2, Slots: 2, MaxLen: 32}
	if err := run(func(_ int, m *model.Model) error { return m.Reserve(capa) }); err != nil {
		t.Fatal(err)
	}
	var toks [][]int32
	var logits [][]float32
	last := [][]int32{prompts[0], prompts[1]}
	past := []int{0, 0}
	for step := range 8 {
		var b model.Batch
		for i := range prompts {
			b.Add(i, past[i], last[i], true)
		}
		picks := make([][]int32, ranks)
		lg := make([][]float32, ranks)
		err := run(func(r int, m *model.Model) error {
			picks[r], lg[r] = make([]int32, 2), make([]float32, 2*cfg.Vocab)
			if err := m.Forward(&b); err != nil {
				return err
			}
			if err := m.Argmax(picks[r]); err != nil {
				return err
			}
			return m.ReadLogits(lg[r])
		})
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		for r := 1; r < ranks; r++ {
			if !slices.Equal(picks[r], picks[0]) || !slices.Equal(lg[r], lg[0]) {
				t.Fatalf("step %d: rank %d picked %v and rank 0 %v (or their logits differ)", step, r, picks[r], picks[0])
			}
		}
		toks, logits = append(toks, picks[0]), append(logits, lg[0])
		for i := range prompts {
			past[i] += len(last[i])
			last[i] = picks[0][i : i+1]
		}
	}
	return toks, logits
}

// TestShardedEqualsUnsharded splits tiny dense and MoE models every way
// the engine can (and with attention replicated over an expert-parallel
// group) and checks every step's greedy tokens equal the unsplit model's,
// with logits equal up to the order the partial sums were added in.
func TestShardedEqualsUnsharded(t *testing.T) {
	llama := model.Config{Name: "llama", Family: "llama", Hidden: 64, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16, FFN: 160,
		Vocab: 512, RMSEps: 1e-5, RopeTheta: 10000, MaxPos: 4096}
	tied := llama
	tied.Name, tied.TieEmbeddings, tied.KVHeads = "tied", true, 4
	mixtral := model.Config{Name: "mixtral", Family: "mixtral", Hidden: 128, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 32, FFN: 256,
		Vocab: 2048, RMSEps: 1e-5, RopeTheta: 1e6, MaxPos: 4096, Experts: 8, TopK: 2, Routing: model.RoutingSoftmaxTopKRenorm}
	qwen := model.Config{Name: "qwen3-moe", Family: "qwen3-moe", Hidden: 64, Layers: 3, Heads: 8, KVHeads: 4, HeadDim: 16, FFN: 64,
		Vocab: 1024, RMSEps: 1e-6, RopeTheta: 1e6, MaxPos: 4096, QKNorm: true, Experts: 16, TopK: 4, Routing: model.RoutingTopKSoftmax}
	dense := []split{
		{name: "tp2", ranks: 2, tp: 2},
		{name: "tp4", ranks: 4, tp: 4}, // more ranks than KV heads: replicated
	}
	moe := []split{
		{name: "tp2", ranks: 2, tp: 2, moeTP: 2, moe: true},
		{name: "tp4", ranks: 4, tp: 4, moeTP: 4, moe: true},
		{name: "tp2-ep2", ranks: 2, tp: 2, moeTP: 1, moe: true},
		{name: "tp4-ep4", ranks: 4, tp: 4, moeTP: 1, moe: true},
		{name: "tp4-ep2", ranks: 4, tp: 4, moeTP: 2, moe: true},
		{name: "ep2-attention-replicated", ranks: 2, tp: 1, moeTP: 1, moe: true},
		{name: "ep4-attention-replicated", ranks: 4, tp: 1, moeTP: 1, moe: true},
		{name: "tp2x2-ep4", ranks: 4, tp: 2, moeTP: 1, moe: true},
	}
	cases := []struct {
		cfg    model.Config
		splits []split
	}{{llama, dense}, {tied, dense}, {mixtral, moe}, {qwen, moe}}
	for _, c := range cases {
		t.Run(c.cfg.Name, func(t *testing.T) {
			opt := model.Options{Seed: 7}
			be, err := cpu.New(model.BackendOptions{Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer be.Close()
			whole, err := model.New(be, c.cfg, opt)
			if err != nil {
				t.Fatal(err)
			}
			wantTok, wantLog := generate(t, c.cfg, func(f func(int, *model.Model) error) error { return f(0, whole) }, 1)
			for _, sp := range c.splits {
				t.Run(sp.name, func(t *testing.T) {
					s := newSplit(t, c.cfg, sp, opt)
					tok, lg := generate(t, c.cfg, s.do, sp.ranks)
					for step := range tok {
						if !slices.Equal(tok[step], wantTok[step]) {
							t.Fatalf("step %d: tokens %v, unsplit %v", step, tok[step], wantTok[step])
						}
						if e := cpu.RelErr(lg[step], wantLog[step]); e > 1e-5 {
							t.Errorf("step %d: logits rel err %.3g", step, e)
						}
					}
				})
			}
		})
	}
}

// TestShardedRoutingModes checks forced routing (perfect, uniform) splits
// like learned routing: every rank draws the same assignments.
func TestShardedRoutingModes(t *testing.T) {
	cfg := model.Config{Name: "mixtral", Family: "mixtral", Hidden: 64, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16, FFN: 64,
		Vocab: 512, RMSEps: 1e-5, RopeTheta: 1e6, MaxPos: 4096, Experts: 8, TopK: 2, Routing: model.RoutingSoftmaxTopKRenorm}
	for _, mode := range []model.Routing{{Mode: model.Perfect}, {Mode: model.Uniform}, {Mode: model.Zipf, S: 1.2}} {
		t.Run(mode.String(), func(t *testing.T) {
			opt := model.Options{Seed: 3, Routing: mode}
			be, err := cpu.New(model.BackendOptions{Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer be.Close()
			whole, err := model.New(be, cfg, opt)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := generate(t, cfg, func(f func(int, *model.Model) error) error { return f(0, whole) }, 1)
			s := newSplit(t, cfg, split{ranks: 2, tp: 2, moeTP: 1, moe: true}, opt)
			got, _ := generate(t, cfg, s.do, 2)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("tokens %v, unsplit %v", got, want)
			}
		})
	}
}

func TestCheckShard(t *testing.T) {
	llama := model.Config{Name: "m", Hidden: 64, Layers: 2, Heads: 12, KVHeads: 4, HeadDim: 16, FFN: 96, Vocab: 514}
	moe := llama
	moe.Experts, moe.TopK, moe.FFN, moe.Vocab, moe.Heads = 6, 2, 48, 512, 8
	ds := moe
	ds.KVLoraRank = 16
	oss := moe
	oss.Sinks = true
	for _, c := range []struct {
		cfg            model.Config
		tp, ep, moeTP  int
		param, message string // "" param: no error
	}{
		{llama, 1, 1, 1, "", ""},
		{llama, 4, 1, 1, "tp", "vocabulary (vocab_size) of 514"},
		{llama, 3, 1, 1, "tp", "4 KV heads"},
		{llama, 8, 1, 1, "tp", "12 attention heads"},
		{llama, 1, 2, 1, "ep", "is dense"},
		{moe, 2, 2, 1, "", ""},
		{moe, 4, 1, 4, "", ""},
		{moe, 1, 4, 1, "ep", "6 experts"},
		{moe, 2, 1, 5, "tp", "expert width (intermediate_size) of 48"},
		{ds, 2, 1, 2, "tp", "DeepSeek-V3"},
		{ds, 1, 2, 1, "ep", "DeepSeek-V3"},
		{oss, 2, 1, 2, "tp", "GPT-OSS"},
		{oss, 1, 2, 1, "ep", "GPT-OSS"},
	} {
		err := model.CheckShard(c.cfg, c.tp, c.ep, c.moeTP)
		var se *model.ShardError
		switch {
		case c.param == "" && err != nil:
			t.Errorf("tp %d ep %d moe_tp %d: %v", c.tp, c.ep, c.moeTP, err)
		case c.param == "":
		case !errors.As(err, &se) || se.Param != c.param || !strings.Contains(se.Msg, c.message):
			t.Errorf("tp %d ep %d moe_tp %d: %v; want %s: ...%s...", c.tp, c.ep, c.moeTP, err, c.param, c.message)
		}
	}
}

// TestShardRefusals: expert parallelism on a dense model and FP8 GEMMs on
// a split model are refused when the model is built.
func TestShardRefusals(t *testing.T) {
	cfg := model.Config{Name: "llama", Family: "llama", Hidden: 64, Layers: 1, Heads: 4, KVHeads: 2, HeadDim: 16, FFN: 64,
		Vocab: 512, RMSEps: 1e-5, RopeTheta: 10000, MaxPos: 4096}
	be, err := cpu.New(model.BackendOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	g := cpu.NewGroup(2)
	if _, err := model.New(be, cfg, model.Options{Parallel: model.Parallel{EP: g.Comm(0)}}); err == nil || !strings.Contains(err.Error(), "dense") {
		t.Errorf("ep on a dense model: %v", err)
	}
	if _, err := model.New(be, cfg, model.Options{FP8: true, Parallel: model.Parallel{TP: g.Comm(0)}}); !errors.Is(err, model.ErrNoFP8) {
		t.Errorf("fp8 on a split model: %v", err)
	}
}
