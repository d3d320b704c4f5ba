package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/datasets"
	"github.com/xrun-dev/xrun/engine/backendtest"
)

// opsOfIteration counts a profiled pass's ops of one iteration by name.
func opsOfIteration(res *Result, it int) map[string]int {
	n := map[string]int{}
	for _, op := range res.Ops {
		if op.Iteration == it {
			n[op.Name]++
		}
	}
	return n
}

// TestLayersRunsTheFirstLayers cuts tiny-dense (4 layers) to 2: every op a
// layer runs happens half as often in an iteration, the ops around the
// layers (embedding, final norm, LM head, argmax) as often as before.
func TestLayersRunsTheFirstLayers(t *testing.T) {
	reqs := mixedRequests(3)
	ops := map[int]map[string]int{}
	for _, n := range []int{0, 2} {
		e := newEngine(t, Config{Model: "tiny-dense", BatchSize: 4, Layers: n})
		want := 4
		if n > 0 {
			want = n
		}
		if got := e.Model().Layers; got != want {
			t.Fatalf("layers %d: the engine's model has %d layers, want %d", n, got, want)
		}
		res, err := e.Run(context.Background(), reqs, RunOptions{Profile: true})
		if err != nil {
			t.Fatal(err)
		}
		ops[n] = opsOfIteration(res, 0)
	}
	full, cut := ops[0], ops[2]
	for _, name := range []string{"cpu_attention", "cpu_rope", "cpu_swiglu"} {
		if full[name] != 4 || cut[name] != 2 {
			t.Errorf("%s: %d ops on 4 layers, %d on 2; want 4 and 2", name, full[name], cut[name])
		}
	}
	for _, name := range []string{"cpu_embedding", "cpu_argmax", "cpu_gather_rows"} {
		if full[name] != 1 || cut[name] != 1 {
			t.Errorf("%s: %d ops on 4 layers, %d on 2; want 1 each", name, full[name], cut[name])
		}
	}
	var gFull, gCut int
	for name, k := range full {
		if strings.HasPrefix(name, "cpu_gemm") {
			gFull += k
			gCut += cut[name]
		}
	}
	// Four GEMMs a layer (qkv, o, gate_up, down) and the LM head.
	if gFull != 4*4+1 || gCut != 2*4+1 {
		t.Errorf("GEMMs: %d on 4 layers, %d on 2; want 17 and 9", gFull, gCut)
	}
}

// TestLayersExpertLoad: a cut MoE model routes in its layers only.
func TestLayersExpertLoad(t *testing.T) {
	e := newEngine(t, Config{Model: "tiny-moe", BatchSize: 4, Layers: 1, RoutingMode: "perfect"})
	res, err := e.Run(context.Background(), mixedRequests(4), RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l := res.ExpertLoad; l == nil || l.Layers != 1 || l.Experts != 8 {
		t.Fatalf("expert load %+v, want 1 layer of 8 experts", res.ExpertLoad)
	}
}

// TestLayersMatchesAShallowerCheckpoint: tiny-mixtral's checkpoint cut to
// its first layer generates exactly what the same checkpoint does when its
// config.json says it has one layer: the cut model is the first layer,
// with its real weights, then the final norm and the LM head. And it is
// not the whole model (the tokens differ from the golden ones).
func TestLayersMatchesAShallowerCheckpoint(t *testing.T) {
	src := filepath.Join("testdata", "hf", "tiny-mixtral")
	cases := backendtest.ReadGolden(t, src)
	var reqs []datasets.Request
	for i, c := range cases {
		reqs = append(reqs, datasets.Request{TaskID: i, InputIDs: c.Input, OutputTokens: len(c.Greedy)})
	}
	cfg, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	one := strings.Replace(string(cfg), `"num_hidden_layers": 2`, `"num_hidden_layers": 1`, 1)
	if one == string(cfg) {
		t.Fatal("tiny-mixtral's config.json has no num_hidden_layers 2 to replace")
	}
	shallow := t.TempDir()
	if err := os.WriteFile(filepath.Join(shallow, "config.json"), []byte(one), 0o644); err != nil {
		t.Fatal(err)
	}
	weights, err := os.ReadFile(filepath.Join(src, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(shallow, "model.safetensors"), weights, 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(cfg Config) []RequestRecord {
		res, err := newEngine(t, cfg).Run(context.Background(), reqs, RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return res.Requests
	}
	cut := run(Config{Model: src, BatchSize: 2, Layers: 1})
	ref := run(Config{Model: shallow, BatchSize: 2})
	differs := false
	for i := range cases {
		if !slices.Equal(cut[i].OutputIDs, ref[i].OutputIDs) {
			t.Errorf("request %d: layers 1 of tiny-mixtral gave %v, a one-layer checkpoint %v", i, cut[i].OutputIDs, ref[i].OutputIDs)
		}
		differs = differs || !slices.Equal(cut[i].OutputIDs, cases[i].Greedy)
	}
	if !differs {
		t.Error("one layer of tiny-mixtral generated the whole model's tokens: was it cut?")
	}
}

func TestLayersErrors(t *testing.T) {
	for _, c := range []struct {
		layers int
		want   string
	}{
		{3, "model tiny-llama has 2 layers; expected all or an integer from 1 to 2"},
		{-1, "a positive number of layers"},
	} {
		_, err := New(context.Background(), Config{Model: "tiny-llama", Layers: c.layers})
		var pe *ParamError
		if !errors.As(err, &pe) || pe.Field != "layers" || !strings.Contains(err.Error(), c.want) {
			t.Errorf("layers %d: error %v, want a layers ParamError saying %q", c.layers, err, c.want)
		}
	}
	// DeepSeek-V3's first dense layers are cut with the rest.
	ds := ModelConfig{Name: "ds", Layers: 6, DenseLayers: 3}
	if got, err := WithLayers(ds, 2); err != nil || got.Layers != 2 || got.DenseLayers != 2 {
		t.Errorf("WithLayers(6 layers, 3 dense; 2) = %d layers, %d dense, %v", got.Layers, got.DenseLayers, err)
	}
	if got, _ := WithLayers(ds, 4); got.DenseLayers != 3 {
		t.Errorf("WithLayers(6 layers, 3 dense; 4) = %d dense, want 3", got.DenseLayers)
	}
	// All of them is the model itself.
	for _, n := range []int{0, 2} {
		mc, _ := ZooModel("tiny-llama")
		got, err := WithLayers(mc, n)
		if err != nil || got.Layers != 2 {
			t.Errorf("WithLayers(tiny-llama, %d) = %d layers, %v", n, got.Layers, err)
		}
	}
}
