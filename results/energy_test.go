package results

import (
	"bytes"
	"errors"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/results/golden"
)

func TestEnergyRegistry(t *testing.T) {
	for _, tc := range []struct {
		key, name, unit string
		better          Direction
	}{
		{EnergyPerTokenKey, "Energy per Output Token (J/token)", "J/tok", LowerIsBetter},
		{TokSPerWattKey, "Output Throughput per Watt (tokens/sec/W)", "tok/s/W", HigherIsBetter},
	} {
		m, ok := LookupMetric(tc.key)
		if !ok || m.Name != tc.name || m.Unit != tc.unit || m.Better != tc.better || !m.Energy || m.Headline || m.Exact {
			t.Errorf("%s: %+v, ok %v; want %q in %s, %s is better, an energy metric", tc.key, m, ok, tc.name, tc.unit, tc.better)
		}
	}
	// The headline metrics stay the five every cell has; the defaults add
	// the energy metrics after them.
	want := append(HeadlineMetrics(), EnergyPerTokenKey, TokSPerWattKey)
	if got := DefaultMetrics(); !slices.Equal(got, want) || len(HeadlineMetrics()) != 5 {
		t.Errorf("DefaultMetrics() = %v, want %v", got, want)
	}
}

func TestAddEnergyMetrics(t *testing.T) {
	for _, tc := range []struct {
		name   string
		m      Metrics
		joules float64
		want   Metrics
	}{
		{"measured", Metrics{"total_output_tokens": 2000}, 500, Metrics{"total_output_tokens": 2000, EnergyPerTokenKey: 0.25, TokSPerWattKey: 4}},
		{"no output", Metrics{"total_output_tokens": 0}, 500, Metrics{"total_output_tokens": 0}},
		{"no output count", Metrics{}, 500, Metrics{}},
		{"no energy", Metrics{"total_output_tokens": 2000}, 0, Metrics{"total_output_tokens": 2000}},
		{"NaN energy", Metrics{"total_output_tokens": 2000}, math.NaN(), Metrics{"total_output_tokens": 2000}},
		{"infinite energy", Metrics{"total_output_tokens": 2000}, math.Inf(1), Metrics{"total_output_tokens": 2000}},
	} {
		AddEnergyMetrics(tc.m, tc.joules)
		if !maps.Equal(tc.m, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, tc.m, tc.want)
		}
	}
}

// TestEstimateEnergy: a cell whose repeats measured no energy but whose
// GPUs had the counter gets an estimate from its mean power; any other
// gets none.
func TestEstimateEnergy(t *testing.T) {
	old := func(edit func(c *Cell)) *Cell {
		c := &Cell{ID: "c", Status: StatusOK, Params: Params{"gpus_per_cell": int64(1)},
			Repeats:   []Metrics{{"system_output_throughput_tok_s": 900}, {"system_output_throughput_tok_s": 1000}, {"system_output_throughput_tok_s": 1100}},
			Telemetry: &Telemetry{PowerWMean: 400, EnergyJ: 123456}}
		if edit != nil {
			edit(c)
		}
		return c
	}
	for _, tc := range []struct {
		name    string
		cell    *Cell
		jPerTok float64 // 0: no estimate
	}{
		// 400 W over the median 1000 tok/s.
		{"old GPU cell", old(nil), 0.4},
		{"no gpus_per_cell", old(func(c *Cell) { delete(c.Params, "gpus_per_cell") }), 0.4},
		// The mean is per GPU sample: two GPUs draw twice the power.
		{"two GPUs", old(func(c *Cell) { c.Params["gpus_per_cell"] = int64(2) }), 0.8},
		{"measured", old(func(c *Cell) {
			for _, r := range c.Repeats {
				r[EnergyPerTokenKey], r[TokSPerWattKey] = 0.5, 2
			}
		}), 0},
		// No energy counter (the telemetry of a GPU without one, or from
		// before the NVML sampler), no power, no telemetry (the CPU).
		{"no energy counter", old(func(c *Cell) { c.Telemetry.EnergyJ = 0 }), 0},
		{"no power", old(func(c *Cell) { c.Telemetry.PowerWMean = 0 }), 0},
		{"no telemetry", old(func(c *Cell) { c.Telemetry = nil }), 0},
		{"no throughput", old(func(c *Cell) { c.Repeats = []Metrics{{"total_latency_ms": 5}} }), 0},
		{"failed", old(func(c *Cell) { c.Status = StatusFailed }), 0},
	} {
		j, okJ := EstimateEnergy(tc.cell, EnergyPerTokenKey)
		w, okW := EstimateEnergy(tc.cell, TokSPerWattKey)
		if okJ != (tc.jPerTok > 0) || okW != okJ {
			t.Errorf("%s: estimates %v (%v), %v (%v); want ok %v", tc.name, j, okJ, w, okW, tc.jPerTok > 0)
			continue
		}
		if okJ && (j != tc.jPerTok || w != roundValue(1/tc.jPerTok)) {
			t.Errorf("%s: %v J/token, %v tok/s/W; want %v and its inverse", tc.name, j, w, tc.jPerTok)
		}
	}
	if _, ok := EstimateEnergy(old(nil), "total_latency_ms"); ok {
		t.Error("an estimate of a metric other than energy")
	}
}

