package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/perf/benchfmt"

	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/golden"
	"github.com/xrun-dev/xrun/results/layout"
)

// TestReportFormats re-renders a results directory in every format.
func TestReportFormats(t *testing.T) {
	for _, format := range []string{"text", "markdown", "csv", "json", "bench"} {
		r := runCLI(t, nil, "report", fixture("gemm"), "--format", format)
		if r.code != exitOK {
			t.Fatalf("%s: exit %d, stderr %q", format, r.code, r.stderr)
		}
		switch format {
		case "json":
			if want := string(readFixture(t, "gemm")); r.stdout != want {
				t.Error("json: not the stored results.json")
			}
		case "markdown":
			want, err := os.ReadFile(filepath.Join(fixture("gemm"), "results.md"))
			if err != nil || r.stdout != string(want) {
				t.Errorf("markdown: not the stored results.md (%v)", err)
			}
		default:
			// package results golden-tests the renderers; the command
			// must print exactly that.
			want, err := os.ReadFile(filepath.Join(resultsTestdata, "report-gemm."+format+".golden"))
			if err != nil || r.stdout != string(want) {
				t.Errorf("%s: differs from results/testdata/report-gemm.%s.golden (%v)", format, format, err)
			}
		}
	}
}

// TestReportBenchParses: the bench output is valid Go benchmark format.
func TestReportBenchParses(t *testing.T) {
	r := runCLI(t, nil, "report", fixture("nightly-base"), "--format", "bench", "--metric", "request_throughput_req_s,total_latency_ms")
	if r.code != exitOK {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	rd := benchfmt.NewReader(strings.NewReader(r.stdout), "stdout")
	n := 0
	for rd.Scan() {
		switch rec := rd.Result().(type) {
		case *benchfmt.SyntaxError:
			t.Fatal(rec)
		case *benchfmt.Result:
			n++
			if len(rec.Values) != 2 {
				t.Errorf("%s: %d values, want the 2 asked for", rec.Name, len(rec.Values))
			}
		}
	}
	if n != 4*6 {
		t.Errorf("%d results, want 24 (4 cells x 6 repeats)", n)
	}
}

func TestReportBadInputExits2(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "results.json")
	os.WriteFile(bad, bytes.Replace(readFixture(t, "moe"), []byte(`"schema_version": 1`), []byte(`"schema_version": 0`), 1), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"report", dir}, "results.json:2:21: schema_version: version 0 is not supported"},
		{[]string{"report", fixture("gemm"), "--format", "xml"}, `--format: unknown format "xml"; expected one of text, markdown, csv, json, bench`},
		{[]string{"report", fixture("gemm"), "--metric", "ttft"}, `--metric: unknown metric "ttft"`},
		{[]string{"report", filepath.Join(dir, "nope")}, "cannot read: no such file or directory"},
		{[]string{"report"}, "accepts 1 arg(s), received 0"},
	} {
		r := runCLI(t, nil, c.args...)
		if r.code != exitBadInput || !strings.Contains(r.stderr, c.want) || r.stdout != "" {
			t.Errorf("%v: exit %d, stderr %q, stdout %d bytes; want exit 2 and %q", c.args[1:], r.code, r.stderr, len(r.stdout), c.want)
		}
	}
}

