//go:build cgo && linux

package cuda

import (
	"strconv"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/engine"
)

// TestSwitchesMatchKernels: the switch table's ranges and defaults are
// the kernels' limits, and every attention configuration's name is one
// XRUN_CUDA_ATTN_TC takes.
func TestSwitchesMatchKernels(t *testing.T) {
	s := &engine.Switches
	if m := s.CUDAGemvMaxM; m.Min != 0 || m.Max != GemvMaxM || m.Default != strconv.Itoa(gemvRowsDefault) {
		t.Errorf("%s: %d..%d, default %s; the GEMV takes 0..%d, default %d", m.Name, m.Min, m.Max, m.Default, GemvMaxM, gemvRowsDefault)
	}
	if h := s.CUDAMoEHints; h.Min != 0 || h.Max != 3 || h.Default != strconv.Itoa(moeDefaultFlags) {
		t.Errorf("%s: %d..%d, default %s; the kernels take 0..3, default %d", h.Name, h.Min, h.Max, h.Default, moeDefaultFlags)
	}
	for _, set := range []map[int][]attnTC{attnTCKernels, attnTCRopeKernels} {
		for _, cs := range set {
			for _, c := range cs {
				if v := s.CUDAAttnTC.Value(func(string) string { return c.String() }); v != c.String() {
					t.Errorf("%s=%s is taken as %q", s.CUDAAttnTC.Name, c, v)
				}
			}
		}
	}
	// XRUN_CUDA_WGMMA_TILE takes every tile configuration and "wide", and
	// nothing else: a name it does not know would run the plan's tile.
	tiles := map[string]bool{"wide": true}
	for name := range tmaConfigs {
		tiles[name] = true
		if v := s.CUDAWgmmaTile.Value(func(string) string { return name }); v != name {
			t.Errorf("%s=%s is taken as %q", s.CUDAWgmmaTile.Name, name, v)
		}
	}
	for _, v := range strings.Split(s.CUDAWgmmaTile.Values, ", ") {
		if !tiles[strings.Trim(v, "`")] {
			t.Errorf("%s lists %s, no tile configuration", s.CUDAWgmmaTile.Name, v)
		}
	}
	for _, c := range []moeGemmConfig{moeGemmSmall, moeGemmMedium, moeGemmLarge} {
		if v := s.CUDAMoETile.Value(func(string) string { return c.name }); v != c.name {
			t.Errorf("%s=%s is taken as %q", s.CUDAMoETile.Name, c.name, v)
		}
	}
}
