package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/perf/benchfmt"
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
