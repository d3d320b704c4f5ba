package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/results/layout"
)

// TestRunFP8 runs dtype fp8 and kv_cache_dtype fp8 (issue 22) through the
// CLI on the CPU backend: four cells (fp8 is not collapsed as the other
// dtypes are on the cpu engine, where they do not apply and are left out
// of the parameters), each cell's record keeps its dtype and KV cache
// dtype, and results.md sets the spec's reference beside the
// measured throughput of the cell it matches (the H100 row matches no cell
// on the CPU and is counted as another GPU's).
func TestRunFP8(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	r := runStudy(t, studyEnv(t), "testdata/cmd_run/fp8.yaml", "--out", dir)
	if r.code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", r.code, r.stderr)
	}
	res, cells := loadResults(t, dir)
	if len(cells) != 4 {
		t.Fatalf("%d cells, want 4", len(cells))
	}
	if res.Reference == nil || res.Reference.Name != "published" || len(res.Reference.Rows) != 2 {
		t.Errorf("results.json's reference: %+v", res.Reference)
	}
	seen := map[string]bool{}
	for id, c := range cells {
		// dtype bfloat16 does not apply on the cpu engine: left out.
		dt, kv := c.Params["dtype"], c.Params["kv_cache_dtype"]
		ds, _ := dt.(string)
		ks, _ := kv.(string)
		seen[ds+"/"+ks] = true
		b, err := os.ReadFile(cellFile(dir, id, layout.CellFile))
		if err != nil {
			t.Fatal(err)
		}
		var rec struct {
			Params map[string]any `json:"params"`
		}
		if err := json.Unmarshal(b, &rec); err != nil || rec.Params["dtype"] != dt || rec.Params["kv_cache_dtype"] != kv {
			t.Errorf("cell %s: cell.json params %v (%v), want dtype %v, kv_cache_dtype %v", id, rec.Params, err, dt, kv)
		}
	}
	for _, k := range []string{"/auto", "/fp8", "fp8/auto", "fp8/fp8"} {
		if !seen[k] {
			t.Errorf("no cell of dtype/kv_cache_dtype %s", k)
		}
	}
	md, err := os.ReadFile(filepath.Join(dir, layout.MarkdownFile))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"## Against published (Total Output Throughput (tokens/sec))",
		"| auto | fp8 | - |", // kv_cache_dtype, dtype, GPU
		"- published: a table for the test",
		"- 1 published rows are for GPUs this run did not use (H100)",
	}
	for _, w := range want {
		if !strings.Contains(string(md), w) {
			t.Errorf("results.md lacks %q:\n%s", w, md)
		}
	}
}
