package results

import (
	"bytes"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/results/golden"
)

// TestReportGolden renders every fixture in every format.
func TestReportGolden(t *testing.T) {
	for _, fixture := range []string{"gemm", "moe", "roofline"} {
		for _, format := range Formats() {
			t.Run(fixture+"/"+format, func(t *testing.T) {
				var buf bytes.Buffer
				if err := Render(&buf, format, loadFixture(t, fixture), RenderOptions{}); err != nil {
					t.Fatal(err)
				}
				if format == "json" {
					return // TestRenderJSONIsTheFile covers it
				}
				golden.Check(t, "report-"+fixture+"."+format+".golden", buf.Bytes())
			})
		}
	}
}

// TestRenderJSONIsTheFile: `report --format json` re-emits results.json
// byte for byte.
func TestRenderJSONIsTheFile(t *testing.T) {
	r, path, err := Load("testdata/gemm")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Render(&buf, "json", r, RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	want := readFile(t, path)
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("json rendering differs from %s", path)
	}
}

func TestRenderOptionsMetrics(t *testing.T) {
	var buf bytes.Buffer
	opts := RenderOptions{Metrics: []string{"ttft_p50_ms"}}
	if err := Render(&buf, "text", loadFixture(t, "gemm"), opts); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.Contains(out, "TTFT P50 (ms)") || strings.Contains(out, "Request Throughput") {
		t.Errorf("--metric ttft_p50_ms not honoured:\n%s", out)
	}
}

func TestRenderUnknownFormat(t *testing.T) {
	err := Render(&bytes.Buffer{}, "xml", loadFixture(t, "gemm"), RenderOptions{})
	if err == nil || !strings.Contains(err.Error(), "text, markdown, csv, json, bench") {
		t.Errorf("err = %v, want the list of formats", err)
	}
}

