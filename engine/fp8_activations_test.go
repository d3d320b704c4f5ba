package engine

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/xrun-dev/xrun/engine/cpu"
	"github.com/xrun-dev/xrun/engine/fp8"
	"github.com/xrun-dev/xrun/engine/model"
)

// TestFP8ActivationsCheckpoints: fp8_activations on FP8 checkpoints of
// each activation scheme, and on a bf16 one quantized at load. auto keeps
// the checkpoint's scheme and calibrates only what was quantized at load
// (unless the checkpoint's own activations are dynamic per tensor, which
// then holds for the whole model); static keeps an input_scale, makes
// per-token Matrix weights per tensor and calibrates whatever is dynamic;
// dynamic drops input_scale, keeps per token and calibrates nothing.
func TestFP8ActivationsCheckpoints(t *testing.T) {
	registerRecorder()
	src := filepath.Join("testdata", "hf", "tiny-llama")
	reqs, _ := goldenRequests(t, src)
	// Layer 1's MLP left unquantized, as checkpoints exclude layers.
	mixed := func(m map[string]model.HostTensor) {
		for _, p := range []string{"gate_proj", "up_proj", "down_proj"} {
			base := "model.layers.1.mlp." + p
			h, s := m[base+".weight"], m[base+".weight_scale"]
			scale, _ := s.Float32()
			f := make([]float32, len(h.Data))
			fp8.Dequantize(f, h.Data, scale[0])
			m[base+".weight"] = model.HostF32(h.Shape, f)
			delete(m, base+".weight_scale")
			delete(m, base+".input_scale")
		}
	}
	const static, perToken, dynamic = "static input_scale", "dynamic per token", "dynamic per tensor"
	type want struct {
		input     float32 // the QKV weight's, as uploaded
		perToken  bool
		calibrate bool
	}
	for _, c := range []struct {
		name   string
		ckpt   *ckpt // nil: the bf16 checkpoint itself
		scheme string
		auto   want
		static want
		dyn    want
	}{
		{"modelopt", &ckpt{style: "modelopt"}, static,
			want{0.017, false, false}, want{0.017, false, false}, want{0, false, false}},
		{"modelopt per token", &ckpt{style: "modelopt", perChannel: true, dynamic: "token"}, perToken,
			want{0, true, false}, want{0, false, true}, want{0, true, false}},
		{"compressed dynamic", &ckpt{style: "compressed", dynamic: "tensor"}, dynamic,
			want{0, false, false}, want{0, false, true}, want{0, false, false}},
		{"modelopt, a layer unquantized", &ckpt{style: "modelopt", edit: mixed}, static,
			want{0.017, false, true}, want{0.017, false, true}, want{0, false, false}},
		{"compressed dynamic, a layer unquantized", &ckpt{style: "compressed", dynamic: "tensor", edit: mixed}, dynamic,
			want{0, false, false}, want{0, false, true}, want{0, false, false}},
		{"bf16", nil, "", want{calibrate: true}, want{calibrate: true}, want{}},
	} {
		dir := src
		if c.ckpt != nil {
			dir, _ = writeFP8Checkpoint(t, src, *c.ckpt)
		}
		for _, a := range []struct {
			acts string
			want want
		}{{"", c.auto}, {"auto", c.auto}, {"static", c.static}, {"dynamic", c.dyn}} {
			runTokens(t, Config{Model: dir, Backend: "record-test", BatchSize: 2, Dtype: "fp8", FP8Activations: a.acts}, reqs)
			recorded.Lock()
			r := recorded.last
			recorded.Unlock()
			if got := r.calibrations > 0; got != a.want.calibrate {
				t.Errorf("%s (%s), fp8_activations %q: calibrated %v, want %v", c.name, c.scheme, a.acts, got, a.want.calibrate)
			}
			if c.ckpt == nil {
				if len(r.fp8) != 0 {
					t.Errorf("%s: %d F8_E4M3 uploads from a bf16 checkpoint", c.name, len(r.fp8))
				}
				continue
			}
			qkv, ok := r.fp8["model.layers.0.self_attn.qkv_proj.weight"]
			if !ok {
				t.Fatalf("%s: no FP8 QKV weight uploaded", c.name)
			}
			if s := qkv.FP8; s.Input != a.want.input || s.PerToken != a.want.perToken {
				t.Errorf("%s (%s), fp8_activations %q: QKV input scale %v, per token %v; want %v, %v", c.name, c.scheme, a.acts, s.Input, s.PerToken, a.want.input, a.want.perToken)
			}
		}
	}
}

