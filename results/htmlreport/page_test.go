package htmlreport

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/engine/profile"
	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/golden"
	"github.com/xrun-dev/xrun/results/layout"
)

// resultsFixtures are package results' synthetic results directories
// (results.json only), which the report and diff goldens there use too.
const resultsFixtures = "../testdata"

// studyFixtures are the results the page is tested on: package results'
// fixtures, and gpu-study, whose cells/ has every file a chart reads.
var studyFixtures = map[string]string{
	"gemm":          filepath.Join(resultsFixtures, "gemm"),
	"gemm-profiled": filepath.Join(resultsFixtures, "gemm-profiled"),
	"moe":           filepath.Join(resultsFixtures, "moe"),
	"roofline":      filepath.Join(resultsFixtures, "roofline"),
	"nightly-base":  filepath.Join(resultsFixtures, "nightly-base"),
	"gpu-study":     gpuStudyDir,
}

func loadStudy(t testing.TB, dir string) *results.Results {
	t.Helper()
	r, _, err := results.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func studyOptions(dir string) Options { return Options{Dir: dir, Stage: profile.MoEStage} }

// TestStudyGolden: the data behind every chart of report.html, for each
// fixture.
func TestStudyGolden(t *testing.T) {
	for name, dir := range studyFixtures {
		t.Run(name, func(t *testing.T) {
			b, err := StudyJSON(loadStudy(t, dir), studyOptions(dir))
			if err != nil {
				t.Fatal(err)
			}
			golden.Check(t, name+".study.json", b)
		})
	}
}

// expectedCharts are data-chart names each fixture's page must have.
var expectedCharts = map[string][]string{
	"gemm": {"throughput-batch_size", "throughput-latency", "compare-gemm_plugin-system_output_throughput_tok_s",
		"compare-gemm_plugin-total_latency_ms"},
	"gemm-profiled": {"throughput-batch_size", "throughput-latency", "compare-gemm_plugin-request_throughput_req_s",
		"kernels-bs64-auto-4c6a7a99", "kernel-categories-bs64-auto-4c6a7a99", "kernel-pair-bs64-disable-c20762e2-bs64-auto-4c6a7a99"},
	"moe":          {"throughput-batch_size", "compare-routing_mode-system_output_throughput_tok_s", "expert-load-bs64-learned-a9fb6ca4"},
	"roofline":     {"throughput-cells", "throughput-latency", "expert-load-mixtral-8x7b-bs64-519d81b8"},
	"nightly-base": {"throughput-batch_size", "throughput-latency"},
	"gpu-study": {"throughput-batch_size", "throughput-latency", "compare-routing_mode-system_output_throughput_tok_s",
		"compare-batch_size-total_latency_ms", "kernels-bs64_learned-c0de0002", "kernel-categories-bs64_perfect-c0de0003",
		"kernel-pair-bs64_learned-c0de0002-bs64_perfect-c0de0003", "telemetry-bs64_learned-c0de0002", "telemetry-bs16_perfect-c0de0001",
		"expert-load-bs16_learned-c0de0000", "energy-" + EnergyPerTokenMetric, "energy-" + TokensPerWattMetric},
}

// TestStudyPage: every fixture's report.html is well-formed, has every
// section in order and the charts its data asks for, each an <svg> in an
// element of class chart, and refers to nothing outside itself.
func TestStudyPage(t *testing.T) {
	for name, dir := range studyFixtures {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := Write(&buf, loadStudy(t, dir), studyOptions(dir)); err != nil {
				t.Fatal(err)
			}
			doc := checkPage(t, buf.Bytes())
			if !slices.Equal(doc.sections, StudySections) {
				t.Errorf("sections %v, want %v", doc.sections, StudySections)
			}
			for _, c := range expectedCharts[name] {
				if !slices.Contains(doc.charts, c) {
					t.Errorf("no chart %q; the page has %v", c, doc.charts)
				}
			}
		})
	}
}

// page is what checkPage found in a page.
type pageDoc struct {
	sections []string
	charts   []string
	text     string
}

// checkPage parses a page as XML (the template writes XHTML-compatible
// HTML, so a strict XML parser checks that every element is closed and
// nested) and checks what a browser test would: each chart an element of
// class chart with a data-chart name holding one <svg>, no chart that
// failed to draw, no reference outside the file (no src, no link, no
// script, no href but to a fragment, no url() in the stylesheet).
func checkPage(t *testing.T, page []byte) pageDoc {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(page))
	dec.Strict = true
	var doc pageDoc
	var stack []string
	var text strings.Builder
	type chart struct {
		name string
		svgs int
		err  bool
	}
	var open []*chart
	seen := map[string]bool{}
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed: %v", err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			name := el.Name.Local
			stack = append(stack, name)
			attrs := map[string]string{}
			for _, a := range el.Attr {
				attrs[a.Name.Local] = a.Value
			}
			switch name {
			case "script", "link", "img", "iframe", "object", "embed", "image", "use":
				t.Errorf("<%s> on the page: it must load nothing", name)
			case "section":
				doc.sections = append(doc.sections, attrs["id"])
			case "svg":
				if len(open) > 0 && open[len(open)-1] != nil {
					open[len(open)-1].svgs++
				} else if !slices.Contains(stack[:len(stack)-1], "figure") {
					t.Error("an <svg> outside an element of class chart")
				}
			case "p":
				if attrs["class"] == "error" && len(open) > 0 && open[len(open)-1] != nil {
					open[len(open)-1].err = true
				}
			}
			for _, k := range []string{"src", "srcset", "action", "data"} {
				if _, ok := attrs[k]; ok {
					t.Errorf("<%s %s=%q>: the page must load nothing", name, k, attrs[k])
				}
			}
			if h, ok := attrs["href"]; ok && !strings.HasPrefix(h, "#") {
				t.Errorf("<%s href=%q>: only links within the page", name, h)
			}
			if strings.Contains(attrs["class"], "chart") {
				c := &chart{name: attrs["data-chart"]}
				if c.name == "" {
					t.Errorf("<%s class=chart> without data-chart", name)
				}
				if seen[c.name] {
					t.Errorf("chart %q twice", c.name)
				}
				seen[c.name] = true
				open = append(open, c)
			} else {
				open = append(open, nil)
			}
		case xml.EndElement:
			c := open[len(open)-1]
			open, stack = open[:len(open)-1], stack[:len(stack)-1]
			if c != nil {
				switch {
				case c.err:
					t.Errorf("chart %q could not be drawn", c.name)
				case c.svgs != 1:
					t.Errorf("chart %q has %d <svg>, want 1", c.name, c.svgs)
				default:
					doc.charts = append(doc.charts, c.name)
				}
			}
		case xml.CharData:
			if slices.Contains(stack, "style") && strings.Contains(string(el), "url(") {
				t.Error("the stylesheet refers to a url()")
			}
			text.Write(el)
		}
	}
	doc.text = text.String()
	return doc
}

