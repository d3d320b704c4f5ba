package results

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xrun-dev/xrun/results/golden"
	"github.com/xrun-dev/xrun/results/layout"
)

// referenceStudy is a perf-overview-like study on an H100: three ISL/OSL
// rows measured, one failed, a reference with H100 and H200 values (the
// H200 ones match no cell) and a row for a length the study did not run.
func referenceStudy() *Results {
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	r := &Results{
		SchemaVersion: SchemaVersion, Name: "perf-overview", Description: "xrun against a published table",
		Spec:        []byte(`{"name":"perf-overview"}`),
		Environment: Environment{Host: "h100", OS: "linux/amd64", GPUs: []GPU{{Name: "NVIDIA H100 80GB HBM3", Driver: "580.159.04"}}},
		Axes:        []Axis{{Name: "dataset.input_mean", Values: []any{128, 2048}}, {Name: "dataset.output_mean", Values: []any{128, 2048}}},
		Started:     t0, Finished: t0.Add(time.Hour),
		Reference: &Reference{Name: "trtllm-perf-overview", Source: "TensorRT-LLM docs/source/performance/perf-overview.md, Llama 3.1 8B, TP1, FP8",
			Metric: "system_output_throughput_tok_s", Rows: []ReferenceRow{
				{Match: map[string]any{"dataset.input_mean": 128, "dataset.output_mean": 128}, GPU: "H100", Value: 28312},
				{Match: map[string]any{"dataset.input_mean": 128, "dataset.output_mean": 128}, GPU: "H200", Value: 27911},
				{Match: map[string]any{"dataset.input_mean": 128, "dataset.output_mean": 2048}, GPU: "H100", Value: 22714},
				{Match: map[string]any{"dataset.input_mean": 2048, "dataset.output_mean": 128}, GPU: "H100", Value: 3450},
				{Match: map[string]any{"dataset.input_mean": 2048, "dataset.output_mean": 2048}, GPU: "H100", Value: 9305},
				{Match: map[string]any{"dataset.input_mean": 5000, "dataset.output_mean": 500}, GPU: "H100", Value: 3459},
			}},
	}
	cell := func(id string, in, out int, status Status, tok ...float64) Cell {
		c := Cell{ID: id, Status: status, Params: Params{"engine": "cuda", "model": "llama-3.1-8b", "dtype": "fp8",
			"dataset.input_mean": in, "dataset.output_mean": out}}
		for _, v := range tok {
			c.Repeats = append(c.Repeats, Metrics{"system_output_throughput_tok_s": v})
		}
		if status != StatusOK {
			c.Error = "out of memory"
		}
		return c
	}
	r.Cells = []Cell{
		cell("in128_out128", 128, 128, StatusOK, 21000, 21400, 20900),
		cell("in128_out2048", 128, 2048, StatusOK, 18000, 18100, 17950),
		cell("in2048_out128", 2048, 128, StatusOK, 3100, 3120, 3090),
		cell("in2048_out2048", 2048, 2048, StatusFailed),
	}
	return r
}

// TestReferenceGolden renders the reference table (results.md and the
// text report) from a written and re-read results.json, so that the
// match values' JSON round trip is covered.
func TestReferenceGolden(t *testing.T) {
	dir := t.TempDir()
	if err := WriteDir(dir, referenceStudy()); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, layout.MarkdownFile))
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "reference.markdown.golden", md)
	r, _, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if r.Reference == nil || len(r.Reference.Rows) != 6 {
		t.Fatalf("reference read back as %+v", r.Reference)
	}
	var text strings.Builder
	if err := Render(&text, "text", r, RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "reference.text.golden", []byte(text.String()))
}

// TestReferenceMatching: a row applies to a cell whose parameters equal
// its match (numbers whatever their Go type) and whose GPU contains the
// row's; cells without a GPU (the CPU) match only rows without one.
func TestReferenceMatching(t *testing.T) {
	c := &Cell{Params: Params{"engine": "cuda", "dataset.input_mean": float64(128), "gemm_plugin": "auto"}}
	for _, tc := range []struct {
		row  ReferenceRow
		gpu  string
		want bool
	}{
		{ReferenceRow{Match: map[string]any{"dataset.input_mean": 128}}, "", true},
		{ReferenceRow{Match: map[string]any{"dataset.input_mean": int64(128), "gemm_plugin": "auto"}, GPU: "H100"}, "NVIDIA H100 80GB HBM3", true},
		{ReferenceRow{Match: map[string]any{"dataset.input_mean": 128}, GPU: "H200"}, "NVIDIA H100 80GB HBM3", false},
		{ReferenceRow{Match: map[string]any{"dataset.input_mean": 128}, GPU: "H100"}, "", false},
		{ReferenceRow{Match: map[string]any{"dataset.input_mean": 129}}, "", false},
		{ReferenceRow{Match: map[string]any{"dataset.output_mean": 128}}, "", false},
	} {
		if got := tc.row.matches(c, tc.gpu); got != tc.want {
			t.Errorf("%s on %q: %v, want %v", tc.row.describe(), tc.gpu, got, tc.want)
		}
	}
	r := referenceStudy()
	if g := cellGPU(r, &r.Cells[0]); g != "NVIDIA H100 80GB HBM3" {
		t.Errorf("cell GPU %q", g)
	}
	r.Cells[0].Params["engine"] = "cpu"
	if g := cellGPU(r, &r.Cells[0]); g != "" {
		t.Errorf("a cpu cell's GPU is %q", g)
	}
	r.Reference = nil
	if referenceTable(r, axes(r)) != nil {
		t.Error("a table without a reference")
	}
}
