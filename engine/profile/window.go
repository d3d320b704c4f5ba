package profile

import "github.com/xrun-dev/xrun/engine"

// GPT-OSS's sliding-window layers attend to, and keep in the cache, their
// last SlidingWindow positions only (engine/model/gptoss.go): a decode
// step on a long sequence reads and multiplies the window on those layers,
// the whole context on the others.

// slidingShare is the share of mc's layers that attend through a window.
func slidingShare(mc engine.ModelConfig) float64 {
	if mc.SlidingWindow <= 0 || mc.Layers == 0 {
		return 0
	}
	return float64(mc.SlidingLayers()) / float64(mc.Layers)
}

// seen is, averaged over the layers, how many of n cached positions a
// token attends to: n on full layers, at most the window on sliding ones.
func (s shape) seen(n float64) float64 {
	if s.slide == 0 {
		return n
	}
	return (1-s.slide)*n + s.slide*min(n, s.window)
}
