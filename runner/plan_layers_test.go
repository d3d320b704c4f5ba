package runner

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/engine"
)

// TestLayersIdentity: layers is in a cell's identity only where the spec
// gives it, so the cells of every spec without it keep their ids; given,
// it sets cells apart, and a count equal to the model's is all of them.
func TestLayersIdentity(t *testing.T) {
	base := "params: {model: tiny-dense, engine: cpu}\n"
	hash := func(spec string) (string, map[string]any, []string) {
		t.Helper()
		c := mustParse(t, spec).Plan.Cells[0]
		return c.Hash, c.Flat(), c.NotApplicable()
	}
	plain, flat, na := hash(base)
	if _, ok := flat["layers"]; ok || slices.Contains(na, "layers") {
		t.Errorf("a cell that does not set layers has it in Flat %v or not_applicable %v", flat, na)
	}
	// The encoding of such a cell has no layers line: the hash of the
	// encoding without the parameter is its hash (what ids were before).
	c := mustParse(t, base).Plan.Cells[0]
	enc := string(appendCanonical(nil, &c.Params, c.na, ""))
	if strings.Contains(enc, "layers=") {
		t.Errorf("encoding of a cell without layers:\n%s", enc)
	}

	all, flatAll, _ := hash("params: {model: tiny-dense, engine: cpu, layers: all}\n")
	four, _, _ := hash("params: {model: tiny-dense, engine: cpu, layers: 4}\n")
	zero, _, _ := hash("params: {model: tiny-dense, engine: cpu, layers: 0}\n")
	two, flatTwo, _ := hash("params: {model: tiny-dense, engine: cpu, layers: 2}\n")
	if all != four || all != zero {
		t.Errorf("layers all %s, 4 (tiny-dense's count) %s and 0 %s differ", all, four, zero)
	}
	if flatAll["layers"] != 0 || flatTwo["layers"] != 2 {
		t.Errorf("flat layers: all %v, 2 %v; want 0 and 2", flatAll["layers"], flatTwo["layers"])
	}
	if two == all || two == plain {
		t.Errorf("layers 2 has the hash of all layers or of a cell without layers: %s", two)
	}
}

// TestLayersCutsTheCellsModel: a cell of a model's first layers carries
// the cut config (its estimates and memory follow it) and its engine gets
// the count; the other cells keep the whole model.
func TestLayersCutsTheCellsModel(t *testing.T) {
	s := mustParse(t, "params: {model: llama-3.1-8b}\nmatrix:\n  layers: [all, 1, 2]\n")
	var got []int
	for _, c := range s.Plan.Cells {
		got = append(got, c.Model.Layers)
		if cfg := engineConfig(&c, "cuda"); cfg.Layers != c.Params.Layers {
			t.Errorf("cell %s: engine config layers %d, want %d", c.ID, cfg.Layers, c.Params.Layers)
		}
	}
	if !slices.Equal(got, []int{32, 1, 2}) {
		t.Errorf("cells' model layers %v, want [32 1 2]", got)
	}
	// The weights grow by one layer's worth from layers 1 to 2, and the
	// whole model is layer 1 and 31 more such layers.
	w := func(i int) float64 { return heldWeights(s.Plan.Cells[i].Model) }
	per := w(2) - w(1)
	if per <= 0 || w(0) != w(1)+31*per {
		t.Errorf("weights: all %g, 1 layer %g, 2 layers %g", w(0), w(1), w(2))
	}
	if v := s.Plan.Varying; !slices.Equal(v, []string{"layers"}) {
		t.Errorf("varying %v", v)
	}
	for i, want := range []string{"layers-all-", "layers-1-", "layers-2-"} {
		if !strings.HasPrefix(s.Plan.Cells[i].ID, want) {
			t.Errorf("cell %d id %q, want the prefix %q", i, s.Plan.Cells[i].ID, want)
		}
	}
}