// withEnergy measures energy in every repeat of r's ok cells, as the
// runner does: the GPUs drew power(cell) watts over each repeat's timed
// window (its total latency).
func withEnergy(r *Results, power func(c *Cell) float64) *Results {
	for i := range r.Cells {
		c := &r.Cells[i]
		var sum float64
		for _, m := range c.Repeats {
			j := power(c) * m["total_latency_ms"] / 1000
			AddEnergyMetrics(m, j)
			sum += j
		}
		if c.Telemetry != nil {
			c.Telemetry.EnergyJ = sum
		}
	}
	return r
}

// energyStudy is the gemm study with energy: batch 1 and 16 measured
// per repeat (cuBLASLt drawing less power), batch 64 from a file written
// before xrun measured it (an energy counter, but no energy per repeat:
// estimated), batch 256 on a host without GPU telemetry.
func energyStudy() *Results {
	r := withEnergy(gemmStudy().build(), func(c *Cell) float64 {
		switch {
		case c.Params["batch_size"] == 64 || c.Params["batch_size"] == 256:
			return 0
		case c.Params["gemm_plugin"] == "auto":
			return 350
		}
		return 420
	})
	for i := range r.Cells {
		c := &r.Cells[i]
		switch c.Params["batch_size"] {
		case 64:
			c.Telemetry.EnergyJ = 98765.4 // over the whole cell
		case 256:
			c.Telemetry = nil
		}
	}
	return r
}

// TestEnergyReport: the summary table, the comparisons and the CSV show
// the energy metrics where cells measured them, estimates marked as such
// where cells could not, and results.json never holds an estimate.
func TestEnergyReport(t *testing.T) {
	r := mustNormalize(t, energyStudy())
	for _, format := range []string{"markdown", "text", "csv", "bench"} {
		var buf bytes.Buffer
		if err := Render(&buf, format, r, RenderOptions{}); err != nil {
			t.Fatal(err)
		}
		golden.Check(t, "report-energy."+format+".golden", buf.Bytes())
	}
	var md bytes.Buffer
	if err := Render(&md, "markdown", r, RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| Energy per Output Token (J/token) | Output Throughput per Watt (tokens/sec/W) |", "≈", EnergyEstimated,
		"### Energy per Output Token (J/token)", "### Output Throughput per Watt (tokens/sec/W)"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("results.md lacks %q", want)
		}
	}
	var js bytes.Buffer
	if err := Render(&js, "json", r, RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	back, err := Parse(js.Bytes(), "results.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range back.Cells {
		measured := c.Params["batch_size"] == int64(1) || c.Params["batch_size"] == int64(16)
		_, has := c.Summary[EnergyPerTokenKey]
		if c.Status == StatusOK && has != measured {
			t.Errorf("cell %s: energy in results.json %v, want %v (measured only)", c.ID, has, measured)
		}
	}

	// Results without energy keep their columns.
	var plain bytes.Buffer
	if err := Render(&plain, "markdown", loadFixture(t, "gemm"), RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plain.String(), "Energy") || strings.Contains(plain.String(), "≈") {
		t.Error("a study without energy shows energy columns")
	}
}

