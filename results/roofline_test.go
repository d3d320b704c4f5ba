package results

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// h200Environment is testEnvironment on an H200 host.
func h200Environment() Environment {
	e := testEnvironment()
	e.GPUs[0].Name, e.GPUs[0].MemoryBytes = "NVIDIA H200", 141<<30
	return e
}

// rooflineStudy is a GPU study whose cells carry the rooflines the
// assembler (runner.AttachRooflines) gives them: TinyLlama at
// batch 256 near its measured 88.9k output tok/s against a roofline of
// 186k, Mixtral at batch 64 near 1,402 against 2,676 (the floors
// engine/profile computes for those runs on an H200), and one cell
// without a roofline (it ran before rooflines existed, or on the CPU).
// Only TinyLlama's records its iterations' measured spans (Mixtral's
// predates them).
func rooflineStudy() *Results { return rooflineSynth(false) }

// rooflineNewStudy is rooflineStudy after a change, the new side of xrun
// diff's roofline case: TinyLlama 6 % faster against the same roofline,
// Mixtral's roofline drawn against other ceilings (the datasheet's rather
// than the measured ones), and Llama-3.2-1B with a roofline it lacked.
func rooflineNewStudy() *Results { return rooflineSynth(true) }

func rooflineSynth(changed bool) *Results {
	s := synthStudy{name: "roofline", description: "output throughput against the roofline on an H200",
		slugKeys: []string{"model", "batch_size"}, repeats: 3, noise: 0.005, seed: 9, env: h200Environment()}
	if changed {
		s.seed = 10
	}
	rf := map[string]*Roofline{}
	for _, c := range []struct {
		model string
		bs    int
		tokS  float64 // measured output tok/s
		roof  *Roofline
	}{
		// Its first repeat's 4.32 s: 2.90 in 1,508 decode steps against
		// their floor of 1.09, 1.42 in 30 prompt-heavy ones against 0.98.
		{"tinyllama-1.1b", 256, pick(changed, 94265.0, 88929), &Roofline{FloorS: 2.06419, OutputTokS: 186029, MemoryBoundS: 1.08634, Iterations: 1538,
			MeasuredS: 4.318, MemoryBoundMeasuredS: 2.90, MemoryBoundIterations: 1508,
			Bytes: 4.67127e12, FLOPs: 1.57046e15, Basis: "iterations.csv (first repeat, warm-up left out)"}},
		{"mixtral-8x7b", 64, 1402, &Roofline{FloorS: 143.498, OutputTokS: 2676.0, MemoryBoundS: 131.207, Iterations: 6016,
			Bytes: 5.64188e14, FLOPs: 1.94552e16, Basis: "iterations.csv (first repeat, warm-up left out); experts reached from expert_load.csv"}},
		{"llama-3.2-1b", 64, 25420, pick(changed, &Roofline{FloorS: 4.91, OutputTokS: 78208, MemoryBoundS: 4.2, Iterations: 6047,
			Bytes: 1.57e13, FLOPs: 1.21e15, Basis: "iterations.csv (first repeat, warm-up left out)"}, nil)},
	} {
		sc := synthCell{params: Params{"model": c.model, "batch_size": c.bs, "dtype": "float16"}, reqPerSec: c.tokS / 128, moe: c.model == "mixtral-8x7b"}
		s.cells = append(s.cells, sc)
		if c.roof != nil {
			c.roof.Device, c.roof.PeakBytesPerS, c.roof.PeakFLOPS = "NVIDIA H200", 4.3e12, 790e12
			c.roof.PeakSource = "measured on an H200: device-to-device copy and bf16 GEMM"
			if changed && c.model == "mixtral-8x7b" {
				// The datasheet's 4.8 TB/s and 989 TFLOP/s lower the floor.
				c.roof.FloorS, c.roof.OutputTokS, c.roof.MemoryBoundS = 127.357, 3015.13, 117.540
				c.roof.PeakBytesPerS, c.roof.PeakFLOPS = 4.8e12, 989e12
				c.roof.PeakSource = "H200 datasheet: HBM3e bandwidth and dense bf16 tensor rate"
			}
			c.roof.Fraction = 0.99 // the writer's to compute: ignored
			rf[c.model] = c.roof
		}
	}
	r := s.build()
	for i := range r.Cells {
		r.Cells[i].Roofline = rf[r.Cells[i].Params["model"].(string)]
	}
	return r
}