// TestLayersEstimateScales: the roofline estimate of a cut model follows
// its layers: fewer layers, less time, and the decode-bound pass of 16 of
// Llama-3.1-8B's 32 layers more than half the whole model's (the
// embedding and LM head stay).
func TestLayersEstimateScales(t *testing.T) {
	s := mustParse(t, "params: {model: llama-3.1-8b, batch_size: 8, dataset: {num_requests: 64}}\nmatrix:\n  layers: [all, 16, 1]\n")
	if err := s.Plan.EstimateTime(EstimateOptions{}); err != nil {
		t.Fatal(err)
	}
	all, half, one := s.Plan.Estimate.Cells[0].Pass, s.Plan.Estimate.Cells[1].Pass, s.Plan.Estimate.Cells[2].Pass
	if !(one < half && half < all) || half <= all/2 {
		t.Errorf("passes: all layers %v, 16 %v, 1 %v", all, half, one)
	}
	mc, _ := engine.ZooModel("llama-3.1-8b")
	one1, _ := engine.WithLayers(mc, 1)
	two2, _ := engine.WithLayers(mc, 2)
	layer := heldWeights(&two2) - heldWeights(&one1)
	head := float64(mc.Vocab) * float64(mc.Hidden)
	// Decode reads every layer's weights and the LM head once an iteration
	// (not the embedding, which it gathers from): the share of those bytes
	// sets the ratio, within the KV cache's few bytes.
	want := (head + 16*layer) / (head + 32*layer)
	if r := half.Seconds() / all.Seconds(); r < want*0.97 || r > want*1.03 {
		t.Errorf("16 of 32 layers take %.3f of the pass, want about %.3f", r, want)
	}
}

// TestLayersCommandPlaceholder: a command gets {layers} as a count, the
// model's own when the cell runs all of them.
func TestLayersCommandPlaceholder(t *testing.T) {
	s := mustParse(t, `params: {model: tiny-moe, engine: command}
matrix:
  layers: [all, 1]
command:
  argv: [prog, "{dataset}", "{layers}", "{records}"]
`)
	var got []any
	for i := range s.Plan.Cells {
		got = append(got, cellDriverParams(s, &s.Plan.Cells[i])["layers"])
	}
	if !slices.Equal(got, []any{2, 1}) {
		t.Errorf("{layers} of the cells: %v, want [2 1]", got)
	}
}

// TestRooflineOfCutModel: a measured cell of a model's first layers gets
// the roofline of the cut model (results.json's layers, read back as a
// JSON number): its bytes are the LM head's, read once an iteration, and
// its one layer's, where the whole tiny-llama reads two.
func TestRooflineOfCutModel(t *testing.T) {
	full, cut := rooflineFixture(), rooflineFixture()
	cut.Cells[0].Params["layers"] = 1.0
	AttachRooflines(full, fixtureCellDir)
	AttachRooflines(cut, fixtureCellDir)
	f, c := rooflineOf(t, full, "dense-gpu"), rooflineOf(t, cut, "dense-gpu")
	if f == nil || c == nil {
		t.Fatalf("rooflines: whole %v, cut %v", f, c)
	}
	// Bytes = iterations x LM head + layers x (a layer's weights and KV
	// cache): two iterations of tiny-llama's 512 x 64 head in 16 bits.
	const head = 2 * 2 * 512 * 64
	if layer := f.Bytes - c.Bytes; layer <= 0 || c.Bytes != head+layer {
		t.Errorf("bytes: whole %g, one layer %g; want one layer = %d + (whole - one layer)", f.Bytes, c.Bytes, head)
	}
	// More layers than the model has: no roofline, and why.
	cut.Cells[0].Params["layers"] = 3.0
	cut.Cells[0].Roofline = nil
	errs := AttachRooflines(cut, fixtureCellDir)
	if rooflineOf(t, cut, "dense-gpu") != nil || len(errs) == 0 || !strings.Contains(errors.Join(errs...).Error(), "model tiny-llama has 2 layers") {
		t.Errorf("layers 3 of tiny-llama: %v", errs)
	}
}
