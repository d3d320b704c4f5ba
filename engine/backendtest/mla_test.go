package backendtest

import (
	"testing"

	"github.com/xrun-dev/xrun/engine/cpu"
	"github.com/xrun-dev/xrun/engine/model"
)

// The CPU backend's own paths pass the DeepSeek-V3 checks, op by op and
// as a whole model, against the default CPU backend.
func TestCPUVariantsMLA(t *testing.T) {
	ds := model.Config{Name: "deepseek", Family: "deepseek-v3", Hidden: 64, Layers: 3, Heads: 4, KVHeads: 4, HeadDim: 16, FFN: 32, DenseFFN: 96,
		Vocab: 300, RMSEps: 1e-6, RopeTheta: 10000, MaxPos: 256,
		RopeScaling: &model.RopeScaling{Type: "yarn", Factor: 40, OriginalMaxPos: 64, BetaFast: 32, BetaSlow: 1, Mscale: 1, MscaleAllDim: 1},
		QLoraRank:   32, KVLoraRank: 32, QKNopeDim: 32, VHeadDim: 32, RopeInterleave: true,
		Experts: 16, TopK: 4, Routing: model.RoutingSigmoidGroupTopKRenorm, Groups: 4, TopKGroups: 2, RoutedScale: 2.5, SharedExperts: 1, DenseLayers: 1}
	for _, opt := range []model.BackendOptions{{Gemm: cpu.GemmDisable}, {Gemm: cpu.GemmAuto, Threads: 1}} {
		newBackend := func() (model.Backend, error) { return cpu.New(opt) }
		CheckMLA(t, newBackend, 1e-5)
		CheckModel(t, newBackend, ds, 1e-5)
	}
}
