package results

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/results/golden"
)

func diffFixtures(t *testing.T, old, new string, opts DiffOptions) *DiffReport {
	t.Helper()
	if opts.Threshold == 0 {
		opts.Threshold = DefaultThreshold
	}
	if opts.NoiseFactor == 0 {
		opts.NoiseFactor = DefaultNoiseFactor // as xrun diff
	}
	opts.OldName, opts.NewName = "testdata/"+old, "testdata/"+new
	return Diff(loadFixture(t, old), loadFixture(t, new), opts)
}

// TestDiffSlowdown: a 10 % slowdown in one cell (6 repeats a side) is a
// significant regression of every headline metric of that cell, and of
// no other cell.
func TestDiffSlowdown(t *testing.T) {
	d := diffFixtures(t, "nightly-base", "nightly-slow", DiffOptions{})
	if !d.Regression || !errors.Is(d.Err(), ErrRegression) {
		t.Fatalf("no regression found: %+v", d.Counts)
	}
	if d.Counts.Regressions != len(HeadlineMetrics()) {
		t.Errorf("regressions = %d, want %d (every headline metric of one cell)", d.Counts.Regressions, len(HeadlineMetrics()))
	}
	for _, c := range d.Cells {
		for _, m := range c.Metrics {
			slow := strings.HasPrefix(c.ID, "bs64-")
			if m.Regression != slow {
				t.Errorf("%s %s: regression=%v verdict=%s delta=%v", c.ID, m.Metric, m.Regression, m.Verdict, *m.Delta)
			}
			if slow && m.Verdict != Slower {
				t.Errorf("%s %s: verdict %s, want slower", c.ID, m.Metric, m.Verdict)
			}
		}
	}
	if len(d.Environment) == 0 || d.Counts.Throttled != 1 {
		t.Errorf("environment changes %v, throttled %d: want the driver change and one throttled cell", d.Environment, d.Counts.Throttled)
	}
}

// TestDiffSameDistribution: two draws from one distribution give ~ and
// no regression.
func TestDiffSameDistribution(t *testing.T) {
	d := diffFixtures(t, "nightly-base", "nightly-same", DiffOptions{})
	if d.Regression || d.Err() != nil {
		t.Fatalf("regression claimed between two draws of one distribution: %+v", d.Counts)
	}
	for _, c := range d.Cells {
		for _, m := range c.Metrics {
			if m.Verdict != Same {
				t.Errorf("%s %s: verdict %s (p=%v), want ~", c.ID, m.Metric, m.Verdict, m.P)
			}
		}
	}
	if len(d.Environment) != 0 {
		t.Errorf("environment differs: %v", d.Environment)
	}
}

// TestDiffDoesNotCryWolf draws many same-distribution pairs: the U test
// alone fires about 5 % of the time, but never beyond the threshold, so
// no pair may count as a regression. And a 10 % slowdown is always caught.
func TestDiffDoesNotCryWolf(t *testing.T) {
	var sig int
	opts := DiffOptions{Threshold: DefaultThreshold, NoiseFactor: DefaultNoiseFactor}
	for seed := uint64(100); seed < 300; seed += 2 {
		a, b := nightly(seed, 0).build(), nightly(seed+1, 0).build()
		d := Diff(mustNormalize(t, a), mustNormalize(t, b), opts)
		if d.Regression {
			t.Fatalf("seeds %d/%d: false regression %+v", seed, seed+1, d.Counts)
		}
		for _, c := range d.Cells {
			for _, m := range c.Metrics {
				if m.Significant {
					sig++
				}
			}
		}
		s := nightly(seed+1, 64).build()
		if d := Diff(mustNormalize(t, a), mustNormalize(t, s), opts); d.Counts.Regressions == 0 {
			t.Fatalf("seed %d: 10%% slowdown missed", seed)
		}
	}
	t.Logf("%d significant but sub-threshold changes among 100 same-distribution pairs", sig)
}

func TestDiffThresholdAndMetrics(t *testing.T) {
	// A 20 % threshold swallows the 10 % slowdown.
	if d := diffFixtures(t, "nightly-base", "nightly-slow", DiffOptions{Threshold: 0.20}); d.Regression {
		t.Errorf("10%% slowdown flagged at a 20%% threshold: %+v", d.Counts)
	}
	// Only the metrics asked for are judged.
	d := diffFixtures(t, "nightly-base", "nightly-slow", DiffOptions{Metrics: []string{"ttft_p99_ms", "num_requests"}})
	for _, c := range d.Cells {
		for _, m := range c.Metrics {
			if m.Metric != "ttft_p99_ms" && m.Metric != "num_requests" {
				t.Errorf("metric %s judged", m.Metric)
			}
			if m.Metric == "num_requests" && (m.Verdict != Same || m.Regression) {
				t.Errorf("identical counts: verdict %s", m.Verdict)
			}
		}
	}
}

