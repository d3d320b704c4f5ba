package runner

import "github.com/xrun-dev/xrun/engine"

// kvPositions is how many positions' worth of KV cache (at
// kvBytesPerToken each) a request of n tokens holds: n, less what
// GPT-OSS's sliding-window layers do not keep (they hold their window
// only; engine/model/gptoss.go).
func kvPositions(mc *engine.ModelConfig, n int) float64 {
	per := float64(mc.KVElemsPerToken())
	if per == 0 {
		return float64(n)
	}
	return mc.KVElemsAt(float64(n)) / per
}