// TestRooflineFraction: the writer sets Fraction to the median measured
// output throughput over the roofline's, whatever the caller left there,
// and the summary table shows it with the roofline's throughput.
func TestRooflineFraction(t *testing.T) {
	n, err := normalized(rooflineStudy())
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	var entries []string
	for _, c := range n.Cells {
		if c.Roofline == nil {
			if !strings.HasPrefix(c.ID, "llama-3.2-1b") {
				t.Errorf("%s lost its roofline", c.ID)
			}
			continue
		}
		seen++
		med := c.Summary["system_output_throughput_tok_s"].Median
		if want := med / c.Roofline.OutputTokS; math.Abs(c.Roofline.Fraction-want) > 1e-5*want {
			t.Errorf("%s: fraction %g; want %g / %g = %g", c.ID, c.Roofline.Fraction, med, c.Roofline.OutputTokS, want)
		}
		entries = append(entries, fmt.Sprintf("%.1f%% of %.0f", 100*med/c.Roofline.OutputTokS, c.Roofline.OutputTokS))
	}
	if seen != 2 {
		t.Fatalf("%d cells with a roofline; want 2", seen)
	}
	// About 1,402 of 2,676 output tok/s (52.4 %) and 88,929 of 186,029
	// (47.8 %): the synthetic repeats wander a little around both.
	if want := []string{"52.3% of 2676", "48.0% of 186029"}; !slices.Equal(entries, want) {
		t.Errorf("entries %q; want %q", entries, want)
	}
	var buf bytes.Buffer
	if err := Render(&buf, "text", rooflineStudy(), RenderOptions{Metrics: []string{"system_output_throughput_tok_s"}}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"% roofline", entries[0], entries[1],
		"max(bytes / 4.30 TB/s, FLOPs / 790 TFLOP/s)", "NVIDIA H200, measured on an H200"} {
		if !strings.Contains(out, want) {
			t.Errorf("text report lacks %q:\n%s", want, out)
		}
	}
	// Without rooflines, no column.
	buf.Reset()
	if err := Render(&buf, "text", loadFixture(t, "moe"), RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "roofline") {
		t.Errorf("a study without rooflines shows the column:\n%s", buf.String())
	}
}

func TestRooflineRefusesNonFinite(t *testing.T) {
	r := rooflineStudy()
	r.Cells[0].Roofline.FloorS = math.Inf(1)
	if _, err := Marshal(r); err == nil || !strings.Contains(err.Error(), "roofline.floor_s: +Inf cannot be stored") {
		t.Errorf("err %v; want roofline.floor_s refused", err)
	}
}