// TestFP8ActivationsLogits: static and dynamic scales compute nearly the
// same logits, not the same ones (each is FP8's small error from float32);
// auto is static on random weights.
func TestFP8ActivationsLogits(t *testing.T) {
	ids := variedRequests(4)[3].InputIDs
	for _, name := range []string{"tiny-llama", "tiny-moe"} {
		logits := map[string][]float32{}
		for _, acts := range []string{"auto", "static", "dynamic"} {
			e := newEngine(t, Config{Model: name, Dtype: "fp8", FP8Activations: acts}).(*engine)
			logits[acts] = firstLogits(t, e, ids)
		}
		ref := firstLogits(t, newEngine(t, Config{Model: name}).(*engine), ids)
		if e := cpu.RelErr(logits["auto"], logits["static"]); e != 0 {
			t.Errorf("%s: auto differs from static by %g on random weights", name, e)
		}
		if e := cpu.RelErr(logits["static"], logits["dynamic"]); e == 0 || e > 0.1 {
			t.Errorf("%s: static against dynamic logits: rel err %g, want small and non-zero", name, e)
		}
		for _, acts := range []string{"static", "dynamic"} {
			e := cpu.RelErr(logits[acts], ref)
			t.Logf("%s fp8_activations %s: logits rel err %.4f against float32", name, acts, e)
			if e == 0 || e > 0.2 {
				t.Errorf("%s fp8_activations %s: rel err %g against float32", name, acts, e)
			}
		}
	}
}

// noCalibBackend is the CPU backend with FP8 GEMMs but no calibration.
type noCalibBackend struct{ model.Backend }

func (b noCalibBackend) QuantizeFP8(w model.Tensor) (model.Tensor, error) {
	return b.Backend.(model.FP8GEMMs).QuantizeFP8(w)
}

var registerNoCalib = sync.OnceFunc(func() {
	RegisterBackend("nocalib-test", func(o model.BackendOptions) (model.Backend, error) {
		b, err := cpu.New(o)
		if err != nil {
			return nil, err
		}
		return noCalibBackend{b}, nil
	})
})

// TestFP8ActivationsRefused: a value outside auto, static and dynamic,
// and static scales on a backend that cannot calibrate them, are
// ParamErrors naming fp8_activations; dynamic runs there, and so does
// any value with a dtype other than fp8, where it has no effect.
func TestFP8ActivationsRefused(t *testing.T) {
	registerNoCalib()
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Model: "tiny-llama", Dtype: "fp8", FP8Activations: "per-token"}, `fp8_activations: "per-token": auto, static or dynamic`},
		{Config{Model: "tiny-llama", Backend: "nocalib-test", Dtype: "fp8"}, `fp8_activations: "auto": fp8_activations auto gives model tiny-llama static FP8 input scales calibrated at load, which the nocalib-test backend (cpu`},
		{Config{Model: "tiny-moe", Backend: "nocalib-test", Dtype: "fp8", FP8Activations: "static"}, `fp8_activations: "static"`},
	} {
		_, err := New(context.Background(), c.cfg)
		var pe *ParamError
		if !errors.As(err, &pe) || pe.Field != "fp8_activations" || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want a ParamError saying %q", c.cfg, err, c.want)
		}
	}
	for _, cfg := range []Config{
		{Model: "tiny-llama", Backend: "nocalib-test", Dtype: "fp8", FP8Activations: "dynamic"},
		{Model: "tiny-llama", Backend: "nocalib-test", Dtype: "float32", FP8Activations: "static"},
	} {
		e := newEngine(t, cfg)
		if _, err := e.Run(context.Background(), mixedRequests(3), RunOptions{}); err != nil {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
}
