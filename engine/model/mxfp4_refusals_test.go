package model_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/engine/cpu"
	"github.com/xrun-dev/xrun/engine/model"
)

// noMXFP4 hides the CPU backend's MXFP4 experts.
type noMXFP4 struct{ model.Backend }

// TestMXFP4Refusals: Options.MXFP4 where it cannot run: a backend without
// MXFP4Experts, a dense model, FP8 GEMMs beside it, experts whose widths
// are no multiple of 32; and a MoE model it runs on.
func TestMXFP4Refusals(t *testing.T) {
	be, _ := cpu.New(model.BackendOptions{})
	defer be.Close()
	moe := model.Config{Name: "tiny-moe", Family: "mixtral", Hidden: 64, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16, FFN: 96,
		Vocab: 256, RMSEps: 1e-5, RopeTheta: 10000, MaxPos: 512, Experts: 4, TopK: 2, Routing: model.RoutingSoftmaxTopKRenorm}
	dense := moe
	dense.Experts, dense.TopK, dense.Routing = 0, 0, ""
	odd := moe
	odd.FFN = 80
	for _, c := range []struct {
		name string
		be   model.Backend
		cfg  model.Config
		opt  model.Options
		want string
	}{
		{"no MXFP4Experts", noMXFP4{be}, moe, model.Options{MXFP4: true}, model.ErrNoMXFP4.Error()},
		{"dense", be, dense, model.Options{MXFP4: true}, "without experts"},
		{"fp8", be, moe, model.Options{MXFP4: true, FP8: true}, "W4A8"},
		{"odd widths", be, odd, model.Options{MXFP4: true}, "multiples of 32"},
	} {
		_, err := model.New(c.be, c.cfg, c.opt)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
		if c.name == "no MXFP4Experts" && !errors.Is(err, model.ErrNoMXFP4) {
			t.Errorf("%s: %v is not ErrNoMXFP4", c.name, err)
		}
	}
	if _, err := model.New(be, moe, model.Options{MXFP4: true}); err != nil {
		t.Errorf("MXFP4 experts on the CPU: %v", err)
	}
}
