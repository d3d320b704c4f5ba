package engine

import (
	"context"
	"testing"

	"github.com/xrun-dev/xrun/datasets"
)

// Speed targets live here, never in unit tests. Each benchmark serves a
// token-norm-dist dataset once per b.N and reports output and total
// tokens per second of the timed pass (warm-up excluded), for gemm_plugin
// auto and disable:
//
//	go test -run '^$' -bench 'CPU|Quickstart' -benchtime 3x ./engine

func benchServe(b *testing.B, cfg Config, p datasets.Params) {
	for _, gemm := range []string{"auto", "disable"} {
		b.Run("gemm="+gemm, func(b *testing.B) {
			c := cfg
			c.GemmPlugin = gemm
			e, err := New(context.Background(), c)
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			p.Dist, p.Seed = datasets.NormDist, datasets.DefaultSeed
			p.VocabSize, p.EOSID = e.Model().DatasetVocab, e.Model().EOS
			reqs, err := datasets.GenerateAll(p)
			if err != nil {
				b.Fatal(err)
			}
			var outTok, allTok, seconds float64
			b.ResetTimer()
			for range b.N {
				res, err := e.Run(context.Background(), reqs, RunOptions{})
				if err != nil {
					b.Fatal(err)
				}
				outTok += res.Metrics["total_output_tokens"]
				allTok += res.Metrics["total_output_tokens"] + res.Metrics["total_input_tokens"]
				seconds += res.Metrics["total_latency_ms"] / 1e3
			}
			b.ReportMetric(outTok/seconds, "out_tok/s")
			b.ReportMetric(allTok/seconds, "tok/s")
		})
	}
}

func BenchmarkCPUTinyLlama(b *testing.B) {
	benchServe(b, Config{Model: "tiny-llama", BatchSize: 64, Warmup: 2},
		datasets.Params{NumRequests: 256, InputMean: 128, OutputMean: 128})
}

func BenchmarkCPUTinyDense(b *testing.B) {
	benchServe(b, Config{Model: "tiny-dense", BatchSize: 32, Warmup: 2},
		datasets.Params{NumRequests: 64, InputMean: 128, OutputMean: 64})
}

func BenchmarkCPUTinyMoE(b *testing.B) {
	benchServe(b, Config{Model: "tiny-moe", BatchSize: 64, Warmup: 2},
		datasets.Params{NumRequests: 128, InputMean: 128, OutputMean: 64})
}

// BenchmarkQuickstart is one cell of experiments/quickstart.yaml: tiny-llama,
// 32 requests of 64±16 in / 32±8 out, batch 8.
func BenchmarkQuickstart(b *testing.B) {
	benchServe(b, Config{Model: "tiny-llama", BatchSize: 8, Warmup: 2},
		datasets.Params{NumRequests: 32, InputMean: 64, InputStdev: 16, OutputMean: 32, OutputStdev: 8})
}
