package model_test

import (
	"maps"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/engine/cpu"
	"github.com/xrun-dev/xrun/engine/model"
)

func TestRopeScaling(t *testing.T) {
	base := model.Config{HeadDim: 128, RopeTheta: 500000}
	plain, af := model.RopeInvFreq(base)
	if af != 1 || plain[0] != 1 || math.Abs(float64(plain[1])-math.Pow(500000, -2.0/128)) > 1e-7 {
		t.Fatalf("default: %v %v", plain[:2], af)
	}
	// llama3 (Llama 3.1: factor 8, low 1, high 4, original 8192):
	// wavelengths under 8192/4 keep their frequency, over 8192/1 are
	// divided by 8, in between blend smoothly.
	l3 := base
	l3.RopeScaling = &model.RopeScaling{Type: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPos: 8192}
	inv, _ := model.RopeInvFreq(l3)
	for i := range inv {
		wave := 2 * math.Pi / float64(plain[i])
		ratio := float64(inv[i]) / float64(plain[i])
		switch {
		case wave < 2048 && ratio != 1, wave > 8192 && math.Abs(ratio-0.125) > 1e-6, ratio < 0.125-1e-6 || ratio > 1:
			t.Errorf("llama3 dim %d (wavelength %.0f): ratio %g", i, wave, ratio)
		}
	}
	// yarn (GPT-OSS: factor 32, beta 32/1, original 4096, no truncation).
	y := model.Config{HeadDim: 64, RopeTheta: 150000}
	f := false
	y.RopeScaling = &model.RopeScaling{Type: "yarn", Factor: 32, OriginalMaxPos: 4096, BetaFast: 32, BetaSlow: 1, Truncate: &f}
	yplain, _ := model.RopeInvFreq(model.Config{HeadDim: 64, RopeTheta: 150000})
	yinv, yaf := model.RopeInvFreq(y)
	if math.Abs(float64(yaf)-(0.1*math.Log(32)+1)) > 1e-6 {
		t.Errorf("yarn attention factor %v", yaf)
	}
	if math.Abs(float64(yinv[0]/yplain[0])-1) > 1e-6 || math.Abs(float64(yinv[31]/yplain[31])-1.0/32) > 1e-6 {
		t.Errorf("yarn ends: %v %v", yinv[0]/yplain[0], yinv[31]/yplain[31])
	}
	tab := model.RopeTable(y, 3)
	if tab[0] != yaf || tab[32] != 0 || math.Abs(float64(tab[64])-float64(yaf)*math.Cos(float64(yinv[0]))) > 1e-6 {
		t.Errorf("table rows: %v %v %v", tab[0], tab[32], tab[64])
	}
}

