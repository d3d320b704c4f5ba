package results

import (
	"errors"
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
	// The requests held at once: the KV cache's bound at 128/2048; the
	// 2048/128 cell's runner recorded none (an older build). The 128/2048
	// cell also recorded the most one iteration ran (paged: fewer than
	// its block tables), which the table shows.
	for i, held := range map[int]float64{0: 1960, 1: 444} {
		for _, m := range r.Cells[i].Repeats {
			m[MaxInFlightKey] = held
		}
	}
	for _, m := range r.Cells[1].Repeats {
		m[PeakInFlightKey] = 222
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

// TestReferenceShadowedRow: a row that matches cells an earlier row
// already took (first match counts) is not said to match no cell; the
// note names the row that counts instead.
func TestReferenceShadowedRow(t *testing.T) {
	r := referenceStudy()
	// Row 6 matches in128_out128 too, as row 0 does (and row 0 counts);
	// row 7 matches no cell at all.
	r.Reference.Rows = append(r.Reference.Rows,
		ReferenceRow{Match: map[string]any{"dataset.input_mean": 128, "dataset.output_mean": 128, "dtype": "fp8"}, Value: 30000},
		ReferenceRow{Match: map[string]any{"dataset.input_mean": 4096}, Value: 1000})
	tab := referenceTable(r, axes(r))
	var shadowed, unmatched bool
	for _, n := range tab.Notes {
		switch {
		case strings.Contains(n, "row 6 ") && strings.Contains(n, "matches no cell"):
			t.Errorf("a row whose cell an earlier row took: %q", n)
		case strings.Contains(n, "row 6 ") && strings.Contains(n, "row 0"):
			shadowed = true
		case strings.Contains(n, "row 7 ") && strings.Contains(n, "matches no cell"):
			unmatched = true
		}
	}
	if !shadowed || !unmatched {
		t.Errorf("notes %q: want row 6 shadowed by row 0 and row 7 matching no cell", tab.Notes)
	}
	if len(tab.Rows) != 4 {
		t.Errorf("%d rows, want one per matched cell (4)", len(tab.Rows))
	}
}

// A row's note shows request_rate inf and concurrency none as the spec
// and the tables write them, not as their stored 0.
func TestReferenceDescribeZeroWords(t *testing.T) {
	row := ReferenceRow{Match: map[string]any{"request_rate": 0.0, "concurrency": int64(0), "batch_size": int64(0)}, GPU: "H100"}
	if got, want := row.describe(), "batch_size=0, concurrency=none, request_rate=inf, gpu H100"; got != want {
		t.Errorf("describe = %q, want %q", got, want)
	}
}

// TestParseReferenceErrors: a results file's reference is checked as it
// is read, as its cells' parameters are: a match value that is no scalar,
// or a published value that is not positive, is the file's error (file,
// line, field), not one that comes later from rendering it.
func TestParseReferenceErrors(t *testing.T) {
	dir := t.TempDir()
	if err := WriteDir(dir, referenceStudy()); err != nil {
		t.Fatal(err)
	}
	valid, err := os.ReadFile(filepath.Join(dir, layout.JSONFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ old, new, want string }{
		{`"dataset.input_mean": 5000`, `"dataset.input_mean": {"x": 1}`, `reference.rows[5].match.dataset.input_mean: expected a string, number, bool or null`},
		{`"value": 3459`, `"value": -5`, `reference.rows[5].value: -5: expected the published value, a positive number`},
		{`"value": 3459`, `"value": 0`, `reference.rows[5].value: 0: expected the published value, a positive number`},
	} {
		data := strings.Replace(string(valid), c.old, c.new, 1)
		if data == string(valid) {
			t.Fatalf("%s is not in the file", c.old)
		}
		_, err := Parse([]byte(data), "bad.json")
		var fe *FileError
		if !errors.As(err, &fe) || !fe.BadInput() || fe.Line == 0 || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want a *FileError with a position saying %q", c.new, err, c.want)
		}
	}
}

// The writer refuses the published values the reader would refuse.
func TestWriteReferenceValue(t *testing.T) {
	r := referenceStudy()
	r.Reference.Rows[2].Value = 0
	if err := WriteDir(t.TempDir(), r); err == nil || !strings.Contains(err.Error(), "reference row 2: value 0") {
		t.Errorf("writing a reference value of 0: %v", err)
	}
}
