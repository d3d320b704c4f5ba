package backendtest

import (
	"testing"

	"github.com/xrun-dev/xrun/engine/cpu"
	"github.com/xrun-dev/xrun/engine/model"
)

// The CPU backend's own paths (plain GEMM, portable kernels on one
// thread) pass the harness against the default CPU backend.
func TestCPUVariants(t *testing.T) {
	for _, opt := range []model.BackendOptions{{Gemm: cpu.GemmDisable}, {Gemm: cpu.GemmAuto, Threads: 1}} {
		newBackend := func() (model.Backend, error) { return cpu.New(opt) }
		Check(t, newBackend, 1e-5)
		for _, c := range []model.Config{
			{Name: "llama", Family: "llama", Hidden: 64, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16, FFN: 96, Vocab: 300, RMSEps: 1e-5, RopeTheta: 10000, MaxPos: 256},
			{Name: "qwen3-moe", Family: "qwen3-moe", Hidden: 64, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 32, FFN: 32, Vocab: 300, RMSEps: 1e-6, RopeTheta: 1e6, MaxPos: 256,
				QKNorm: true, Experts: 8, TopK: 2, Routing: model.RoutingTopKSoftmax},
		} {
			CheckModel(t, newBackend, c, 1e-5)
		}
	}
}