// TestDiffRoofline: xrun diff sets the share of the roofline reached side
// by side where both rooflines share their ceilings, says why not where
// they differ or only one side has a roofline, and copies the fractions.
func TestDiffRoofline(t *testing.T) {
	d := diffFixtures(t, "roofline", "roofline-new", DiffOptions{})
	old, new := loadFixture(t, "roofline"), loadFixture(t, "roofline-new")
	fraction := func(r *Results, id string) float64 {
		for _, c := range r.Cells {
			if c.ID == id && c.Roofline != nil {
				return c.Roofline.Fraction
			}
		}
		t.Fatalf("%s: no roofline", id)
		return 0
	}
	seen := 0
	for _, c := range d.Cells {
		rd := c.Roofline
		if rd == nil {
			t.Fatalf("%s: no roofline diff", c.ID)
		}
		seen++
		switch model, _, _ := strings.Cut(c.ID, "-bs"); model {
		case "tinyllama-1.1b": // same ceilings, 6 % faster
			o, n := fraction(old, c.ID), fraction(new, c.ID)
			if rd.Delta == nil || math.Abs(*rd.Delta-(n-o)) > 1e-6 || *rd.OldFraction != o || *rd.NewFraction != n || rd.Note != "" {
				t.Errorf("%s: %+v; want old %g, new %g and their difference", c.ID, rd, o, n)
			}
			if *rd.Delta < 0.02 || *rd.Delta > 0.04 {
				t.Errorf("%s: delta %g; want about 6 %% of 48 %%", c.ID, *rd.Delta)
			}
		case "mixtral-8x7b": // other ceilings
			want := "ceilings differ: NVIDIA H200 (4.30 TB/s, 790 TFLOP/s) -> NVIDIA H200 (4.80 TB/s, 989 TFLOP/s); the fractions are not like for like"
			if rd.Delta != nil || rd.Note != want || rd.OldFraction == nil || rd.NewFraction == nil {
				t.Errorf("%s: %+v; want both fractions, no delta and %q", c.ID, rd, want)
			}
		case "llama-3.2-1b": // a roofline only in new
			if rd.Delta != nil || rd.OldFraction != nil || rd.OldOutputTokS != nil || rd.NewFraction == nil || rd.Note != "only new has a roofline" {
				t.Errorf("%s: %+v; want the new fraction only", c.ID, rd)
			}
		default:
			t.Errorf("unexpected cell %s", c.ID)
		}
	}
	if seen != 3 {
		t.Errorf("%d cells with a roofline diff; want 3", seen)
	}
	// The other way round, the roofline is only in old.
	back := diffFixtures(t, "roofline-new", "roofline", DiffOptions{})
	for _, c := range back.Cells {
		if strings.HasPrefix(c.ID, "llama-3.2-1b") && (c.Roofline == nil || c.Roofline.Note != "only old has a roofline" || c.Roofline.NewFraction != nil) {
			t.Errorf("%s reversed: %+v", c.ID, c.Roofline)
		}
	}
	// Ceilings that differ below the three digits FormatRate shows are
	// named at full precision.
	a, b := &Cell{Status: StatusOK, Roofline: &Roofline{OutputTokS: 100, Fraction: 0.5, Device: "NVIDIA H200", PeakBytesPerS: 4.3e12, PeakFLOPS: 790e12}}, &Cell{}
	*b = *a
	b.Roofline = &Roofline{OutputTokS: 100, Fraction: 0.5, Device: "NVIDIA H200", PeakBytesPerS: 4.301e12, PeakFLOPS: 790e12}
	if rd := diffRoofline(a, b); rd.Delta != nil || !strings.Contains(rd.Note, "NVIDIA H200 (4.30000 TB/s, 790.000 TFLOP/s) -> NVIDIA H200 (4.30100 TB/s, 790.000 TFLOP/s)") {
		t.Errorf("ceilings 4.3 vs 4.301 TB/s: %+v", rd)
	}
	// Neither side: no roofline diff, and none in the JSON.
	var buf bytes.Buffer
	if err := diffFixtures(t, "nightly-base", "nightly-same", DiffOptions{}).WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "roofline") {
		t.Errorf("a diff without rooflines mentions them:\n%s", buf.String())
	}
}

// TestDiffRooflineNeverJudged: the roofline changes nothing in the
// verdict. Halving the new side's share of the roofline (a roofline twice
// as high) leaves the counts, the metrics and the exit status as they are
// without rooflines at all.
func TestDiffRooflineNeverJudged(t *testing.T) {
	strip := func(r *Results) *Results {
		for i := range r.Cells {
			r.Cells[i].Roofline = nil
		}
		return r
	}
	for _, pair := range []struct {
		name     string
		old, new func() *Results
	}{
		{"changed", rooflineStudy, rooflineNewStudy},
		{"roofline doubled", rooflineStudy, func() *Results {
			r := rooflineStudy()
			for i := range r.Cells {
				if rf := r.Cells[i].Roofline; rf != nil {
					rf.FloorS, rf.OutputTokS = rf.FloorS/2, rf.OutputTokS*2
				}
			}
			return r
		}},
	} {
		opts := DiffOptions{Threshold: DefaultThreshold}
		with := Diff(mustNormalize(t, pair.old()), mustNormalize(t, pair.new()), opts)
		without := Diff(mustNormalize(t, strip(pair.old())), mustNormalize(t, strip(pair.new())), opts)
		if with.Regression != without.Regression || with.Counts != without.Counts || (with.Err() == nil) != (without.Err() == nil) {
			t.Errorf("%s: verdict %v %+v with rooflines, %v %+v without", pair.name, with.Regression, with.Counts, without.Regression, without.Counts)
		}
		for i := range with.Cells {
			if !reflect.DeepEqual(with.Cells[i].Metrics, without.Cells[i].Metrics) {
				t.Errorf("%s: %s: metrics differ with rooflines", pair.name, with.Cells[i].ID)
			}
		}
		if pair.name == "roofline doubled" {
			for _, c := range with.Cells {
				if rd := c.Roofline; rd != nil && (rd.Delta == nil || *rd.Delta > -0.2) {
					t.Errorf("%s: %+v; want about half the share, not judged", c.ID, rd)
				}
			}
		}
	}
}