// TestComparisonsResolve covers compare entries that cannot be honoured
// and the default comparison of two-valued axes.
func TestComparisonsResolve(t *testing.T) {
	r := moeStudy().build()
	r.Compare = []CompareSpec{{Axis: "gemm_plugin", Baseline: "auto"}, {Axis: "routing_mode", Baseline: "uniform"}, {Axis: "routing_mode", Baseline: "perfect"}}
	rep := BuildReport(mustNormalize(t, r), RenderOptions{})
	var got []string
	for _, c := range rep.Comparisons {
		got = append(got, c.Axis+"@"+c.Baseline)
	}
	if want := "routing_mode@perfect batch_size@16"; strings.Join(got, " ") != want {
		t.Errorf("comparisons = %v, want %s", got, want)
	}
	notes := strings.Join(rep.Notes, "\n")
	for _, want := range []string{"compare gemm_plugin: the parameter does not vary", "baseline uniform is not among its values (learned, perfect)"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	// With perfect as the baseline the reading is inverted, not lost.
	var reading string
	for _, tb := range rep.Comparisons[0].Tables {
		for _, n := range tb.Notes {
			if strings.HasPrefix(n, "routing (batch_size=64)") {
				reading = n
			}
		}
	}
	if !strings.Contains(reading, "perfect routing is 1") || !strings.Contains(reading, "faster") || !strings.Contains(reading, "imbalance matters") {
		t.Errorf("routing reading with perfect as baseline = %q", reading)
	}
}

func TestFormatNumber(t *testing.T) {
	for _, c := range []struct {
		in   float64
		want string
	}{
		{141.3, "141.3"}, {18086.12, "18086"}, {0.81234, "0.8123"}, {15.698, "15.70"}, {0, "0"},
		{-2.5, "-2.500"}, {1e-7, "0.000000100"}, {3e9, "3000000000"},
	} {
		if got := formatNumber(c.in); got != c.want {
			t.Errorf("formatNumber(%v) = %q, want %q", c.in, got, c.want)
		}
	}
	for _, c := range []struct {
		ratio float64
		want  string
	}{{1.0234, "+2.3%"}, {0.897, "-10%"}, {1, "+0.0%"}, {0.99999, "+0.0%"}} {
		if got := formatDelta(c.ratio); got != c.want {
			t.Errorf("formatDelta(%v) = %q, want %q", c.ratio, got, c.want)
		}
	}
}

func TestTableMarkdownEscapes(t *testing.T) {
	tb := &Table{Columns: []Column{{Name: "a|b"}, {Name: "n", Right: true}}, Rows: [][]string{{"<x>", "~"}}}
	var buf bytes.Buffer
	tb.WriteMarkdown(&buf, 2)
	want := "| a\\|b | n |\n|---|---:|\n| &lt;x> | \\~ |\n"
	if buf.String() != want {
		t.Errorf("got\n%s\nwant\n%s", buf.String(), want)
	}
}

func mustNormalize(t *testing.T, r *Results) *Results {
	t.Helper()
	n, err := normalized(r)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestTrendNote: repeats that rise (or fall) from each to the next by more
// than 10 % first to last get a note; noise, small drifts and three
// repeats do not.
func TestTrendNote(t *testing.T) {
	cell := func(vals ...float64) *Cell {
		c := &Cell{ID: "c", Status: StatusOK}
		for _, v := range vals {
			c.Repeats = append(c.Repeats, Metrics{"system_output_throughput_tok_s": v})
		}
		return c
	}
	for _, tc := range []struct {
		c    *Cell
		want string
	}{
		{cell(16100, 24000, 25100, 25200), "rose from every repeat to the next (16100 to 25200, +57%)"},
		{cell(30000, 28000, 26000, 25000), "fell from every repeat to the next (30000 to 25000, -17%)"},
		{cell(100, 101, 102, 103), ""},
		{cell(16100, 25200, 24000, 25100), ""},
		{cell(16100, 24000, 25200), ""},
	} {
		got := trendNote(tc.c)
		if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("%v: note %q, want %q", column(tc.c.Repeats, "system_output_throughput_tok_s"), got, tc.want)
		}
	}
	failed := cell(1, 2, 3, 4)
	failed.Status = StatusFailed
	if got := trendNote(failed); got != "" {
		t.Errorf("a failed cell: %q", got)
	}
}

// TestHeldNote: repeats whose load generator held requests back for a
// free slot of openai.max_in_flight get a note with the counts, the
// longest waits and the bound; none held, none.
func TestHeldNote(t *testing.T) {
	c := &Cell{ID: "c", Status: StatusOK, Repeats: []Metrics{
		{heldRequestsKey: 120, heldMaxMsKey: 4748.2, heldBoundKey: 256}, {"request_throughput_req_s": 500}, {heldRequestsKey: 3, heldMaxMsKey: 1.234, heldBoundKey: 256}}}
	got := heldNote(c)
	for _, want := range []string{"openai.max_in_flight (256)", "after their scheduled arrival", "(per repeat: 120 (up to 4748 ms), 0, 3 (up to 1.23 ms))", "their latencies count the wait"} {
		if !strings.Contains(got, want) {
			t.Errorf("note %q, want it to say %q", got, want)
		}
	}
	if notes := cellNotes(c); len(notes) != 1 || !strings.HasPrefix(notes[0], "cell c: requests waited") {
		t.Errorf("cell notes %q", notes)
	}
	for _, reps := range [][]Metrics{{{"system_output_throughput_tok_s": 1}}, {{heldRequestsKey: 0}}} {
		if got := heldNote(&Cell{ID: "c", Status: StatusOK, Repeats: reps}); got != "" {
			t.Errorf("%v: note %q, want none", reps, got)
		}
	}
}

// TestInFlightNote: a cell whose KV cache held fewer requests at once than
// both its batch_size and its requests gets a note (per repeat where they
// differ); one bound by batch_size or by its requests, or results without
// the metric, none.
func TestInFlightNote(t *testing.T) {
	cell := func(bs int64, reps ...Metrics) *Cell {
		return &Cell{ID: "c", Status: StatusOK, Params: Params{"batch_size": bs}, Repeats: reps}
	}
	for _, tc := range []struct {
		c    *Cell
		want string
	}{
		{cell(2048, Metrics{MaxInFlightKey: 229, "num_requests": 3000}, Metrics{MaxInFlightKey: 229, "num_requests": 3000}),
			"at most 229 requests ran at once, fewer than batch_size 2048: the KV cache held no more"},
		{cell(2048, Metrics{MaxInFlightKey: 1960, "num_requests": 30000}, Metrics{MaxInFlightKey: 1904, "num_requests": 30000}),
			"at most 1960, 1904 requests ran at once (per repeat), fewer than batch_size 2048"},
		{cell(64, Metrics{MaxInFlightKey: 64, "num_requests": 3000}), ""},
		{cell(2048, Metrics{MaxInFlightKey: 100, "num_requests": 100}), ""},
		{cell(2048, Metrics{"num_requests": 100}), ""},
	} {
		got := inFlightNote(tc.c)
		if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("%v: note %q, want %q", tc.c.Repeats, got, tc.want)
		}
	}
}

// TestPlansNote: repeats that built GEMM plans in their timings get a
// note with the counts and times per repeat; none built, or a backend
// that does not count them, none.
func TestPlansNote(t *testing.T) {
	c := &Cell{ID: "c", Status: StatusOK, Repeats: []Metrics{
		{plansBuiltKey: 57, planMsKey: 43.21}, {plansBuiltKey: 0, planMsKey: 0}, {plansBuiltKey: 2, planMsKey: 1.5}}}
	if got, want := plansNote(c), "built GEMM plans inside the measurement (per repeat: 57 (43.2 ms), 0, 2 (1.50 ms))"; !strings.Contains(got, want) {
		t.Errorf("note %q, want it to say %q", got, want)
	}
	for _, reps := range [][]Metrics{{{plansBuiltKey: 0, planMsKey: 0}}, {{"system_output_throughput_tok_s": 1}}} {
		if got := plansNote(&Cell{ID: "c", Status: StatusOK, Repeats: reps}); got != "" {
			t.Errorf("%v: note %q, want none", reps, got)
		}
	}
}
