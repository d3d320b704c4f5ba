package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/results"
)

// h200Results is the committed H200 run of experiments/gemm.yaml, written
// before xrun measured energy per repeat: its cells have the energy
// counter's total and the mean power, no energy per repeat.
const h200Results = "../../bench/results/gemm-plugin-h200"

// TestReportEnergyEstimates: xrun report gives the committed H200
// results the energy columns, estimated from each cell's mean power and
// said to be, in the tables and the CSV; results.json stays as it was and
// its JSON rendering holds no estimate.
func TestReportEnergyEstimates(t *testing.T) {
	dir := t.TempDir()
	orig, err := os.ReadFile(filepath.Join(h200Results, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "results.json")
	if err := os.WriteFile(path, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	md := runCLI(t, nil, "report", dir, "--format", "markdown")
	if md.code != exitOK {
		t.Fatalf("exit %d, stderr %q", md.code, md.stderr)
	}
	// bs128 auto: 634.3 W over 67571.5 tok/s.
	for _, want := range []string{"| Energy per Output Token (J/token) | Output Throughput per Watt (tokens/sec/W) |",
		"| 128 | auto | 3 | 527.9 ±∞ | 67572 ±∞ | 84.23 ±∞ | 5683 ±∞ | 2932 ±∞ | ≈0.009387 | ≈106.5 |",
		"estimated from the cell's mean power", "for 18 cells whose repeats measured no energy"} {
		if !strings.Contains(md.stdout, want) {
			t.Errorf("report lacks %q:\n%s", want, md.stdout)
		}
	}
	csv := runCLI(t, nil, "report", dir, "--format", "csv")
	if csv.code != exitOK {
		t.Fatalf("csv: exit %d, stderr %q", csv.code, csv.stderr)
	}
	lines := strings.Split(strings.TrimSpace(csv.stdout), "\n")
	if len(lines) != 19 || !strings.Contains(lines[0], "Energy per Output Token (J/token),") {
		t.Fatalf("csv: %d lines, header %q", len(lines), lines[0])
	}
	for _, l := range lines[1:] {
		if !strings.Contains(l, ",estimated from the cell's mean power,") {
			t.Errorf("csv row does not say its energy is estimated: %s", l)
		}
	}
	js := runCLI(t, nil, "report", dir, "--format", "json")
	if js.code != exitOK || strings.Contains(js.stdout, results.EnergyPerTokenKey) || strings.Contains(js.stdout, results.TokSPerWattKey) {
		t.Errorf("json: exit %d; an estimate in results.json's rendering", js.code)
	}
	if now, err := os.ReadFile(path); err != nil || !bytes.Equal(now, orig) {
		t.Errorf("xrun report changed results.json (%v)", err)
	}
}

// TestDiffEnergy: xrun diff judges the energy metrics where both runs
// measured them, in its text and JSON alike.
func TestDiffEnergy(t *testing.T) {
	measured := func(watts float64) string {
		r, _, err := results.Load(fixture("nightly-base"))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range r.Cells {
			for _, m := range c.Repeats {
				results.AddEnergyMetrics(m, watts*m["total_latency_ms"]/1000)
			}
		}
		dir := t.TempDir()
		if err := results.WriteDir(dir, r); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	old, new := measured(500), measured(560)
	r := runCLI(t, nil, "diff", old, new, "--format", "json")
	if r.code != exitRegression {
		t.Fatalf("exit %d, want %d (12%% more energy per token); stderr %q", r.code, exitRegression, r.stderr)
	}
	var d results.DiffReport
	if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
		t.Fatal(err)
	}
	if d.Counts.Regressions != 8 {
		t.Errorf("%d regressions, want the 2 energy metrics of the 4 cells", d.Counts.Regressions)
	}
	for _, c := range d.Cells {
		for _, m := range c.Metrics {
			energy := m.Metric == results.EnergyPerTokenKey || m.Metric == results.TokSPerWattKey
			if m.Regression != energy {
				t.Errorf("%s %s: regression %v", c.ID, m.Metric, m.Regression)
			}
		}
	}
	text := runCLI(t, nil, "diff", old, new)
	if !strings.Contains(text.stdout, "Energy per Output Token (J/token)") {
		t.Errorf("the text diff does not name the energy metric:\n%s", text.stdout)
	}
}