func TestFormatPoints(t *testing.T) {
	for _, c := range []struct {
		old, new float64
		want     string
	}{
		{0.473, 0.510, "+3.7 pts"},
		{0.510, 0.473, "-3.7 pts"},
		{0.5, 0.5, "+0.0 pts"},
		{0.47341, 0.47349, "+0.0 pts"}, // both 47.3 %
		{0.47349, 0.47351, "+0.1 pts"}, // 47.3 % -> 47.4 %, as printed
		{0.05, 1.2, "+115.0 pts"},
	} {
		if got := formatPoints(c.old, c.new); got != c.want {
			t.Errorf("formatPoints(%g, %g) = %q; want %q", c.old, c.new, got, c.want)
		}
	}
}

// TestCSVRoofline: the CSV carries the roofline's output throughput and
// the fraction reached as numbers, empty for a cell without a roofline,
// and no roofline columns where no cell has one.
func TestCSVRoofline(t *testing.T) {
	rows := func(fixture string) [][]string {
		var buf bytes.Buffer
		if err := Render(&buf, "csv", loadFixture(t, fixture), RenderOptions{}); err != nil {
			t.Fatal(err)
		}
		rows, err := csv.NewReader(&buf).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}
	r := rows("roofline")
	n := len(r[0])
	if got := r[0][n-2:]; !slices.Equal(got, []string{"Roofline Output Throughput (tokens/sec)", "Roofline Fraction"}) {
		t.Fatalf("last columns %q", got)
	}
	want := map[string][]string{"llama-3.2-1b": {"", ""}, "mixtral-8x7b": {"2676", "0.522653"}, "tinyllama-1.1b": {"186029", "0.479884"}}
	for _, row := range r[1:] {
		model := row[2]
		if !slices.Equal(row[n-2:], want[model]) {
			t.Errorf("%s: roofline columns %q; want %q", model, row[n-2:], want[model])
		}
	}
	for _, h := range rows("gemm")[0] {
		if strings.Contains(h, "Roofline") {
			t.Errorf("a study without rooflines has the column %q", h)
		}
	}
}

func TestSameRepeats(t *testing.T) {
	a := []Metrics{{"x": 1217.83749123, "n": 3000}}
	for _, tc := range []struct {
		name string
		b    []Metrics
		want bool
	}{
		{"rounded as results.json stores it", []Metrics{{"x": 1217.84, "n": 3000}}, true},
		{"another value", []Metrics{{"x": 1217.85, "n": 3000}}, false},
		{"a metric missing", []Metrics{{"x": 1217.84}}, false},
		{"another metric", []Metrics{{"x": 1217.84, "m": 3000}}, false},
		{"another repeat count", []Metrics{{"x": 1217.84, "n": 3000}, {"x": 1217.84, "n": 3000}}, false},
		{"none", nil, false},
	} {
		if got := SameRepeats(a, tc.b); got != tc.want {
			t.Errorf("%s: SameRepeats = %v, want %v", tc.name, got, tc.want)
		}
	}
	nan := []Metrics{{"x": math.NaN()}}
	if !SameRepeats(nan, nan) {
		t.Error("NaN against NaN: want the same repeats")
	}
}

