package runner

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/profile"
	"github.com/xrun-dev/xrun/results/layout"
)

// TestCellRooflineRecordedMoEWeights: how the engine kept a MoE cell's
// experts, as its record says (moe_weights resolved where it ran), is what
// its roofline counts, whatever the parameter asked for; without a
// record the parameter resolved as on the CUDA backend.
func TestCellRooflineRecordedMoEWeights(t *testing.T) {
	r := rooflineFixture()
	c := r.Cells[1] // moe-gpu, tiny-moe
	bytesWith := func(rec, param string) float64 {
		t.Helper()
		dir := t.TempDir()
		src := fixtureCellDir("moe-gpu")
		entries, err := os.ReadDir(src)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(src, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if rec != "" {
			if err := os.WriteFile(filepath.Join(dir, layout.CellFile), []byte(`{"backend": "cuda/cublaslt", "moe_weights": "`+rec+`"}`), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		cell := c
		cell.Params = map[string]any{}
		for k, v := range c.Params {
			cell.Params[k] = v
		}
		if param != "" {
			cell.Params["moe_weights"] = param
		}
		rf, err := cellRoofline(dir, &cell, r.Environment)
		if err != nil || rf == nil {
			t.Fatalf("record %q, param %q: %v, %v", rec, param, rf, err)
		}
		return rf.Bytes
	}
	bf16, mx := bytesWith("", ""), bytesWith("", "mxfp4")
	if !(mx < bf16) {
		t.Fatalf("moe_weights mxfp4: %g bytes, auto %g; want fewer", mx, bf16)
	}
	if got := bytesWith("mxfp4", ""); got != mx {
		t.Errorf("recorded mxfp4, parameter auto: %g bytes, want mxfp4's %g", got, mx)
	}
	if got := bytesWith("bf16", "mxfp4"); got != bf16 {
		t.Errorf("recorded bf16, parameter mxfp4: %g bytes, want bf16's %g", got, bf16)
	}
}

// TestPassFormats: a profiled pass's diagnosis counts the formats its
// engine ran: dtype and kv_cache_dtype from the engine configuration, the
// experts as the engine kept them (moe_weights auto resolved); an
// external engine's are its tool's, not counted.
func TestPassFormats(t *testing.T) {
	for _, c := range []struct {
		cfg    engine.Config
		params map[string]any
		want   profile.Formats
	}{
		{engine.Config{Model: "tiny-moe", Backend: "cpu", MoEWeights: "mxfp4", KVCacheDtype: "fp8"}, map[string]any{"engine": "cpu"},
			profile.Formats{KVFP8: true, MXFP4Experts: true}},
		{engine.Config{Model: "tiny-moe", Backend: "cpu", MoEWeights: "auto"}, map[string]any{"engine": "cpu"}, profile.Formats{}},
		{engine.Config{Model: "tiny-llama", Backend: "cpu", Dtype: "fp8"}, map[string]any{"engine": "cpu"}, profile.Formats{FP8: true}},
		{engine.Config{Model: "tiny-llama", Backend: "cpu", Dtype: "fp8"}, map[string]any{"engine": "command"}, profile.Formats{}},
	} {
		c.cfg.BatchSize, c.cfg.Threads = 1, 1
		e, err := engine.New(context.Background(), c.cfg)
		if err != nil {
			t.Fatalf("%+v: %v", c.cfg, err)
		}
		if got := passFormats(c.params, c.cfg, e); got != c.want {
			t.Errorf("%s %v: formats %+v, want %+v", c.cfg.Model, c.params, got, c.want)
		}
		e.Close()
	}
}