func TestDiffCellChanges(t *testing.T) {
	old := nightly(1, 0).build()
	new := nightly(2, 0).build()
	old.Cells = old.Cells[1:]                                     // bs1 only in new
	new.Cells = new.Cells[:3]                                     // bs256 ok in old, missing in new
	new.Cells[2].Status, new.Cells[2].Repeats = StatusFailed, nil // bs64 newly failed
	new.Cells[2].Error = "worker exited: signal: killed"          //
	old.Cells[0].Status, old.Cells[0].Repeats = StatusFailed, nil // bs16 fixed
	d := Diff(mustNormalize(t, old), mustNormalize(t, new), DiffOptions{Threshold: DefaultThreshold, OldName: "a", NewName: "b"})
	got := map[string]CellChange{}
	for _, c := range d.Cells {
		got[strings.SplitN(c.ID, "-", 2)[0]] = c.Change
	}
	want := map[string]CellChange{"bs1": CellAdded, "bs16": CellFixed, "bs64": CellNewlyFailed, "bs256": CellMissing}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s, want %s", k, got[k], v)
		}
	}
	// A newly failed cell is a regression even when nothing else was
	// compared, and it outranks the missing cell.
	if !d.Regression || d.Outcome != OutcomeRegression || !strings.Contains(d.Err().Error(), "1 newly failed cell") || !errors.Is(d.Err(), ErrRegression) {
		t.Errorf("a newly failed cell must count as a regression: %v", d.Err())
	}
	var buf bytes.Buffer
	d.WriteMarkdown(&buf)
	for _, want := range []string{"Newly failed cells", "worker exited: signal: killed", "Cells only in NEW", "Cells ok in OLD, missing or skipped in NEW", "bs256-fbe9d714: not in NEW", "Cells fixed"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, buf.String())
		}
	}
	// A cell that was not ok in OLD and is gone from NEW lost nothing
	// that was compared: removed, not missing.
	old.Cells[2].Status, old.Cells[2].Repeats = StatusFailed, nil
	d = Diff(mustNormalize(t, old), mustNormalize(t, new), DiffOptions{Threshold: DefaultThreshold})
	for _, c := range d.Cells {
		if strings.HasPrefix(c.ID, "bs256-") && c.Change != CellRemoved {
			t.Errorf("bs256 failed in OLD, absent in NEW: %s, want removed", c.Change)
		}
	}
	if d.Counts.Missing != 0 || d.Counts.Removed != 1 {
		t.Errorf("counts %+v: want 1 removed, 0 missing", d.Counts)
	}
}

func TestDiffGolden(t *testing.T) {
	for _, pair := range []struct{ name, old, new string }{
		{"slow", "nightly-base", "nightly-slow"},
		{"same", "nightly-base", "nightly-same"},
		{"roofline", "roofline", "roofline-new"},
	} {
		d := diffFixtures(t, pair.old, pair.new, DiffOptions{})
		for _, f := range []struct {
			ext   string
			write func(*bytes.Buffer) error
		}{
			{"text", func(b *bytes.Buffer) error { return d.WriteText(b) }},
			{"markdown", func(b *bytes.Buffer) error { return d.WriteMarkdown(b) }},
			{"json", func(b *bytes.Buffer) error { return d.WriteJSON(b) }},
		} {
			var buf bytes.Buffer
			if err := f.write(&buf); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, "diff-"+pair.name+"."+f.ext+".golden", buf.Bytes())
		}
	}
}

