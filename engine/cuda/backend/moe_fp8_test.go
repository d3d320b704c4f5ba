//go:build cgo && linux

package backend

import (
	"fmt"
	"testing"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/model"
)

// TestFP8MoEMatchesCPU runs tiny-moe with FP8 GEMMs and FP8 experts on
// the CPU (the reference: engine/cpu's moeFP8) and on the GPU (bf16
// activations, moe_fp8) through the scripted batches (prefill, mixed,
// decode eager, captured and replayed) and compares every logit row, as
// TestCUDAFP8MatchesCPU does for dense models.
func TestFP8MoEMatchesCPU(t *testing.T) {
	needGPU(t)
	cfg := zooConfig(t, "tiny-moe")
	sc, want := fp8Reference(t, cfg)
	for _, gemm := range []string{"auto", "disable"} {
		t.Run(gemm, func(t *testing.T) {
			m := newModelOpt(t, newBackend(t, gemm, "bfloat16"), cfg, model.Options{FP8: true})
			var agree, rows int
			for i, s := range sc {
				got := runStep(t, m, s)
				relErr(t, fmt.Sprintf("iteration %d", i), got, want[i], fp8ModelTol)
				V := cfg.Vocab
				for r := range len(s) {
					rows++
					if refArgmax(got[r*V:(r+1)*V]) == refArgmax(want[i][r*V:(r+1)*V]) {
						agree++
					}
				}
			}
			t.Logf("greedy agreement with the CPU's FP8 run: %d of %d rows", agree, rows)
			if agree*2 < rows {
				t.Errorf("greedy tokens agree with the CPU's FP8 run on only %d of %d rows", agree, rows)
			}
		})
	}
}

// TestEngineRunFP8MoE serves a dataset through engine.New / Run with dtype
// fp8 on tiny-moe (the runner's path: warm-up of decode batch sizes,
// graphs, expert loads).
func TestEngineRunFP8MoE(t *testing.T) {
	needGPU(t)
	e, reqs, res := serveSmall(t, engine.Config{Model: "tiny-moe", Backend: "cuda", BatchSize: 8, Warmup: 2, Dtype: "fp8"})
	for i, r := range res.Requests {
		if len(r.OutputIDs) != reqs[i].OutputTokens {
			t.Errorf("request %d: %d tokens, want %d", i, len(r.OutputIDs), reqs[i].OutputTokens)
		}
	}
	if res.ExpertLoad == nil || res.ExpertLoad.MaxOverMean < 1 {
		t.Errorf("expert load %+v", res.ExpertLoad)
	}
	t.Logf("%s (fp8, FP8 experts): %.0f output tok/s", e.Backend(), res.Metrics["system_output_throughput_tok_s"])
}