// TestStudyPageCaps: with one chart a cell, the page says which cells it
// left without charts.
func TestStudyPageCaps(t *testing.T) {
	r := loadStudy(t, gpuStudyDir)
	o := studyOptions(gpuStudyDir)
	o.MaxCellCharts = 1
	n, err := results.Normalized(r)
	if err != nil {
		t.Fatal(err)
	}
	st := BuildStudy(n, o)
	if len(st.Telemetry) != 1 || len(st.MoE) != 1 || len(st.Profiles) != 1 || len(st.KernelPairs) != 1 {
		t.Fatalf("capped to 1: %d telemetry, %d MoE, %d profiles, %d kernel pairs", len(st.Telemetry), len(st.MoE), len(st.Profiles), len(st.KernelPairs))
	}
	if st.Telemetry[0].Cell != "bs64_learned-c0de0002" {
		t.Errorf("telemetry charted for %s, want the throttled cell first", st.Telemetry[0].Cell)
	}
	if len(st.Throttle) != 4 {
		t.Errorf("%d throttle verdicts, want every cell's (4)", len(st.Throttle))
	}
	var buf bytes.Buffer
	if err := Write(&buf, r, o); err != nil {
		t.Fatal(err)
	}
	doc := checkPage(t, buf.Bytes())
	for _, want := range []string{"charts for 1 of 4 cells with telemetry", "charts for 1 of 4 MoE cells", "charts for 1 of 2 profiled cells"} {
		if !strings.Contains(doc.text, want) {
			t.Errorf("the page does not say %q", want)
		}
	}
}

// TestStudyPageWithoutCells: results.json alone (no cells/) draws every
// chart results.json holds and says what it cannot draw.
func TestStudyPageWithoutCells(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join(gpuStudyDir, layout.JSONFile))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, layout.JSONFile), b, 0o644)
	var buf bytes.Buffer
	if err := Write(&buf, loadStudy(t, dir), studyOptions(dir)); err != nil {
		t.Fatal(err)
	}
	doc := checkPage(t, buf.Bytes())
	if slices.ContainsFunc(doc.charts, func(c string) bool { return strings.HasPrefix(c, "telemetry-") }) {
		t.Error("telemetry charts without telemetry.csv")
	}
	for _, want := range []string{"no cells/ with telemetry.csv", "throttled: 30.0% of 36 timed samples"} {
		if !strings.Contains(doc.text, want) {
			t.Errorf("the page does not say %q", want)
		}
	}
	if !slices.Contains(doc.charts, "expert-load-bs16_learned-c0de0000") {
		t.Error("no expert-load chart: results.json has the histogram")
	}
}

// TestWriteDir writes report.html beside results.json, whole, and leaves
// nothing when it cannot.
func TestWriteDir(t *testing.T) {
	dir := t.TempDir()
	r := loadStudy(t, filepath.Join(resultsFixtures, "gemm"))
	if err := WriteDir(dir, r, Options{}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, layout.HTMLFile))
	if err != nil {
		t.Fatal(err)
	}
	checkPage(t, b)
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("%d entries in the directory, want report.html alone", len(entries))
	}
	missing := filepath.Join(dir, "missing", "deeper")
	if err := WriteDir(missing, r, Options{}); err == nil {
		t.Error("WriteDir into a missing directory: no error")
	}
	bad := *r
	bad.Cells = append(slices.Clone(r.Cells), r.Cells[0])
	if err := WriteDir(dir, &bad, Options{}); err == nil || !strings.Contains(err.Error(), "duplicate id") {
		t.Errorf("duplicate cell: %v, want an error naming it", err)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, layout.HTMLFile)); !bytes.Equal(after, b) {
		t.Error("a failed WriteDir changed report.html")
	}
}

// TestStudyPageReference: a study with a reference block (the perf-
// overview study's rows on an H100) shows results.md's "Against" table in
// its summary, the published figures and the ratios beside xrun's.
func TestStudyPageReference(t *testing.T) {
	r, err := results.ReadFile("../../bench/results/trtllm-perf-overview-rows-h100/results.json")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Write(&buf, r, Options{}); err != nil {
		t.Fatal(err)
	}
	doc := checkPage(t, buf.Bytes())
	for _, want := range []string{"Against trtllm-perf-overview", "22714", "0.57x", "requests at once"} {
		if !strings.Contains(doc.text, want) {
			t.Errorf("the page does not say %q", want)
		}
	}
}