// TestRooflineFP8Rate: an FP8 model's roofline keeps the rate its FP8
// GEMMs were counted at; results.md's note names it beside the compute
// dtype's, and a diff tells two FP8 rates apart but not one record that
// kept it from one that predates it.
func TestRooflineFP8Rate(t *testing.T) {
	base := Roofline{OutputTokS: 52356, Fraction: 0.516, Device: "NVIDIA H200", PeakBytesPerS: 4.3e12, PeakFLOPS: 790e12,
		PeakSource: "measured on an H200: device-to-device copy and bf16 GEMM"}
	fp8 := base
	fp8.PeakFP8FLOPS = 1.58e15
	cell := func(rf Roofline) *Cell { return &Cell{Status: StatusOK, Roofline: &rf} }
	notes := rooflineNotes([]*Cell{cell(fp8)})
	if len(notes) != 1 || !strings.Contains(notes[0], "max(bytes / 4.30 TB/s, FLOPs at 790 TFLOP/s, the FP8 linear layers' at 1.58 PFLOP/s)") {
		t.Errorf("FP8 note: %q", notes)
	}
	if notes := rooflineNotes([]*Cell{cell(base)}); len(notes) != 1 || !strings.Contains(notes[0], "max(bytes / 4.30 TB/s, FLOPs / 790 TFLOP/s)") {
		t.Errorf("note without FP8: %q", notes)
	}
	if rd := diffRoofline(cell(base), cell(fp8)); rd.Delta == nil || rd.Note != "" {
		t.Errorf("a record without the FP8 rate against one with it: %+v; want compared", rd)
	}
	other := fp8
	other.PeakFP8FLOPS = 1.98e15
	want := "ceilings differ: NVIDIA H200 (4.30 TB/s, 790 TFLOP/s, FP8 1.58 PFLOP/s) -> NVIDIA H200 (4.30 TB/s, 790 TFLOP/s, FP8 1.98 PFLOP/s)"
	if rd := diffRoofline(cell(fp8), cell(other)); rd.Delta != nil || !strings.HasPrefix(rd.Note, want) {
		t.Errorf("two FP8 rates: %+v; want %q", rd, want)
	}
	if _, err := normalizeRoofline(Roofline{PeakFP8FLOPS: math.Inf(1)}, nil); err == nil || !strings.Contains(err.Error(), "peak_fp8_flop_per_s") {
		t.Errorf("an infinite FP8 rate: %v", err)
	}
}

// TestRooflineByKind: the split's figures are checked where results are
// read, and the table leaves out cells without them, gives a kind with no
// iteration dashes and names the cells where the study has no axes.
func TestRooflineByKind(t *testing.T) {
	for _, c := range []struct {
		rf   Roofline
		want string
	}{
		{Roofline{Iterations: 10, MemoryBoundIterations: 11}, "memory_bound_iterations: 11; expected 0 to iterations (10)"},
		{Roofline{Iterations: 10, MemoryBoundIterations: -1}, "memory_bound_iterations: -1"},
		{Roofline{MeasuredS: 1, MemoryBoundMeasuredS: 2}, "memory_bound_measured_s: 2; expected at most measured_s (1)"},
		{Roofline{MeasuredS: math.NaN()}, "measured_s: NaN cannot be stored"},
	} {
		if _, err := normalizeRoofline(c.rf, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v; want %q", c.rf, err, c.want)
		}
	}
	ok := func(id string, rf *Roofline) Cell {
		return Cell{ID: id, Status: StatusOK, Roofline: rf}
	}
	r := &Results{Cells: []Cell{
		ok("decode-only", &Roofline{FloorS: 2, MemoryBoundS: 2, Iterations: 100, MemoryBoundIterations: 100, MeasuredS: 5, MemoryBoundMeasuredS: 5, OutputTokS: 10, Fraction: 0.4}),
		ok("old", &Roofline{FloorS: 2, MemoryBoundS: 1, Iterations: 100, OutputTokS: 10, Fraction: 0.4}),
		{ID: "failed", Status: StatusFailed, Roofline: &Roofline{FloorS: 1, MeasuredS: 1, Iterations: 1, OutputTokS: 1, Fraction: 1}},
		ok("mixed", &Roofline{FloorS: 3, MemoryBoundS: 1, Iterations: 12, MemoryBoundIterations: 10, MeasuredS: 6, MemoryBoundMeasuredS: 2.5, OutputTokS: 10, Fraction: 0.5}),
	}}
	tb := rooflineByKindTable(r, nil)
	if tb == nil {
		t.Fatal("no table")
	}
	want := [][]string{
		{"decode-only", "100", "5.000", "2.000", "40.0%", "0", "-", "-", "-"},
		{"mixed", "10", "2.500", "1.000", "40.0%", "2", "3.500", "2.000", "57.1%"},
	}
	if !slices.EqualFunc(tb.Rows, want, slices.Equal) {
		t.Errorf("rows %q; want %q", tb.Rows, want)
	}
	if tb := rooflineByKindTable(&Results{Cells: r.Cells[1:3]}, nil); tb != nil {
		t.Errorf("a table of cells without the split: %+v", tb)
	}
}
