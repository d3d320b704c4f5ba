package results

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/perf/benchfmt"
	"golang.org/x/perf/benchmath"
	"golang.org/x/perf/benchproc"
	"golang.org/x/perf/benchunit"
)

func renderBench(t *testing.T, fixture string) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Render(&buf, "bench", loadFixture(t, fixture), RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestBenchFormatReadsBack parses `report --format bench` with benchfmt and
// groups it the way benchstat does (benchproc projections, benchmath
// summaries and U tests): the medians and verdicts must be xrun's own.
func TestBenchFormatReadsBack(t *testing.T) {
	r := loadFixture(t, "gemm")
	rd := benchfmt.NewReader(bytes.NewReader(renderBench(t, "gemm")), "gemm.bench")
	var parser benchproc.ProjectionParser
	filter, _ := benchproc.NewFilter("*")
	rowBy, err := parser.Parse("/batch_size", filter)
	if err != nil {
		t.Fatal(err)
	}
	colBy, err := parser.Parse("/gemm_plugin", filter)
	if err != nil {
		t.Fatal(err)
	}
	type key struct {
		row, col benchproc.Key
		unit     string
	}
	samples := map[key][]float64{}
	var results int
	for rd.Scan() {
		switch rec := rd.Result().(type) {
		case *benchfmt.SyntaxError:
			t.Fatalf("benchfmt rejects the output: %v", rec)
		case *benchfmt.Result:
			results++
			if _, procs := rec.Name.Parts(); len(procs) > 0 && strings.HasPrefix(string(procs[len(procs)-1]), "-") {
				t.Errorf("%s: read as having a GOMAXPROCS suffix", rec.Name)
			}
			if len(rec.Values) != len(presentMetrics(r)) {
				t.Errorf("%s: %d values, want %d", rec.Name, len(rec.Values), len(presentMetrics(r)))
			}
			for _, v := range rec.Values {
				k := key{rowBy.Project(rec), colBy.Project(rec), v.Unit}
				samples[k] = append(samples[k], v.Value)
			}
		}
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	if want := 7 * 6; results != want { // 7 ok cells, 6 repeats each
		t.Errorf("%d results, want %d", results, want)
	}
	units := rd.Units()
	if units.GetBetter("req/s") != 1 || units.GetBetter("total-latency-ms") != -1 {
		t.Errorf("better= metadata lost: req/s %d, total-latency-ms %d", units.GetBetter("req/s"), units.GetBetter("total-latency-ms"))
	}
	if units.GetAssumption("requests") != benchmath.AssumeExact {
		t.Error("counts are not assume=exact")
	}

	// Every cell's median through benchstat's machinery equals xrun's.
	for _, c := range r.Cells {
		if c.Status != StatusOK {
			continue
		}
		for k, vals := range samples {
			if k.row.StringValues() != paramString(&c, "batch_size") || k.col.StringValues() != paramString(&c, "gemm_plugin") || k.unit != "req/s" {
				continue
			}
			s := benchmath.AssumeNothing.Summary(benchmath.NewSample(vals, &benchmath.DefaultThresholds), Confidence)
			if got, want := roundValue(s.Center), Summarize(column(c.Repeats, "request_throughput_req_s")).Median; got != want {
				t.Errorf("%s: benchstat median %v, xrun %v", c.ID, got, want)
			}
		}
	}
	// And the comparison that xrun's pivot calls "slower" is significant
	// for benchstat too.
	var auto, disable []float64
	for k, vals := range samples {
		if k.row.StringValues() == "64" && k.unit == "req/s" {
			if k.col.StringValues() == "auto" {
				auto = vals
			} else {
				disable = vals
			}
		}
	}
	cmp := benchmath.AssumeNothing.Compare(benchmath.NewSample(disable, &benchmath.DefaultThresholds), benchmath.NewSample(auto, &benchmath.DefaultThresholds))
	if cmp.P >= Alpha {
		t.Errorf("batch 64 auto vs disable: benchstat p=%v, xrun says slower", cmp.P)
	}
}

// TestBenchUnits: units are unique and left alone by benchunit.Tidy,
// which would otherwise rescale anything with "ns" or "MB" in it.
func TestBenchUnits(t *testing.T) {
	seen := map[string]string{}
	for _, m := range RegisteredMetrics() {
		if other, ok := seen[m.BenchUnit]; ok {
			t.Errorf("%s and %s share bench unit %s", m.Key, other, m.BenchUnit)
		}
		seen[m.BenchUnit] = m.Key
		if v, u := benchunit.Tidy(1, m.BenchUnit); v != 1 || u != m.BenchUnit || strings.ContainsAny(m.BenchUnit, " \t") {
			t.Errorf("%s: bench unit %q tidies to %v %q", m.Key, m.BenchUnit, v, u)
		}
	}
	if u := MetricFor("tokens_per_ns").BenchUnit; strings.Contains(u, "ns") {
		t.Errorf("unknown metric's bench unit %q contains ns", u)
	}
}

func TestAvoidProcsSuffix(t *testing.T) {
	for in, want := range map[string]string{
		"BenchmarkX/profile_window=100-150": "BenchmarkX/profile_window=100_150",
		"BenchmarkX/model=llama-3.1-8b":     "BenchmarkX/model=llama-3.1-8b",
		"BenchmarkX/batch_size=16":          "BenchmarkX/batch_size=16",
	} {
		if got := avoidProcsSuffix(in); got != want {
			t.Errorf("avoidProcsSuffix(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestBenchstatCommand runs the real benchstat on `report --format bench`
// output, comparing gemm_plugin columns. `make benchstat-check` does the
// same from the command line.
func TestBenchstatCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds golang.org/x/perf/cmd/benchstat")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	file := filepath.Join(t.TempDir(), "gemm.bench")
	if err := os.WriteFile(file, renderBench(t, "gemm"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(goTool, "run", "golang.org/x/perf/cmd/benchstat", "-col", "/gemm_plugin@(disable auto)", file)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("benchstat: %v\n%s", err, out)
	}
	text := string(out)
	if strings.HasPrefix(text, "benchstat:") {
		t.Fatalf("benchstat failed:\n%s", text)
	}
	for _, want := range []string{"req/s", "total-latency-ms", "disable", "auto", "vs base", "batch_size=64"} {
		if !strings.Contains(text, want) {
			t.Errorf("benchstat output lacks %q:\n%s", want, text)
		}
	}
	t.Logf("benchstat output:\n%s", text)
}
