package runner

import (
	"bytes"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/results"
)

// TestEstimateSplit: a split cell's pass is the roofline of one GPU's
// share of each iteration: Llama-3.1-8B at tp 2 takes half the time of
// tp 1 (every term halves and both hold the whole batch); Mixtral-8x7B,
// too large for one H100, is estimated at tp 2; the cells take both GPUs;
// and the plan says the collectives are not counted.
func TestEstimateSplit(t *testing.T) {
	s := mustParse(t, `params: {engine: cuda, dtype: bfloat16, batch_size: 64, dataset: {num_requests: 256, input_mean: 128, output_mean: 128, input_stdev: 0, output_stdev: 0}}
matrix:
  zips:
    split:
      - {model: llama-3.1-8b, tp: 1}
      - {model: llama-3.1-8b, tp: 2}
      - {model: mixtral-8x7b, tp: 1}
      - {model: mixtral-8x7b, tp: 2}
`)
	p := s.Plan
	if err := p.EstimateTime(EstimateOptions{GPU: "H100", GPUs: 2}); err != nil {
		t.Fatal(err)
	}
	e := p.Estimate
	one, two, big, split := e.Cells[0], e.Cells[1], e.Cells[2], e.Cells[3]
	if r := two.Pass.Seconds() / one.Pass.Seconds(); r < 0.499 || r > 0.501 {
		t.Errorf("llama tp 2 pass %v, tp 1 %v: ratio %.4f, want 0.5", two.Pass, one.Pass, r)
	}
	if big.Time != 0 || !strings.Contains(big.Note, "too large for the GPU") {
		t.Errorf("mixtral tp 1: %+v, want no estimate (too large)", big)
	}
	if split.Time <= 0 || split.Basis != BasisRoofline {
		t.Errorf("mixtral tp 2: %+v, want a roofline estimate", split)
	}
	// Two GPUs: the tp 2 cells count twice in GPU time and take both.
	if want := one.Time + 2*two.Time + 2*split.Time + e.ColdStart; e.Total != want {
		t.Errorf("GPU time %v, want %v", e.Total, want)
	}
	if want := one.Time + two.Time + split.Time + e.ColdStart; e.Wall != want {
		t.Errorf("wall %v, want %v (no two cells at once)", e.Wall, want)
	}
	if len(e.Notes) != 1 || !strings.HasPrefix(e.Notes[0], "2 cells split over GPUs (tp, ep)") || !strings.Contains(e.Notes[0], "not counted") {
		t.Errorf("notes %q", e.Notes)
	}
	var text, js bytes.Buffer
	if err := p.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if err := p.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "2 cells split over GPUs (tp, ep): each iteration's floor") || !strings.Contains(js.String(), `"notes": [`) {
		t.Errorf("the note is missing from the plan:\n%s", text.String())
	}

	// Unsplit plans have no note.
	plain := mustParse(t, "params: {engine: cuda, model: llama-3.1-8b}\n").Plan
	if err := plain.EstimateTime(EstimateOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(plain.Estimate.Notes) != 0 {
		t.Errorf("unsplit notes %q", plain.Estimate.Notes)
	}
}

// TestFlatWorkloadSplit: a measured cell's workload (results.json's flat
// parameters) is split as the planned cell's: xrun's engine by its rank's
// slice, an external engine evenly over tp x pp GPUs.
func TestFlatWorkloadSplit(t *testing.T) {
	base := results.Params{"model": "llama-3.1-8b", "batch_size": 64, "dataset.generator": GenNorm, "dataset.num_requests": 256,
		"dataset.input_mean": 128, "dataset.output_mean": 128}
	with := func(kv ...any) results.Params {
		p := results.Params{}
		for k, v := range base {
			p[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			p[kv[i].(string)] = kv[i+1]
		}
		return p
	}
	w, ok := flatWorkload(with("engine", "cuda", "tp", 2))
	if !ok || w.split.TP != 2 || !w.share.Split() || w.share.World != 2 {
		t.Errorf("cuda tp 2: %+v %+v (ok %v)", w.split, w.share, ok)
	}
	w, ok = flatWorkload(with("engine", "trtllm", "tp", 2, "pp", 2))
	if !ok || w.split.GPUs != 4 || w.share.Split() {
		t.Errorf("trtllm tp 2 pp 2: %+v %+v (ok %v)", w.split, w.share, ok)
	}
	w, ok = flatWorkload(with("engine", "cuda"))
	if !ok || w.split.TP != 1 || w.share.Split() {
		t.Errorf("cuda unsplit: %+v %+v (ok %v)", w.split, w.share, ok)
	}
}
