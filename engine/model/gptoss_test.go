package model_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/engine/cpu"
	"github.com/xrun-dev/xrun/engine/model"
)

// ossShape is a tiny GPT-OSS: every feature, a window of 8 on layers 0
// and 2.
func ossShape() model.Config {
	return model.Config{Name: "tiny-oss", Family: "gpt-oss", Hidden: 64, Layers: 4, Heads: 4, KVHeads: 2, HeadDim: 16, FFN: 48,
		Vocab: 256, RMSEps: 1e-5, RopeTheta: 150000, MaxPos: 4096, Experts: 4, TopK: 2, Routing: model.RoutingTopKSoftmax,
		RopeScaling: &model.RopeScaling{Type: "yarn", Factor: 32, OriginalMaxPos: 4096, BetaFast: 32, BetaSlow: 1, Truncate: new(bool)},
		OSS:         model.OSS{SlidingWindow: 8, Sinks: true, AttnBias: true, RouterBias: true, ExpertBias: true, SwiGLULimit: 7, SwiGLUAlpha: 1.702}}
}

func TestOSSConfig(t *testing.T) {
	c := ossShape()
	for i, want := range []int{8, 0, 8, 0} {
		if got := c.LayerWindow(i); got != want {
			t.Errorf("layer %d window %d, want %d (alternating, sliding first)", i, got, want)
		}
	}
	c.LayerTypes = []string{model.FullAttention, model.SlidingAttention, model.SlidingAttention, model.FullAttention}
	if c.LayerWindow(0) != 0 || c.LayerWindow(1) != 8 || c.SlidingLayers() != 2 {
		t.Errorf("layer_types not followed: %d %d %d", c.LayerWindow(0), c.LayerWindow(1), c.SlidingLayers())
	}
	// 2 KV heads of 16, K and V: 64 elements per layer and position.
	if got, want := c.KVElemsAt(20), 64.0*(2*20+2*8); got != want {
		t.Errorf("KVElemsAt(20) = %g, want %g", got, want)
	}
	if got, want := c.KVElemsAt(5), 64.0*4*5; got != want {
		t.Errorf("KVElemsAt(5) = %g, want %g (shorter than the window)", got, want)
	}
	plain := c
	plain.OSS = model.OSS{}
	// q/k/v (128) and o (64) biases, 4 sinks, router (4) and experts' (4 × (96 + 64)) biases, per layer.
	if got, want := c.Params()-plain.Params(), int64(4*(128+64+4+4+4*(96+64))); got != want {
		t.Errorf("biases and sinks add %d parameters, want %d", got, want)
	}
	if plain.KVElemsAt(20) != float64(plain.KVElemsPerToken())*20 {
		t.Error("KVElemsAt without a window is not linear")
	}
}

func TestOSSValidate(t *testing.T) {
	for _, c := range []struct {
		edit func(*model.Config)
		want string
	}{
		{func(c *model.Config) { c.LayerTypes = []string{model.FullAttention} }, "layer_types has 1 entries for 4 layers"},
		{func(c *model.Config) { c.LayerTypes = []string{"x", "x", "x", "x"} }, `layer_types[0] "x"`},
		{func(c *model.Config) { c.SlidingWindow = -1 }, "sliding_window -1"},
		{func(c *model.Config) { c.SwiGLUAlpha = 0 }, "swiglu_alpha 0"},
		{func(c *model.Config) { c.SwiGLULimit = math.Inf(1) }, "swiglu_limit +Inf"},
		{func(c *model.Config) { c.Experts, c.TopK, c.Routing = 0, 0, "" }, "need experts"},
		{func(c *model.Config) { c.SlidingWindow, c.LayerTypes = 0, make([]string, 4) }, "layer_types needs sliding_window"},
	} {
		cfg := ossShape()
		c.edit(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v, want an error saying %q", err, c.want)
		}
	}
	if err := ossShape().Validate(); err != nil {
		t.Error(err)
	}
}

// noOSS hides the CPU backend's GPT-OSS ops.
type noOSS struct{ model.Backend }

