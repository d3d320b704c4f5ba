//go:build cgo && linux

package backend

import (
	"slices"
	"testing"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/cuda"
	"github.com/xrun-dev/xrun/engine/model"
)

// TestL2PrefetchSameLogits runs the script (prefill, then decode graphs of
// 3 and 5 sequences captured and replayed) on a TinyLlama-1.1B-shaped model
// cut to four layers, on the own GEMM, with the gate_up prefetch off and at
// half the rows (23 MB, with the 19 MB of QKV and output weights within an
// H100's L2): a prefetch writes nothing, so every logit must be bitwise
// the same. Where the GPU has the bulk prefetch and an L2 that holds them,
// the decode iterations must have queued prefetches.
func TestL2PrefetchSameLogits(t *testing.T) {
	needGPU(t)
	cfg, _ := engine.ZooModel("tinyllama-1.1b")
	cfg.Layers = 4
	open := func(percent int) (model.Backend, *Backend) {
		sw := fixedLt()
		sw.CUDAL2Prefetch = percent
		be, err := New(model.BackendOptions{Gemm: "disable", Dtype: "float16", Switches: sw})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := be.Close(); err != nil {
				t.Error(err)
			}
		})
		switch b := be.(type) {
		case *Backend:
			return be, b
		case pagedBackend:
			return be, b.Backend
		}
		t.Fatalf("backend of type %T", be)
		return nil, nil
	}
	offBe, _ := open(0)
	onBe, on := open(50)
	off, pre := newModel(t, offBe, cfg, nil), newModel(t, onBe, cfg, nil)
	for i, s := range script(cfg.Vocab) {
		want, got := runStep(t, off, s), runStep(t, pre, s)
		if !slices.Equal(got, want) {
			t.Errorf("iteration %d (%d sequences): logits differ with the prefetch on", i, len(s))
		}
	}
	canPrefetch, issued := false, 0
	if err := on.dev.Do(func(g *cuda.GPU) error {
		canPrefetch, issued = g.CanPrefetchL2(), on.l2.issued
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if canPrefetch && on.dev.Info.L2Bytes >= 42<<20 && issued == 0 {
		t.Errorf("the GPU can prefetch into its %d-byte L2, but no decode iteration queued a prefetch", on.dev.Info.L2Bytes)
	}
	t.Logf("%d prefetches queued", issued)
}