// TestRandomWeightsStayFinite runs deep versions of every family with
// random weights and checks the residual stream stays well inside fp16
// range at the last layer.
func TestRandomWeightsStayFinite(t *testing.T) {
	for _, c := range []model.Config{
		{Name: "deep-llama", Family: "llama", Hidden: 128, Layers: 64, Heads: 4, KVHeads: 2, HeadDim: 32, FFN: 352, Vocab: 1000, RMSEps: 1e-5, RopeTheta: 10000, MaxPos: 4096},
		{Name: "deep-tied", Family: "llama", Hidden: 128, Layers: 48, Heads: 4, KVHeads: 1, HeadDim: 32, FFN: 352, Vocab: 1000, RMSEps: 1e-5, RopeTheta: 500000, MaxPos: 4096, TieEmbeddings: true,
			RopeScaling: &model.RopeScaling{Type: "llama3", Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPos: 8192}},
		{Name: "deep-qwen3", Family: "qwen3-moe", Hidden: 128, Layers: 48, Heads: 4, KVHeads: 2, HeadDim: 32, FFN: 64, Vocab: 1000, RMSEps: 1e-6, RopeTheta: 1e6, MaxPos: 4096, QKNorm: true,
			Experts: 16, TopK: 4, Routing: model.RoutingTopKSoftmax},
		{Name: "deep-gptoss", Family: "gpt-oss", Hidden: 96, Layers: 24, Heads: 8, KVHeads: 2, HeadDim: 16, FFN: 96, Vocab: 1000, RMSEps: 1e-5, RopeTheta: 150000, MaxPos: 4096,
			Experts: 8, TopK: 4, Routing: model.RoutingTopKSoftmax, RopeScaling: &model.RopeScaling{Type: "yarn", Factor: 32, OriginalMaxPos: 4096, BetaFast: 32, BetaSlow: 1}},
	} {
		be, _ := cpu.New(model.BackendOptions{})
		m, err := model.New(be, c, model.Options{Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		m.Reserve(model.Capacity{MaxTokens: 40, Slots: 2, MaxLen: 40})
		var b model.Batch
		ids := make([]int32, 40)
		for i := range ids {
			ids[i] = int32(i * 23 % c.Vocab)
		}
		b.Add(0, 0, ids, true)
		if err := m.Forward(&b); err != nil {
			t.Fatal(err)
		}
		x := make([]float32, 40*c.Hidden)
		m.ReadResidual(x)
		var mx float64
		for _, v := range x {
			mx = math.Max(mx, math.Abs(float64(v)))
		}
		logits := make([]float32, c.Vocab)
		m.ReadLogits(logits)
		for _, v := range logits {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				mx = math.Inf(1)
			}
		}
		if !(mx < 100) {
			t.Errorf("%s: max |residual| %g after %d layers", c.Name, mx, c.Layers)
		}
		be.Close()
	}
}

func TestBatchAdd(t *testing.T) {
	var b model.Batch
	b.Add(3, 5, []int32{7, 8}, true)
	b.Add(1, 0, []int32{9, 10, 11}, false)
	if b.NumTokens() != 5 || b.Positions[1] != 6 || b.Positions[2] != 0 || b.Seqs[1].Start != 2 || len(b.LogitRows) != 1 || b.LogitRows[0] != 1 {
		t.Errorf("%+v", b)
	}
	b.Reset()
	if b.NumTokens() != 0 || len(b.Seqs) != 0 {
		t.Error("reset")
	}
}

func TestRandomValue(t *testing.T) {
	var sum, sq float64
	const n = 100000
	for i := range int64(n) {
		v := float64(model.RandomValue(11, i, 1))
		if v < -1 || v >= 1 {
			t.Fatalf("value %v out of range", v)
		}
		sum += v
		sq += v * v
	}
	if mean, variance := sum/n, sq/n; math.Abs(mean) > 0.01 || math.Abs(variance-1.0/3) > 0.01 {
		t.Errorf("mean %g variance %g, want 0 and 1/3", mean, variance)
	}
	if model.WeightSeed(1, "a") == model.WeightSeed(1, "b") || model.WeightSeed(1, "a") == model.WeightSeed(2, "a") {
		t.Error("weight seeds collide")
	}
}

// normRecorder records the norm weights a model uploads.
type normRecorder struct {
	model.Backend
	norms map[string][]float32
}

func (r *normRecorder) Upload(name string, kind model.WeightKind, h model.HostTensor) (model.Tensor, error) {
	if kind == model.Vector && strings.HasSuffix(name, "norm.weight") {
		if v, err := h.Float32(); err == nil {
			r.norms[name] = v
		}
	}
	return r.Backend.Upload(name, kind, h)
}

// TestRandomNormWeights: a random model's norm weights are not ones but
// spread around one, each norm its own values, and the same for the same
// seed; else no comparison of two backends on random models could see a
// norm weight dropped or applied to the wrong columns.
func TestRandomNormWeights(t *testing.T) {
	cfg := model.Config{Name: "m", Family: "qwen3-moe", Hidden: 64, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16, FFN: 32,
		Vocab: 100, RMSEps: 1e-6, RopeTheta: 1e6, MaxPos: 64, QKNorm: true, Experts: 4, TopK: 2, Routing: model.RoutingTopKSoftmax}
	load := func(seed uint64) map[string][]float32 {
		be, err := cpu.New(model.BackendOptions{Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer be.Close()
		r := &normRecorder{Backend: be, norms: map[string][]float32{}}
		if _, err := model.New(r, cfg, model.Options{Seed: seed}); err != nil {
			t.Fatal(err)
		}
		return r.norms
	}
	a, b, c := load(1), load(1), load(2)
	// ln1, ln2, q_norm, k_norm a layer, and the final norm.
	if len(a) != 4*cfg.Layers+1 {
		t.Fatalf("%d norm weights uploaded, want %d: %v", len(a), 4*cfg.Layers+1, slices.Sorted(maps.Keys(a)))
	}
	first := map[float32]string{}
	for name, v := range a {
		var ss float64
		for _, x := range v {
			if x < 0.75 || x > 1.25 {
				t.Errorf("%s: %v outside [0.75, 1.25]", name, x)
			}
			ss += (float64(x) - 1) * (float64(x) - 1)
		}
		if sd := math.Sqrt(ss / float64(len(v))); sd < 0.1 {
			t.Errorf("%s: spread %.3f around one, want that of U(-0.25, 0.25) (0.144)", name, sd)
		}
		if other, dup := first[v[0]]; dup {
			t.Errorf("%s starts like %s", name, other)
		}
		first[v[0]] = name
		if !slices.Equal(v, b[name]) {
			t.Errorf("%s differs between two loads of seed 1", name)
		}
		if slices.Equal(v, c[name]) {
			t.Errorf("%s is the same for seeds 1 and 2", name)
		}
	}
}