func TestOSSRefusals(t *testing.T) {
	be, _ := cpu.New(model.BackendOptions{})
	defer be.Close()
	if _, err := model.New(noOSS{be}, ossShape(), model.Options{}); !errors.Is(err, model.ErrNoOSS) {
		t.Errorf("a backend without OSSBackend: %v, want ErrNoOSS", err)
	}
	if _, err := model.New(be, ossShape(), model.Options{KVFP8: true}); !errors.Is(err, model.ErrNoFP8) {
		t.Errorf("an FP8 KV cache with sinks: %v, want ErrNoFP8", err)
	}
	if _, err := model.New(be, ossShape(), model.Options{FP8: true}); !errors.Is(err, model.ErrNoFP8) {
		t.Errorf("FP8 experts with biases: %v, want ErrNoFP8", err)
	}
}

// runOSS feeds prompt through m in chunks of chunk tokens and returns
// every position's logits.
func runOSS(t *testing.T, m *model.Model, prompt []int32, chunk int) []float32 {
	t.Helper()
	V := m.Config().Vocab
	var all []float32
	out := make([]float32, len(prompt)*V)
	for p := 0; p < len(prompt); p += chunk {
		n := min(chunk, len(prompt)-p)
		var b model.Batch
		start := b.Add(0, p, prompt[p:p+n], false)
		for i := range n {
			b.LogitRows = append(b.LogitRows, int32(start+i))
		}
		if err := m.Forward(&b); err != nil {
			t.Fatal(err)
		}
		if err := m.ReadLogits(out[:n*V]); err != nil {
			t.Fatal(err)
		}
		all = append(all, out[:n*V]...)
	}
	return all
}

func newOSS(t *testing.T, cfg model.Config) *model.Model {
	t.Helper()
	be, _ := cpu.New(model.BackendOptions{Threads: 2})
	t.Cleanup(func() { be.Close() })
	m, err := model.New(be, cfg, model.Options{Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Reserve(model.Capacity{MaxTokens: 32, Slots: 2, MaxLen: 32}); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestOSSModel runs a random tiny GPT-OSS over 30 positions, past its
// window of 8 several times: one prefill, chunks of 5 and token by token
// through the ring cache give the same logits; the window and the sinks
// change them; and the cache holds the sliding layers' window only.
func TestOSSModel(t *testing.T) {
	cfg := ossShape()
	prompt := make([]int32, 30)
	for i := range prompt {
		prompt[i] = int32(i*41%cfg.Vocab + 1)
	}
	m := newOSS(t, cfg)
	kc := m.KVConfig(2, 32)
	if !kc.Ring || kc.LayerCapacity(0) != 8 || kc.LayerCapacity(1) != 32 || m.Pageable() {
		t.Errorf("KV config %+v: want a ring cache, 8 positions on sliding layers, not pageable", kc)
	}
	whole := runOSS(t, m, prompt, 30)
	for _, chunk := range []int{5, 1} {
		if e := cpu.RelErr(runOSS(t, newOSS(t, cfg), prompt, chunk), whole); e > 1e-5 {
			t.Errorf("chunks of %d: logits rel err %.3g against one prefill", chunk, e)
		}
	}
	for _, v := range whole {
		if math.IsNaN(float64(v)) || math.Abs(float64(v)) > 1e4 {
			t.Fatalf("logit %g", v)
		}
	}
	V := cfg.Vocab
	for _, c := range []struct {
		what string
		edit func(*model.Config)
	}{
		{"a wider window", func(c *model.Config) { c.SlidingWindow = 16 }},
		{"no sinks", func(c *model.Config) { c.Sinks = false }},
		{"no clamp", func(c *model.Config) { c.SwiGLULimit, c.SwiGLUAlpha = 0, 0 }},
	} {
		other := cfg
		c.edit(&other)
		got := runOSS(t, newOSS(t, other), prompt, 30)
		if e := cpu.RelErr(got[29*V:], whole[29*V:]); e < 1e-4 {
			t.Errorf("%s: last logits rel err %.3g; the feature changes nothing", c.what, e)
		}
		if c.what == "a wider window" {
			// Within the window, nothing differs.
			if e := cpu.RelErr(got[:8*V], whole[:8*V]); e > 1e-6 {
				t.Errorf("a wider window changes the first 8 positions: rel err %.3g", e)
			}
		}
	}
}
