package model_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/engine/cpu"
	"github.com/xrun-dev/xrun/engine/model"
)

// deepSeekShape is a small DeepSeek-V3-architecture config.
func deepSeekShape(layers int) model.Config {
	return model.Config{Name: "ds", Family: "deepseek-v3", Hidden: 96, Layers: layers, Heads: 4, KVHeads: 4, HeadDim: 16, FFN: 48, DenseFFN: 160,
		Vocab: 1000, RMSEps: 1e-6, RopeTheta: 10000, MaxPos: 4096,
		RopeScaling: &model.RopeScaling{Type: "yarn", Factor: 40, OriginalMaxPos: 128, BetaFast: 32, BetaSlow: 1, Mscale: 1, MscaleAllDim: 1},
		QLoraRank:   48, KVLoraRank: 32, QKNopeDim: 32, VHeadDim: 24, RopeInterleave: true,
		Experts: 16, TopK: 4, Routing: model.RoutingSigmoidGroupTopKRenorm, Groups: 4, TopKGroups: 2, RoutedScale: 2.5,
		SharedExperts: 1, DenseLayers: 2}
}

func TestMLAScales(t *testing.T) {
	c := deepSeekShape(2)
	m := 0.1*math.Log(40) + 1
	if got, want := c.MLASoftmaxScale(), m*m/math.Sqrt(48); math.Abs(got-want) > 1e-12 {
		t.Errorf("softmax scale %g, want mscale(40, 1)^2 / sqrt(32+16) = %g", got, want)
	}
	// mscale equal to mscale_all_dim: cos and sin unscaled.
	if _, af := model.RopeInvFreq(c); af != 1 {
		t.Errorf("yarn attention factor %g with mscale = mscale_all_dim, want 1", af)
	}
	c.RopeScaling.MscaleAllDim = 0.5
	if _, af := model.RopeInvFreq(c); math.Abs(float64(af)-m/(0.05*math.Log(40)+1)) > 1e-6 {
		t.Errorf("yarn attention factor %g, want mscale(40, 1)/mscale(40, 0.5)", af)
	}
	c.RopeScaling = nil
	if got := c.MLASoftmaxScale(); got != 1/math.Sqrt(48) {
		t.Errorf("softmax scale without scaling %g", got)
	}
}

func TestDeepSeekValidate(t *testing.T) {
	for _, c := range []struct {
		edit func(*model.Config)
		msg  string
	}{
		{func(c *model.Config) { c.QKNopeDim = 0 }, "qk_nope_head_dim"},
		{func(c *model.Config) { c.KVLoraRank = 0 }, "need MLA"},
		{func(c *model.Config) { c.Groups = 3 }, "equal groups"},
		{func(c *model.Config) { c.Groups = 16; c.TopKGroups = 8 }, "at least 2"},
		{func(c *model.Config) { c.TopKGroups = 5 }, "topk_group 5"},
		{func(c *model.Config) { c.TopK = 9 }, "exceeds the 8 experts"},
		{func(c *model.Config) { c.RoutedScale = 0 }, "routed_scaling_factor"},
		{func(c *model.Config) { c.Routing = model.RoutingTopKSoftmax }, "need grouped routing"},
		{func(c *model.Config) { c.DenseFFN = 0 }, "dense first layers"},
		{func(c *model.Config) { c.DenseLayers = -1 }, "first_k_dense_replace"},
		{func(c *model.Config) { c.SharedExperts = -1 }, "n_shared_experts"},
		{func(c *model.Config) { c.QKNorm = true }, "qk-norm"},
	} {
		cfg := deepSeekShape(3)
		c.edit(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("want an error about %q, got %v", c.msg, err)
		}
	}
	// Cut to fewer layers than first_k_dense_replace (engine.WithLayers),
	// every layer is dense.
	c := deepSeekShape(1)
	if err := c.Validate(); err != nil || c.MoELayers() != 0 {
		t.Errorf("one layer of a model with two dense first layers: %v, %d MoE layers", err, c.MoELayers())
	}
}

// noMLA is a backend without the MLA ops.
type noMLA struct{ model.Backend }

func TestNoMLABackend(t *testing.T) {
	be, _ := cpu.New(model.BackendOptions{})
	defer be.Close()
	_, err := model.New(noMLA{be}, deepSeekShape(2), model.Options{})
	if !errors.Is(err, model.ErrNoMLA) {
		t.Errorf("a backend without MLABackend: %v, want ErrNoMLA", err)
	}
}

// TestMLAForms runs a random DeepSeek-shaped model (two dense layers, then
// MoE layers with shared experts) with the absorbed and the plain form:
// prefill, then decode token by token; the logits agree, and the residual
// stream stays finite at depth.
func TestMLAForms(t *testing.T) {
	cfg := deepSeekShape(12)
	var logits [2][]float32
	for f, plain := range []bool{false, true} {
		be, _ := cpu.New(model.BackendOptions{})
		defer be.Close()
		m, err := model.New(be, cfg, model.Options{Seed: 7, MLAPlain: plain})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Reserve(model.Capacity{MaxTokens: 32, Slots: 2, MaxLen: 40}); err != nil {
			t.Fatal(err)
		}
		if kc := m.KVConfig(2, 40); kc.Latent != 32 || kc.RopeDim != 16 || kc.KVBytesPerToken(2) != 12*48*2 {
			t.Errorf("KV config %+v", kc)
		}
		var b model.Batch
		prompt := make([]int32, 20)
		for i := range prompt {
			prompt[i] = int32(i*37%cfg.Vocab + 3)
		}
		b.Add(0, 0, prompt, true)
		b.Add(1, 0, prompt[:9], true)
		next := make([]int32, 2)
		out := make([]float32, 2*cfg.Vocab)
		pos := []int{20, 9}
		for step := range 6 {
			if err := m.Forward(&b); err != nil {
				t.Fatal(err)
			}
			m.ReadLogits(out)
			logits[f] = append(logits[f], out...)
			if step == 0 {
				x := make([]float32, 29*cfg.Hidden)
				m.ReadResidual(x)
				for _, v := range x {
					if math.IsNaN(float64(v)) || math.Abs(float64(v)) > 1e3 {
						t.Fatalf("residual %g", v)
					}
				}
			}
			m.Argmax(next)
			b.Reset()
			for s := range 2 {
				b.Add(s, pos[s], next[s:s+1], true)
				pos[s]++
			}
		}
	}
	if e := cpu.RelErr(logits[1], logits[0]); e > 1e-5 || len(logits[0]) != 6*2*cfg.Vocab {
		t.Errorf("plain vs absorbed logits: rel err %.3g (%d values)", e, len(logits[0]))
	}
}
