package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/results/htmlreport"
	"github.com/xrun-dev/xrun/results/layout"
)

// gpuStudy is package htmlreport's fixture with every kind of chart: a
// results directory whose cells/ hold telemetry, pass times, iterations
// and expert loads.
const gpuStudy = "../../results/htmlreport/testdata/gpu-study"

// requireHTMLPage checks what the CLI's page must have: a whole document
// with every section and the charts named (package htmlreport validates
// the markup itself; the browser test renders it).
func requireHTMLPage(t *testing.T, page string, sections, charts []string) {
	t.Helper()
	if !strings.HasPrefix(page, "<!DOCTYPE html>") || !strings.HasSuffix(strings.TrimSpace(page), "</html>") {
		t.Fatalf("not a whole HTML page: %.200q", page)
	}
	for _, s := range sections {
		if !strings.Contains(page, `<section id="`+s+`">`) {
			t.Errorf("no section %q", s)
		}
	}
	for _, c := range charts {
		if !strings.Contains(page, `class="chart" data-chart="`+c+`"`) {
			t.Errorf("no chart %q", c)
		}
	}
	for _, bad := range []string{"<script", "<link", " src=", `href="http`, `class="error"`} {
		if strings.Contains(page, bad) {
			t.Errorf("the page has %q", bad)
		}
	}
}

// TestReportHTML: xrun report --format html draws the directory's charts,
// the cells' telemetry over time included, to stdout or --output.
func TestReportHTML(t *testing.T) {
	r := runCLI(t, nil, "report", gpuStudy, "--format", "html")
	if r.code != exitOK || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	requireHTMLPage(t, r.stdout, htmlreport.StudySections, []string{"throughput-batch_size", "throughput-latency",
		"telemetry-bs64_learned-c0de0002", "expert-load-bs64_learned-c0de0002", "kernels-bs64_learned-c0de0002", "energy-energy_j_per_output_token"})
	if !strings.Contains(r.stdout, "xrun run experiments/moe-gpu.yaml --set repeats=6 --set &#39;matrix.batch_size=[16,64]&#39; --only id=bs16_learned-c0de0000") {
		t.Error("no reproduction command with the spec file and its --set arguments")
	}

	out := filepath.Join(t.TempDir(), "page.html")
	w := runCLI(t, nil, "report", filepath.Join(gpuStudy, layout.JSONFile), "--format", "html", "--output", out, "--metric", "request_throughput_req_s")
	if w.code != exitOK || w.stdout != "" {
		t.Fatalf("--output: exit %d, stdout %d bytes, stderr %q", w.code, len(w.stdout), w.stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	requireHTMLPage(t, string(b), htmlreport.StudySections, []string{"compare-routing_mode-request_throughput_req_s", "telemetry-bs16_learned-c0de0000"})
	if strings.Contains(string(b), `data-chart="compare-routing_mode-total_latency_ms"`) {
		t.Error("--metric request_throughput_req_s: the page compares other metrics too")
	}

	// --output works for every format.
	csv := filepath.Join(t.TempDir(), "gemm.csv")
	if c := runCLI(t, nil, "report", fixture("gemm"), "--format", "csv", "--output", csv); c.code != exitOK || c.stdout != "" {
		t.Fatalf("csv --output: exit %d, stderr %q", c.code, c.stderr)
	}
	want, _ := os.ReadFile(filepath.Join(resultsTestdata, "report-gemm.csv.golden"))
	if got, _ := os.ReadFile(csv); string(got) != string(want) {
		t.Error("csv --output: not the csv that stdout gets")
	}
}

// TestReportHTMLBadOutput: an --output that cannot be written is bad
// input, and nothing is left behind.
func TestReportHTMLBadOutput(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "missing", "page.html")
	r := runCLI(t, nil, "report", gpuStudy, "--format", "html", "--output", out)
	if r.code != exitBadInput || !strings.Contains(r.stderr, "--output: writing "+out) || r.stdout != "" {
		t.Errorf("exit %d, stderr %q; want 2 naming --output", r.code, r.stderr)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("left %d entries behind", len(entries))
	}
}

// TestDiffHTML: xrun diff --format html prints the page and keeps the
// diff's exit status.
func TestDiffHTML(t *testing.T) {
	for _, c := range []struct {
		old, new string
		code     int
		verdict  string
		charts   []string
	}{
		{"nightly-base", "nightly-slow", exitRegression, "<strong>REGRESSION</strong>", []string{"delta-all"}},
		{"gemm-profiled", "gemm-profiled-new", exitOK, "<strong>", []string{"delta-all", "kernels-bs64-auto-4c6a7a99"}},
		{"nightly-base", "nightly-same", exitOK, "<strong>OK</strong>", []string{"delta-all"}},
	} {
		r := runCLI(t, nil, "diff", fixture(c.old), fixture(c.new), "--format", "html")
		if r.code != c.code {
			t.Fatalf("%s → %s: exit %d, want %d\n%s", c.old, c.new, r.code, c.code, r.stderr)
		}
		requireHTMLPage(t, r.stdout, htmlreport.DiffSections, c.charts)
		if !strings.Contains(r.stdout, c.verdict) {
			t.Errorf("%s → %s: no verdict %q", c.old, c.new, c.verdict)
		}
	}
}

// TestRunWritesReportHTML: `make run` runs the quickstart as `xrun run
// experiments/quickstart.yaml` from the repository root, and
// results/quickstart/report.html is there afterwards (a smaller dataset
// here, on the CPU backend).
func TestRunWritesReportHTML(t *testing.T) {
	spec, err := filepath.Abs(quickstartSpec)
	if err != nil {
		t.Fatal(err)
	}
	env := studyEnv(t)
	wd := t.TempDir()
	t.Chdir(wd)
	r := runStudy(t, env, "run", "--fresh", spec, "--set", "params.dataset.num_requests=4", "--set", "repeats=2", "--set", "params.engine=cpu")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	b, err := os.ReadFile(filepath.Join(wd, "results", "quickstart", layout.HTMLFile))
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	requireHTMLPage(t, page, htmlreport.StudySections, []string{"throughput-batch_size", "throughput-latency", "compare-gemm_plugin-system_output_throughput_tok_s"})
	if !strings.Contains(page, "xrun run "+spec+" --set params.dataset.num_requests=4 --set repeats=2 --set params.engine=cpu --only id=bs1_gemm-auto-") {
		t.Error("no reproduction command naming the spec file and its --set arguments")
	}
	if strings.Contains(page, "not run yet") {
		t.Error("report.html is not the final one: a cell still reads as not run")
	}
}
