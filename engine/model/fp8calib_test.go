package model_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/xrun-dev/xrun/engine/cpu"
	"github.com/xrun-dev/xrun/engine/model"
)

// fp8NoCalib has FP8 GEMMs and no calibration.
type fp8NoCalib struct{ model.Backend }

func (b fp8NoCalib) QuantizeFP8(w model.Tensor) (model.Tensor, error) {
	return b.Backend.(model.FP8GEMMs).QuantizeFP8(w)
}

// TestFP8CalibrationNeedsCalibrator: random weights in FP8 get static
// scales calibrated at load under auto and static, which a backend
// without FP8Calibrator refuses (an ErrNoFP8); dynamic needs none. An
// unknown scheme is refused on any backend.
func TestFP8CalibrationNeedsCalibrator(t *testing.T) {
	cfg := model.Config{Name: "m", Family: "llama", Hidden: 64, Layers: 1, Heads: 4, KVHeads: 2, HeadDim: 16, FFN: 64,
		Vocab: 100, RMSEps: 1e-5, RopeTheta: 10000, MaxPos: 64}
	be, err := cpu.New(model.BackendOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	for _, acts := range []model.FP8Activations{model.FP8ActAuto, model.FP8ActStatic} {
		_, err := model.New(fp8NoCalib{be}, cfg, model.Options{FP8: true, FP8Activations: acts})
		if !errors.Is(err, model.ErrNoFP8Calibration) || !errors.Is(err, model.ErrNoFP8) {
			t.Errorf("%v without a calibrator: %v, want ErrNoFP8Calibration (an ErrNoFP8)", acts, err)
		}
	}
	if _, err := model.New(fp8NoCalib{be}, cfg, model.Options{FP8: true, FP8Activations: model.FP8ActDynamic}); err != nil {
		t.Errorf("dynamic without a calibrator: %v", err)
	}
	if _, err := model.New(be, cfg, model.Options{FP8: true, FP8Activations: 7}); err == nil {
		t.Error("FP8Activations(7) accepted")
	}
}

// TestCalibrationTokens: the calibration batch is fixed (the same ids on
// every call, whatever else runs) and within the vocabulary.
func TestCalibrationTokens(t *testing.T) {
	a, b := model.CalibrationTokens(256, 1000), model.CalibrationTokens(256, 1000)
	if !slices.Equal(a, b) {
		t.Fatal("two calibration batches differ")
	}
	seen := map[int32]bool{}
	for _, id := range a {
		if id < 0 || id >= 1000 {
			t.Fatalf("token %d outside the vocabulary of 1000", id)
		}
		seen[id] = true
	}
	if len(seen) < 200 {
		t.Errorf("%d distinct tokens of 256 drawn from 1000", len(seen))
	}
	if p := model.CalibrationTokens(16, 1000); !slices.Equal(p, a[:16]) {
		t.Errorf("a shorter batch %v is not a prefix of the longer %v", p, a[:16])
	}
}
