package profile

import (
	"math"
	"testing"

	"github.com/xrun-dev/xrun/engine"
)

// TestRooflineWindow: on gpt-oss-20b a decode step over 4096 cached
// positions reads the whole context on its 12 full layers and 128
// positions on its 12 sliding ones; within the window nothing changes.
func TestRooflineWindow(t *testing.T) {
	oss, _ := engine.ZooModel("gpt-oss-20b")
	full := oss
	full.SlidingWindow = 0
	it := engine.IterationRecord{GenRequests: 8}
	perLayer := 2.0 * 8 * 64 // K and V of 8 KV heads of 64
	for _, c := range []struct{ ctx, saved float64 }{{4096, 12 * perLayer * (4096 - 128)}, {100, 0}} {
		w, f := IterationWork(oss, it, c.ctx, 2), IterationWork(full, it, c.ctx, 2)
		if got, want := f.Bytes-w.Bytes, 8*2*c.saved; math.Abs(got-want) > 1e-6*want+1e-9 {
			t.Errorf("context %g: the window saves %g bytes, want %g", c.ctx, got, want)
		}
		if got, want := f.FLOPs-w.FLOPs, 8*oss.AttnFLOPsPerPosition(true)/2*(c.ctx-math.Min(c.ctx, 128)); math.Abs(got-want) > 1e-6*want+1e-9 {
			t.Errorf("context %g: the window saves %g FLOPs, want %g", c.ctx, got, want)
		}
	}
	if s := slidingShare(oss); s != 0.5 {
		t.Errorf("sliding share %g, want 0.5 (every other layer)", s)
	}
}
