package runner

import (
	"bytes"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/results"
)

// TestCollectiveTime: the model of a split cell's collectives gives
// Llama-3.1-8B's decode at tp 2, batch 64, about what two H100s measured:
// 450 us an iteration (64 all-reduces of 512 KiB, the LM head's
// all-gather); nothing unsplit, and the experts' all-reduce under ep.
func TestCollectiveTime(t *testing.T) {
	llama, err := engine.LookupModel("llama-3.1-8b")
	if err != nil {
		t.Fatal(err)
	}
	w := workload{engine: "cuda", mc: llama, elemBytes: 2}
	dec := engine.IterationRecord{GenRequests: 64}
	if got := w.collectiveTime(dec); got != 0 {
		t.Errorf("unsplit: %g s of collectives", got)
	}
	w.splitWorkload("cuda", 2, 1, 1)
	if got := w.collectiveTime(dec); got < 0.85*450e-6 || got > 1.15*450e-6 {
		t.Errorf("tp 2 decode of 64: %.1f us of collectives, measured 450", got*1e6)
	}
	mix, err := engine.LookupModel("mixtral-8x7b")
	if err != nil {
		t.Fatal(err)
	}
	w = workload{engine: "cuda", mc: mix, elemBytes: 2}
	w.splitWorkload("cuda", 1, 2, 1)
	// ep 2 alone: one all-reduce a layer (the experts'), no LM head gather.
	want := 32 * (collectiveLatency + 64*4096*2/collectiveBusBW)
	if got := w.collectiveTime(dec); got < want*0.999 || got > want*1.001 {
		t.Errorf("mixtral ep 2 decode of 64: %.2f us, want %.2f", got*1e6, want*1e6)
	}
}

// TestEstimateSplit: a split cell's pass is the roofline of one GPU's
// share of each iteration plus its collectives: Llama-3.1-8B at tp 2 takes
// half the time of tp 1 (every term halves and both hold the whole batch)
// and its collectives'; Mixtral-8x7B,
// too large for one H100, is estimated at tp 2; the cells take both GPUs;
// and the plan says how the collectives are counted.
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
	// Half the roofline, plus the collectives of its schedule: 4 waves of
	// 64, each a prefill of 8192 rows and 127 decodes of 64.
	w, why := cellWorkload(&p.Cells[1])
	if why != "" {
		t.Fatal(why)
	}
	comm := 4 * (w.collectiveTime(engine.IterationRecord{CtxTokens: 8192, CtxRequests: 64}) + 127*w.collectiveTime(engine.IterationRecord{GenRequests: 64}))
	if got := two.Pass.Seconds() - one.Pass.Seconds()/2; got < comm-1e-6 || got > comm+1e-6 {
		t.Errorf("llama tp 2 pass %v, tp 1 %v: %.6f s beyond half, want the collectives' %.6f s", two.Pass, one.Pass, got, comm)
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
	if len(e.Notes) != 1 || !strings.HasPrefix(e.Notes[0], "2 cells split over GPUs (tp, ep)") || !strings.Contains(e.Notes[0], "plus its collectives") {
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