// TestEnergyOnlyEstimated: an old file's cells all estimated; asking for
// the metric shows the estimates too, and the CSV says where they came
// from.
func TestEnergyOnlyEstimated(t *testing.T) {
	r := gemmStudy().build()
	for i := range r.Cells {
		if r.Cells[i].Telemetry != nil {
			r.Cells[i].Telemetry.EnergyJ = 5000
		}
	}
	r = mustNormalize(t, r)
	rep := BuildReport(r, RenderOptions{})
	cols := rep.Summary.Columns
	if n := len(cols); n < 2 || cols[n-3].Name != MetricFor(EnergyPerTokenKey).Name || cols[n-2].Name != MetricFor(TokSPerWattKey).Name {
		t.Errorf("summary columns %v: want the energy metrics before the clock", cols)
	}
	for _, c := range rep.Comparisons {
		for _, tb := range c.Tables {
			if strings.Contains(tb.Title, "Energy") || strings.Contains(tb.Title, "Watt") {
				t.Errorf("a pivot of estimates, which have no repeats to compare: %s", tb.Title)
			}
		}
	}
	asked := BuildReport(r, RenderOptions{Metrics: []string{TokSPerWattKey}})
	if got := asked.Summary.Rows[0][len(asked.Summary.Rows[0])-2]; !strings.HasPrefix(got, "≈") {
		t.Errorf("--metric %s: %q, want the estimate", TokSPerWattKey, got)
	}
	var csv bytes.Buffer
	if err := Render(&csv, "csv", r, RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(csv.String(), "\n")
	if !strings.Contains(lines[0], ","+csvEnergySource) || !strings.Contains(lines[1], ","+EnergyEstimated) {
		t.Errorf("csv does not say the energy is estimated:\n%s\n%s", lines[0], lines[1])
	}
}

// TestDiffJudgesEnergy: xrun diff judges the energy metrics by default
// where both sides measured them: more joules per token at the same
// throughput is a regression.
func TestDiffJudgesEnergy(t *testing.T) {
	power := func(more float64) func(c *Cell) float64 {
		return func(c *Cell) float64 {
			if c.Params["batch_size"] == 64 {
				return 500 * more
			}
			return 500
		}
	}
	old := mustNormalize(t, withEnergy(nightly(1, 0).build(), power(1)))
	new := mustNormalize(t, withEnergy(nightly(1, 0).build(), power(1.10)))
	d := Diff(old, new, DiffOptions{Threshold: DefaultThreshold, NoiseFactor: DefaultNoiseFactor})
	if !slices.Contains(d.Metrics, EnergyPerTokenKey) || !slices.Contains(d.Metrics, TokSPerWattKey) {
		t.Fatalf("metrics judged %v: no energy", d.Metrics)
	}
	if !errors.Is(d.Err(), ErrRegression) || d.Counts.Regressions != 2 {
		t.Errorf("outcome %s, %d regressions; want the two energy metrics of batch 64", d.Outcome, d.Counts.Regressions)
	}
	for _, c := range d.Cells {
		for _, m := range c.Metrics {
			want := strings.HasPrefix(c.ID, "bs64-") && MetricFor(m.Metric).Energy
			if m.Regression != want || (want && m.Verdict != Slower) {
				t.Errorf("%s %s: regression %v, verdict %s; want regression %v", c.ID, m.Metric, m.Regression, m.Verdict, want)
			}
		}
	}
	// Against a file without energy, only the metrics both have.
	d = Diff(mustNormalize(t, nightly(1, 0).build()), new, DiffOptions{Threshold: DefaultThreshold})
	if !slices.Equal(d.Metrics, HeadlineMetrics()) {
		t.Errorf("old without energy: judged %v, want the headline metrics", d.Metrics)
	}
}

// TestPerClockLeavesEnergyAlone: a lower clock explains lower
// throughput, never more joules per token.
func TestPerClockLeavesEnergyAlone(t *testing.T) {
	c := &ClockDiff{OldMHz: 1980, NewMHz: 1782}
	if _, ok := perClock(EnergyPerTokenKey, 1.1, c); ok {
		t.Error("energy per token was normalised by the clock")
	}
	if d, ok := perClock("system_output_throughput_tok_s", 0.9, c); !ok || d > 1e-9 || d < -1e-9 {
		t.Errorf("throughput 10%% lower at a 10%% lower clock: per clock %v %v, want 0", d, ok)
	}
}