// rooflineDir is a results directory written before xrun computed
// rooflines: results.json has none, but its GPU cell's records are there
// (cell.json, iterations.csv of two timed repeats and the profiled pass),
// beside a CPU cell's.
func rooflineDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	const iters = "pass,profiled,iteration,ctx_requests,ctx_tokens,gen_requests,start_ns,duration_ns,warmup,in_window\n" +
		"0,false,0,1,8,0,0,1000,true,false\n0,false,1,2,16,0,1000,4600,false,false\n0,false,2,0,0,2,5600,4500,false,false\n" +
		"1,false,0,1,8,0,0,1000,true,false\n1,false,1,2,16,0,1000,4600,false,false\n1,false,2,0,0,2,5600,4500,false,false\n"
	reps := []results.Metrics{
		{"num_requests": 2, "total_input_tokens": 16, "total_output_tokens": 4, "system_output_throughput_tok_s": 4.4e5, "total_latency_ms": 0.0091},
		{"num_requests": 2, "total_input_tokens": 16, "total_output_tokens": 4, "system_output_throughput_tok_s": 4e5, "total_latency_ms": 0.01},
	}
	r := &results.Results{Name: "old", Environment: results.Environment{GPUs: []results.GPU{{Name: "NVIDIA H100 80GB HBM3"}}}}
	for _, c := range []struct{ id, backend string }{{"gpu-0badc0de", "cuda/cublaslt"}, {"cpu-0badcafe", "cpu/cpu_gemm_blocked_avx2_6x16"}} {
		cdir := layout.CellDir(dir, c.id)
		if err := os.MkdirAll(cdir, 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(cdir, layout.IterationsFile), []byte(iters), 0o644)
		os.WriteFile(filepath.Join(cdir, layout.CellFile), []byte(`{"id":"`+c.id+`","backend":"`+c.backend+`"}`), 0o644)
		r.Cells = append(r.Cells, results.Cell{ID: c.id, Status: results.StatusOK, Repeats: reps,
			Params: results.Params{"model": "tiny-dense", "engine": strings.Split(c.backend, "/")[0]}})
	}
	if err := results.WriteDir(dir, r); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestReportAttachesRooflines: xrun report gives an old results
// directory's GPU cells their roofline; the CPU cell and results.md on
// disk stay as they were.
func TestReportAttachesRooflines(t *testing.T) {
	dir := rooflineDir(t)
	md, _ := os.ReadFile(filepath.Join(dir, layout.MarkdownFile))
	if strings.Contains(string(md), "roofline") {
		t.Fatalf("the old results.md already has a roofline:\n%s", md)
	}
	r := runCLI(t, nil, "report", dir, "--metric", "system_output_throughput_tok_s")
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	golden.Check(t, "cmd_report/roofline.text", r.stdout)
	r = runCLI(t, nil, "report", filepath.Join(dir, layout.JSONFile), "--format", "json")
	if r.code != exitOK || strings.Count(r.stdout, `"roofline"`) != 1 || !strings.Contains(r.stdout, `"device": "NVIDIA H100 80GB HBM3"`) {
		t.Errorf("exit %d; json output wants one roofline, on the H100:\n%s%s", r.code, r.stdout, r.stderr)
	}
	if again, _ := os.ReadFile(filepath.Join(dir, layout.MarkdownFile)); !bytes.Equal(again, md) {
		t.Error("xrun report rewrote results.md")
	}
	// Without the cell's records, no roofline, and why only at debug level.
	os.Remove(filepath.Join(layout.CellDir(dir, "gpu-0badc0de"), layout.IterationsFile))
	r = runCLI(t, nil, "report", dir, "--log-level", "debug", "--log-format", "json")
	if r.code != exitOK || strings.Contains(r.stdout, "roofline") || !strings.Contains(r.stderr, "cell gpu-0badc0de: no roofline") {
		t.Errorf("exit %d without iterations.csv:\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestDiffAttachesRooflines: xrun diff against results written before
// xrun computed rooflines gives their GPU cells one from the cells'
// records too, so the % roofline table compares fractions.
func TestDiffAttachesRooflines(t *testing.T) {
	dir := rooflineDir(t)
	r := runCLI(t, nil, "diff", dir, dir, "--format", "json")
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, `"old_fraction"`) || strings.Contains(r.stdout, `"old_fraction": null`) || !strings.Contains(r.stdout, `"delta": 0`) {
		t.Errorf("a diff of old results with itself wants the roofline on both sides, delta 0:\n%s", r.stdout)
	}
}

// TestCellFileNames: engine/profile reads the files the runner's worker
// writes under names of its own (the runner imports it, not the other
// way round); they must be the same.
func TestCellFileNames(t *testing.T) {
	if layout.IterationsFile != layout.IterationsFile || layout.ExpertLoadFile != layout.ExpertLoadFile || layout.CellFile != layout.CellFile {
		t.Errorf("engine/profile reads %s, %s, %s; the runner writes %s, %s, %s", layout.IterationsFile, layout.ExpertLoadFile, layout.CellFile,
			layout.IterationsFile, layout.ExpertLoadFile, layout.CellFile)
	}
}