func TestDiffEnvironment(t *testing.T) {
	a := testEnvironment()
	b := testEnvironment()
	b.GPUs[0].Driver = "555.42.02"
	// The clocks an idle GPU happened to run at when the run started are
	// no fact of the environment; its power limit is.
	b.GPUs[0].SMClockMHz, b.GPUs[0].MemClockMHz = 345, 405
	b.GPUs[0].PowerLimitW = 600
	b.GPUs = append(b.GPUs, GPU{Index: 1, Name: "NVIDIA H100 80GB HBM3"})
	b.Repo = nil
	b.Xrun.Modified = true
	got := DiffEnvironment(a, b)
	want := []EnvChange{
		{"xrun.modified", "false", "true"},
		{"gpus[0].driver", "550.54.15", "555.42.02"},
		{"gpus[0].power_limit_w", "700", "600"},
		{"gpus[1]", "(none)", `{"index":1,"name":"NVIDIA H100 80GB HBM3","uuid":"","driver":"","cuda_version":"","memory_bytes":0,"compute_capability":"","sm_clock_mhz":0,"mem_clock_mhz":0,"power_limit_w":0}`},
		{"repo", `{"commit":"fedcba9876543210fedcba9876543210fedcba98","dirty":false}`, "(none)"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d changes %v, want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("change %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestTestable(t *testing.T) {
	for _, tc := range []struct {
		n1, n2 int
		want   bool
	}{{3, 3, false}, {3, 4, false}, {4, 4, true}, {2, 7, false}, {2, 8, true}, {1, 40, true}, {1, 38, false}, {0, 5, false}, {6, 6, true}} {
		if got := Testable(tc.n1, tc.n2); got != tc.want {
			t.Errorf("Testable(%d, %d) = %v, want %v", tc.n1, tc.n2, got, tc.want)
		}
	}
}

// TestDiffInconclusive: a 30 % drop over 3 repeats a side cannot be
// significant (the U test's smallest p is 0.1), so it is no regression;
// but the verdict must not read OK. With 4 a side it is a regression; a
// 30 % gain over 3+3 is not inconclusive.
func TestDiffInconclusive(t *testing.T) {
	run := func(scale float64, n int) *Results {
		r := &Results{Name: "x"}
		var reps []Metrics
		for i := range n {
			v := scale * (1000 + float64(i))
			reps = append(reps, Metrics{"system_output_throughput_tok_s": v})
		}
		r.Cells = []Cell{{ID: "bs1", Status: StatusOK, Params: Params{"batch_size": 1}, Repeats: reps}}
		n2, err := Normalized(r)
		if err != nil {
			t.Fatal(err)
		}
		return n2
	}
	opts := DiffOptions{Threshold: DefaultThreshold, Metrics: []string{"system_output_throughput_tok_s"}, OldName: "old", NewName: "new"}
	d := Diff(run(1, 3), run(0.7, 3), opts)
	if d.Regression || d.Err() != nil || d.Counts.Inconclusive != 1 || !d.Cells[0].Metrics[0].Inconclusive {
		t.Fatalf("3+3, -30%%: regression %v, counts %+v", d.Regression, d.Counts)
	}
	var text bytes.Buffer
	if err := d.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"INCONCLUSIVE: no significant regression beyond 3%, but 1 metric worse by more than 3% with too few repeats to test (3+3 can never reach p < 0.05; 4+4 can)",
		"too few repeats",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	if d := Diff(run(1, 4), run(0.7, 4), opts); !d.Regression || d.Counts.Inconclusive != 0 {
		t.Errorf("4+4, -30%%: regression %v, counts %+v; want a regression", d.Regression, d.Counts)
	}
	if d := Diff(run(1, 3), run(1.3, 3), opts); d.Counts.Inconclusive != 0 || d.label() != "OK" {
		t.Errorf("3+3, +30%%: counts %+v, label %s; want OK", d.Counts, d.label())
	}
}

// TestDiffNeverOKAboutNothing: every way of comparing nothing is its own
// outcome with ErrNotCompared, states that it compared 0 cells, and never
// reads OK.
func TestDiffNeverOKAboutNothing(t *testing.T) {
	base := func() *Results { return nightly(1, 0).build() }
	for _, c := range []struct {
		name    string
		old     func() *Results
		new     func() *Results
		opts    DiffOptions
		outcome Outcome
		reason  string
	}{
		{"new has no cells", base, func() *Results { r := nightly(2, 0).build(); r.Cells = nil; return r }, DiffOptions{},
			OutcomeNothingCompared, "NEW has no cells"},
		{"old has no cells", func() *Results { r := base(); r.Cells = nil; return r }, func() *Results { return nightly(2, 0).build() }, DiffOptions{},
			OutcomeNothingCompared, "OLD has no cells"},
		{"no id matches", base, func() *Results {
			// Another dataset size: every cell id changes.
			s := nightly(2, 0)
			for i := range s.cells {
				s.cells[i].params["dataset.num_requests"] = 6000
			}
			return s.build()
		}, DiffOptions{}, OutcomeNothingCompared, "no cell of OLD is in NEW (4 only in OLD, 4 only in NEW)"},
		{"interrupted nightly", base, func() *Results {
			r := nightly(2, 0).build()
			for i := range r.Cells {
				r.Cells[i] = Cell{ID: r.Cells[i].ID, Params: r.Cells[i].Params, Status: StatusSkipped, Error: "not run yet: interrupted"}
			}
			return r
		}, DiffOptions{Missing: MissingWarn}, OutcomeNothingCompared, "every cell ok in OLD is missing or skipped in NEW (4 cells): an interrupted run?"},
		{"no metric in common", base, func() *Results { return nightly(2, 0).build() }, DiffOptions{Metrics: []string{"no_such_metric"}},
			OutcomeNothingCompared, "no metric judged was measured in both"},
		{"other study", base, func() *Results { r := nightly(2, 0).build(); r.Name = "gemm-plugin"; return r }, DiffOptions{},
			OutcomeNotComparable, `OLD is study "nightly", NEW is study "gemm-plugin": results of different studies are not compared`},
	} {
		t.Run(c.name, func(t *testing.T) {
			opts := c.opts
			opts.Threshold, opts.NoiseFactor, opts.OldName, opts.NewName = DefaultThreshold, DefaultNoiseFactor, "old", "new"
			d := Diff(mustNormalize(t, c.old()), mustNormalize(t, c.new()), opts)
			if d.Outcome != c.outcome || d.Regression {
				t.Fatalf("outcome %s (regression %v), want %s", d.Outcome, d.Regression, c.outcome)
			}
			if err := d.Err(); !errors.Is(err, ErrNotCompared) || errors.Is(err, ErrRegression) || !strings.Contains(err.Error(), c.reason) {
				t.Errorf("err = %v; want ErrNotCompared saying %q", err, c.reason)
			}
			for _, format := range DiffFormats {
				var b bytes.Buffer
				if err := d.Render(&b, format); err != nil {
					t.Fatal(err)
				}
				out := b.String()
				if strings.Contains(out, "OK:") || strings.Contains(out, `"outcome": "ok"`) || strings.Contains(out, "no significant regression") {
					t.Errorf("%s reads as an all-clear:\n%s", format, out)
				}
				want := []string{"0 metric comparisons", c.reason}
				if format == "json" {
					want = []string{`"compared_metrics": 0`, `"outcome": "` + string(c.outcome) + `"`}
				}
				for _, w := range want {
					if !strings.Contains(out, w) {
						t.Errorf("%s lacks %q:\n%s", format, w, out)
					}
				}
			}
		})
	}
	// Every cell of NEW failed: that is a regression (exit 3), not silence.
	r := nightly(2, 0).build()
	for i := range r.Cells {
		r.Cells[i].Status, r.Cells[i].Repeats, r.Cells[i].Error = StatusFailed, nil, "out of memory"
	}
	d := Diff(mustNormalize(t, base()), mustNormalize(t, r), DiffOptions{Threshold: DefaultThreshold})
	if d.Outcome != OutcomeRegression || !errors.Is(d.Err(), ErrRegression) || d.Counts.NewlyFailed != 4 {
		t.Errorf("every cell newly failed: %s %+v", d.Outcome, d.Counts)
	}
	// A renamed study is compared with AnyStudy, and says both names.
	renamed := nightly(3, 0).build()
	renamed.Name = "nightly-v2"
	d = Diff(mustNormalize(t, base()), mustNormalize(t, renamed), DiffOptions{Threshold: DefaultThreshold, AnyStudy: true})
	var b bytes.Buffer
	d.WriteText(&b)
	if d.Outcome != OutcomeOK || d.Err() != nil || !strings.Contains(b.String(), `Compared 4 cells, 20 metric comparisons (studies "nightly" and "nightly-v2")`) {
		t.Errorf("--any-study: %s\n%s", d.Outcome, b.String())
	}
}

// halfSkipped is the nightly study interrupted after two cells: the other
// two are skipped.
func halfSkipped(seed uint64) *Results {
	r := nightly(seed, 0).build()
	for _, i := range []int{2, 3} {
		r.Cells[i] = Cell{ID: r.Cells[i].ID, Params: r.Cells[i].Params, Status: StatusSkipped, Error: "not run yet: interrupted"}
	}
	return r
}

// TestDiffMissing: cells ok in OLD but skipped or absent in NEW fail the
// diff by default, are listed and let the rest be judged with
// MissingWarn, and never hide a regression.
func TestDiffMissing(t *testing.T) {
	old := mustNormalize(t, nightly(1, 0).build())
	partial := mustNormalize(t, halfSkipped(3))
	fail := Diff(old, partial, DiffOptions{Threshold: DefaultThreshold, NoiseFactor: DefaultNoiseFactor})
	if fail.Outcome != OutcomeMissing || fail.Missing != MissingFail || fail.Counts.Missing != 2 || fail.Counts.Compared != 2 || fail.Counts.Metrics != 10 {
		t.Fatalf("default policy: %s %+v", fail.Outcome, fail.Counts)
	}
	err := fail.Err()
	if !errors.Is(err, ErrNotCompared) || err.Error() != "missing cells: 2 cells ok in OLD are missing or skipped in NEW and not compared (--missing warn accepts that), no significant regression beyond 3% in the 2 cells compared" {
		t.Errorf("err = %v", err)
	}
	warn := Diff(old, partial, DiffOptions{Threshold: DefaultThreshold, NoiseFactor: DefaultNoiseFactor, Missing: MissingWarn})
	if warn.Outcome != OutcomeOK || warn.Err() != nil || warn.headline() != "no significant regression beyond 3%, 2 cells ok in OLD are missing or skipped in NEW and not compared" {
		t.Errorf("--missing warn: %s, %q", warn.Outcome, warn.headline())
	}
	// Cells removed from NEW count the same as skipped ones.
	removed := mustNormalize(t, nightly(3, 0).build())
	removed.Cells = removed.Cells[:2]
	if d := Diff(old, removed, DiffOptions{Threshold: DefaultThreshold}); d.Outcome != OutcomeMissing || d.Counts.Missing != 2 {
		t.Errorf("cells absent from NEW: %s %+v", d.Outcome, d.Counts)
	}
	// A regression among the cells compared is exit 3 whatever the policy.
	slow := nightly(3, 16).build()
	slow.Cells[3] = Cell{ID: slow.Cells[3].ID, Params: slow.Cells[3].Params, Status: StatusSkipped}
	for _, p := range MissingPolicies {
		d := Diff(old, mustNormalize(t, slow), DiffOptions{Threshold: DefaultThreshold, NoiseFactor: DefaultNoiseFactor, Missing: p})
		if d.Outcome != OutcomeRegression || !errors.Is(d.Err(), ErrRegression) || !strings.Contains(d.headline(), "1 cell ok in OLD is missing or skipped in NEW") {
			t.Errorf("%s: %s %q", p, d.Outcome, d.headline())
		}
	}
}

func TestBenjaminiHochberg(t *testing.T) {
	for _, c := range []struct{ p, want []float64 }{
		{nil, []float64{}},
		{[]float64{0.03}, []float64{0.03}},
		// Sorted 0.005 0.01 0.03 0.04 give 0.02 0.02 0.04 0.04.
		{[]float64{0.01, 0.04, 0.03, 0.005}, []float64{0.02, 0.04, 0.04, 0.02}},
		// Ties share the q of the last of them; q never exceeds 1.
		{[]float64{0.002, 0.002, 0.9, 0.8}, []float64{0.004, 0.004, 0.9, 0.9}},
		{[]float64{1, 1, 0.6}, []float64{1, 1, 1}},
	} {
		got := benjaminiHochberg(c.p)
		if len(got) != len(c.want) {
			t.Fatalf("%v: %v", c.p, got)
		}
		for i := range got {
			if math.Abs(got[i]-c.want[i]) > 1e-12 {
				t.Errorf("BH(%v) = %v, want %v", c.p, got, c.want)
				break
			}
		}
	}
	if got := repeatsForCorrection(20); got != 6 {
		t.Errorf("repeats for 20 comparisons = %d, want 6 (MinP(6,6) = 0.0022 < 0.05/20)", got)
	}
	if got := repeatsForCorrection(40); got != 7 {
		t.Errorf("repeats for 40 comparisons = %d, want 7", got)
	}
}

// TestDiffCorrection: a lone significant metric among many comparisons is
// not a regression after the correction, the report says how many
// comparisons it made and how many false positives alpha alone would
// give, and warns when the repeats are too few for one comparison to
// pass the correction.
func TestDiffCorrection(t *testing.T) {
	old := nightly(1, 0).build()
	new := nightly(2, 0).build()
	// One metric of one cell, 6 % worse, fully separated: p = 0.0022.
	for _, rep := range new.Cells[1].Repeats {
		rep["ttft_p99_ms"] = 1.06 * 1.2 * slices.Max(column(old.Cells[1].Repeats, "ttft_p99_ms"))
	}
	metrics := append(HeadlineMetrics(), "ttft_p99_ms", "tpot_p99_ms", "request_latency_p99_ms")
	opts := DiffOptions{Threshold: DefaultThreshold, Metrics: metrics}
	d := Diff(mustNormalize(t, old), mustNormalize(t, new), opts)
	var lone *MetricDiff
	for i := range d.Cells[1].Metrics {
		if m := &d.Cells[1].Metrics[i]; m.Metric == "ttft_p99_ms" {
			lone = m
		}
	}
	if lone == nil || lone.P >= Alpha || lone.Q < Alpha || lone.Significant || lone.Regression || lone.Verdict != Same {
		t.Fatalf("lone metric: %+v; want p < 0.05 but q >= 0.05, ~, no regression", lone)
	}
	if d.Tests.Comparisons != 32 || d.Tests.ExpectedFalsePositives != 1.6 || d.Tests.Correction != "benjamini-hochberg" || d.Tests.SignificantUncorrected < 1 || d.Tests.Significant != 0 {
		t.Errorf("tests %+v", d.Tests)
	}
	var b bytes.Buffer
	d.WriteText(&b)
	for _, want := range []string{
		"Compared 4 cells, 32 metric comparisons",
		"q < 0.05 after the Benjamini-Hochberg correction over the 32 comparisons. Uncorrected, 1.6 of them would be significant by chance alone if nothing changed;",
		"with 32 comparisons, a change in one metric alone must reach p < 0.0016 to be significant after the correction; 6+6 repeats reach p = 0.0022 at best: use 7 repeats a side, or judge fewer metrics (--metric)",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
	// Judged alone, the same change is a regression.
	opts.Metrics = []string{"ttft_p99_ms"}
	if d := Diff(mustNormalize(t, old), mustNormalize(t, new), opts); d.Counts.Regressions != 1 || d.Tests.Comparisons != 4 {
		t.Errorf("ttft_p99_ms alone: %+v %+v", d.Counts, d.Tests)
	}
}

// TestDiffNoise: a change beyond the threshold and significant, but within
// twice the spread of the repeats, is no regression: INCONCLUSIVE. With a
// smaller factor, or the rule off, it is one.
func TestDiffNoise(t *testing.T) {
	run := func(values ...float64) *Results {
		r := &Results{Name: "x"}
		var reps []Metrics
		for _, v := range values {
			reps = append(reps, Metrics{"system_output_throughput_tok_s": v})
		}
		r.Cells = []Cell{{ID: "bs1", Status: StatusOK, Params: Params{"batch_size": 1}, Repeats: reps}}
		return mustNormalize(t, r)
	}
	// Old is tight; new is 5 % lower at the median, every repeat below
	// old's, but its repeats spread by about 4.7 % (pooled 3.3 %).
	old := run(1000, 1001, 1002, 1003, 1004, 1005)
	new := run(900, 920, 940, 960, 980, 999)
	for _, c := range []struct {
		k          float64
		regression bool
	}{{DefaultNoiseFactor, false}, {1, true}, {0, true}} {
		d := Diff(old, new, DiffOptions{Threshold: DefaultThreshold, NoiseFactor: c.k, Metrics: []string{"system_output_throughput_tok_s"}})
		m := d.Cells[0].Metrics[0]
		if m.Regression != c.regression || !m.Significant || m.Verdict != Slower {
			t.Errorf("k=%g: %+v; want regression %v", c.k, m, c.regression)
		}
		if c.k == 0 && m.Noise != 0 {
			t.Errorf("k=0: noise %g, want the rule off", m.Noise)
		}
		if c.regression {
			continue
		}
		if !m.WithinNoise || !m.Inconclusive || d.Outcome != OutcomeInconclusive || d.Err() != nil || d.Counts.WithinNoise != 1 {
			t.Errorf("k=%g: %+v, outcome %s", c.k, m, d.Outcome)
		}
		if m.Noise < 0.06 || m.Noise > 0.07 {
			t.Errorf("noise band %g, want about 2 x 3.3 %%", m.Noise)
		}
		var b bytes.Buffer
		d.WriteText(&b)
		for _, want := range []string{
			"INCONCLUSIVE: no significant regression beyond 3%, but 1 metric significantly worse by more than 3% yet within 2× the spread of their repeats (noise)",
			"±6.6%", "slower (p=0.002 q=0.002 n=6+6) within noise",
		} {
			if !strings.Contains(b.String(), want) {
				t.Errorf("text lacks %q:\n%s", want, b.String())
			}
		}
	}
	// The spread is robust: one wild repeat of a tight sample barely
	// widens the band.
	if s := relSpread([]float64{100, 100.1, 99.9, 100, 100.2, 160}); s > 0.003 {
		t.Errorf("spread with an outlier = %g", s)
	}
	if s := relSpread([]float64{5}); s != 0 {
		t.Errorf("spread of one value = %g", s)
	}
}

// TestDiffClock: a cell whose SM clock fell 10 % and whose throughput fell
// with it is still a regression, explained by the clock: per clock cycle
// nothing changed. Clocks within 1 % are the same clock.
func TestDiffClock(t *testing.T) {
	build := func(clock, scale float64) *Results {
		r := &Results{Name: "x"}
		var reps []Metrics
		for i := range 6 {
			v := 1000 + float64(i)
			reps = append(reps, Metrics{"system_output_throughput_tok_s": scale * v, "total_latency_ms": 10 * v / scale})
		}
		r.Cells = []Cell{{ID: "bs1", Status: StatusOK, Params: Params{"batch_size": 1}, Repeats: reps,
			Telemetry: &Telemetry{SMClockMHzMean: clock, SMClockMHzMax: 1980}}}
		return mustNormalize(t, r)
	}
	opts := DiffOptions{Threshold: DefaultThreshold, NoiseFactor: DefaultNoiseFactor, Metrics: []string{"system_output_throughput_tok_s", "total_latency_ms"}}
	d := Diff(build(1980, 1), build(1782, 0.9), opts)
	c := d.Cells[0]
	if c.Clock == nil || c.Clock.OldMHz != 1980 || c.Clock.NewMHz != 1782 || c.Clock.Change != -0.1 || d.Counts.ClockDiffers != 1 {
		t.Fatalf("clock %+v", c.Clock)
	}
	for _, m := range c.Metrics {
		if !m.Regression || !m.ClockExplained || m.PerClock == nil || math.Abs(*m.PerClock) > 1e-4 {
			t.Errorf("%s: %+v; want a regression explained by the clock, 0 per clock", m.Metric, m)
		}
	}
	if d.Counts.ClockExplained != 2 || d.headline() != "2 significant regressions beyond 3% (2 explained by the SM clock: not worse per clock cycle)" {
		t.Errorf("headline %q", d.headline())
	}
	var b bytes.Buffer
	d.WriteText(&b)
	for _, want := range []string{"Mean SM clock differs", "bs1: 1980 → 1782 MHz (-10.0%)", "per clock", "REGRESSION explained by the SM clock"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
	// A slowdown beyond what the clock explains is not explained.
	d = Diff(build(1980, 1), build(1782, 0.8), opts)
	for _, m := range d.Cells[0].Metrics {
		if !m.Regression || m.ClockExplained || m.PerClock == nil || *m.PerClock > -0.05 && *m.PerClock < 0.05 {
			t.Errorf("%s: %+v; want a regression of about 11 %% per clock", m.Metric, m)
		}
	}
	// 0.5 % apart is one clock: no clock note, no per clock column.
	d = Diff(build(1980, 1), build(1970, 1), opts)
	b.Reset()
	d.WriteText(&b)
	if d.Cells[0].Clock != nil || strings.Contains(b.String(), "per clock") {
		t.Errorf("clocks 0.5 %% apart reported:\n%s", b.String())
	}
	// No telemetry (CPU cells): nothing to say.
	if diffClock(&Cell{}, &Cell{Telemetry: &Telemetry{SMClockMHzMean: 1500}}) != nil {
		t.Error("a clock diff without telemetry on one side")
	}
}

// TestDiffOutcomeGolden renders the outcomes the fixtures do not: cells
// missing (an interrupted nightly), nothing compared, and a throttled
// cell whose regression the clock explains.
func TestDiffOutcomeGolden(t *testing.T) {
	clocked := func() *Results {
		s := nightly(2, 64)
		r := s.build()
		for i := range r.Cells {
			if strings.HasPrefix(r.Cells[i].ID, "bs64-") {
				r.Cells[i].Telemetry.SMClockMHzMean = 1975.4 / 1.1
			}
		}
		return r
	}
	empty := func() *Results { r := nightly(2, 0).build(); r.Cells = nil; return r }
	for _, c := range []struct {
		name string
		new  func() *Results
		opts DiffOptions
	}{
		{"missing", func() *Results { return halfSkipped(3) }, DiffOptions{}},
		{"missing-warn", func() *Results { return halfSkipped(3) }, DiffOptions{Missing: MissingWarn}},
		{"nothing", empty, DiffOptions{}},
		{"clock", clocked, DiffOptions{}},
	} {
		opts := c.opts
		opts.Threshold, opts.NoiseFactor, opts.OldName, opts.NewName = DefaultThreshold, DefaultNoiseFactor, "testdata/nightly-base", c.name
		d := Diff(loadFixture(t, "nightly-base"), mustNormalize(t, c.new()), opts)
		for _, format := range DiffFormats {
			if c.name == "missing-warn" && format != "text" {
				continue
			}
			var b bytes.Buffer
			if err := d.Render(&b, format); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, "diff-"+c.name+"."+format+".golden", b.Bytes())
		}
	}
}

// TestDiffTrend: a cell whose repeats trend on either side is named, with
// the side and how much, in the diff's cell lists and its JSON.
func TestDiffTrend(t *testing.T) {
	old, new := loadFixture(t, "nightly-base"), loadFixture(t, "nightly-base")
	c := &new.Cells[0]
	for i := range c.Repeats {
		c.Repeats[i] = maps.Clone(c.Repeats[i])
		c.Repeats[i][trendKey] = 1000 * float64(10+i)
	}
	n := len(c.Repeats)
	d := Diff(old, new, DiffOptions{Threshold: DefaultThreshold, NoiseFactor: DefaultNoiseFactor})
	want := fmt.Sprintf("new rose 10000 to %d (%+.0f%%)", 1000*(9+n), 100*(float64(9+n)/10-1))
	var found bool
	for _, cd := range d.Cells {
		switch {
		case cd.ID == c.ID:
			found = cd.Trend == want
		case cd.Trend != "":
			t.Errorf("cell %s: trend %q, want none", cd.ID, cd.Trend)
		}
	}
	var text bytes.Buffer
	if err := d.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !found || !strings.Contains(text.String(), "rose or fell from every repeat to the next") || !strings.Contains(text.String(), c.ID+": "+want) {
		t.Errorf("trend of %s not reported as %q:\n%s", c.ID, want, text.String())
	}
}

// TestDiffHeld: a cell whose engine held more requests at once, or paged
// where it kept fixed slots, says so beside its verdicts (the counts are
// no metric to compare); results without the counts, or with the same
// ones, say nothing.
func TestDiffHeld(t *testing.T) {
	build := func(held map[string]float64) *Results {
		r := &Results{Name: "x"}
		var reps []Metrics
		for i := range 6 {
			m := Metrics{"system_output_throughput_tok_s": 1000 + float64(i)}
			maps.Copy(m, held)
			reps = append(reps, m)
		}
		r.Cells = []Cell{{ID: "spread", Status: StatusOK, Params: Params{"batch_size": 2048}, Repeats: reps}}
		return mustNormalize(t, r)
	}
	opts := DiffOptions{Threshold: DefaultThreshold, NoiseFactor: DefaultNoiseFactor, Metrics: []string{"system_output_throughput_tok_s"}}
	fixed := map[string]float64{MaxInFlightKey: 357, PeakInFlightKey: 357, KVBlocksKey: 0}
	paged := map[string]float64{MaxInFlightKey: 1500, PeakInFlightKey: 1100, KVBlocksKey: 31645}
	d := Diff(build(fixed), build(paged), opts)
	if got, want := d.Cells[0].Held, "max_in_flight 357 → 1500, peak_in_flight 357 → 1100, kv_cache_blocks 0 → 31645"; got != want {
		t.Errorf("held %q, want %q", got, want)
	}
	var b bytes.Buffer
	d.WriteText(&b)
	if !strings.Contains(b.String(), "Cells whose engine held their requests differently") || !strings.Contains(b.String(), "spread: max_in_flight 357 → 1500") {
		t.Errorf("text lacks the held cells:\n%s", b.String())
	}
	for _, c := range []struct {
		name     string
		old, new map[string]float64
		want     string
	}{
		{"same counts", fixed, fixed, ""},
		{"old without the counts", nil, paged, ""},
		{"old with max_in_flight only", map[string]float64{MaxInFlightKey: 357}, paged, "max_in_flight 357 → 1500"},
	} {
		if got := Diff(build(c.old), build(c.new), opts).Cells[0].Held; got != c.want {
			t.Errorf("%s: held %q, want %q", c.name, got, c.want)
		}
	}
}
