package results

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func diffFixtures(t *testing.T, old, new string, opts DiffOptions) *DiffReport {
	t.Helper()
	if opts.Threshold == 0 {
		opts.Threshold = DefaultThreshold
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
	for seed := uint64(100); seed < 300; seed += 2 {
		a, b := nightly(seed, 0).build(), nightly(seed+1, 0).build()
		d := Diff(mustNormalize(t, a), mustNormalize(t, b), DiffOptions{Threshold: DefaultThreshold})
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
		if d := Diff(mustNormalize(t, a), mustNormalize(t, s), DiffOptions{Threshold: DefaultThreshold}); d.Counts.Regressions == 0 {
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
	new.Cells = new.Cells[:3]                                     // bs256 only in old
	new.Cells[2].Status, new.Cells[2].Repeats = StatusFailed, nil // bs64 newly failed
	new.Cells[2].Error = "worker exited: signal: killed"          //
	old.Cells[0].Status, old.Cells[0].Repeats = StatusFailed, nil // bs16 fixed
	d := Diff(mustNormalize(t, old), mustNormalize(t, new), DiffOptions{Threshold: DefaultThreshold, OldName: "a", NewName: "b"})
	got := map[string]CellChange{}
	for _, c := range d.Cells {
		got[strings.SplitN(c.ID, "-", 2)[0]] = c.Change
	}
	want := map[string]CellChange{"bs1": CellAdded, "bs16": CellFixed, "bs64": CellNewlyFailed, "bs256": CellRemoved}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s, want %s", k, got[k], v)
		}
	}
	if !d.Regression || !strings.Contains(d.Err().Error(), "1 newly failed cell") {
		t.Errorf("a newly failed cell must count as a regression: %v", d.Err())
	}
	var buf bytes.Buffer
	d.WriteMarkdown(&buf)
	for _, want := range []string{"Newly failed cells", "worker exited: signal: killed", "Cells only in new", "Cells only in old", "Cells fixed"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, buf.String())
		}
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
			golden(t, "diff-"+pair.name+"."+f.ext+".golden", buf.Bytes())
		}
	}
}

func TestDiffEnvironment(t *testing.T) {
	a := testEnvironment()
	b := testEnvironment()
	b.GPUs[0].Driver = "555.42.02"
	b.GPUs = append(b.GPUs, GPU{Index: 1, Name: "NVIDIA H100 80GB HBM3"})
	b.Repo = nil
	b.Xrun.Modified = true
	got := DiffEnvironment(a, b)
	want := []EnvChange{
		{"xrun.modified", "false", "true"},
		{"gpus[0].driver", "550.54.15", "555.42.02"},
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
