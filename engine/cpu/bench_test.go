package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/xrun-dev/xrun/engine/model"
)

// BenchmarkGEMM reports GFLOP/s of MatMul at tiny-model shapes: decode
// (m = 8, 64) and prefill (m = 512) rows, for both gemm_plugin paths.
func BenchmarkGEMM(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, s := range [][3]int{{8, 704, 256}, {64, 704, 256}, {512, 704, 256}, {64, 256, 704}} {
		for _, gemm := range []string{GemmAuto, GemmDisable} {
			m, n, k := s[0], s[1], s[2]
			b.Run(fmt.Sprintf("m%d_n%d_k%d/%s", m, n, k, gemm), func(b *testing.B) {
				be := newBackend(b, gemm, 0)
				w, _ := be.Upload("w", model.Matrix, model.HostF32([]int{n, k}, randF(r, n*k)))
				x, _ := be.Alloc("x", model.Float, m, k)
				o, _ := be.Alloc("o", model.Float, m, n)
				be.WriteFloat32(x, randF(r, m*k))
				b.ResetTimer()
				for range b.N {
					be.MatMul(o, x, w, m)
				}
				b.ReportMetric(float64(2*m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkStep is one model iteration on the CPU backend at tiny-llama's
// shape (random weights): a decode step of 32 sequences at position 200,
// and a 256-token prefill chunk. The steady state allocates nothing.
func BenchmarkStep(b *testing.B) {
	cfg := model.Config{Name: "tiny-llama", Family: "llama", Hidden: 64, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16, FFN: 160,
		Vocab: 512, RMSEps: 1e-5, RopeTheta: 10000, MaxPos: 4096}
	moe := cfg
	moe.Name, moe.Family, moe.Hidden, moe.FFN, moe.Experts, moe.TopK, moe.Routing = "tiny-moe", "mixtral", 128, 256, 8, 2, model.RoutingSoftmaxTopKRenorm
	moe.HeadDim = 32
	for _, c := range []model.Config{cfg, moe} {
		for _, shape := range []struct {
			name      string
			seqs, len int
		}{{"decode32", 32, 1}, {"prefill256", 1, 256}} {
			b.Run(c.Name+"/"+shape.name, func(b *testing.B) {
				be := newBackend(b, GemmAuto, 0)
				m, err := model.New(be, c, model.Options{Seed: 1})
				if err != nil {
					b.Fatal(err)
				}
				m.Reserve(model.Capacity{MaxTokens: 256, MaxLogitRows: 32, Slots: 32, MaxLen: 512})
				var bt model.Batch
				for s := range shape.seqs {
					bt.Add(s, 200, make([]int32, shape.len), true)
				}
				next := make([]int32, 32)
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					if err := m.Forward(&bt); err != nil {
						b.Fatal(err)
					}
					m.Argmax(next)
				}
				b.ReportMetric(float64(b.N*shape.seqs*shape.len)/b.Elapsed().Seconds(), "tok/s")
			})
		}
	}
}
