package htmlreport

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/golden"
)

// nightlyTrend is a trend over seven nights of package results' nightly
// fixtures: the base and same runs (two runs of the same code) by turns,
// then two nights of the slow one, whose batch-64 cell regressed.
func nightlyTrend(t *testing.T) *results.TrendReport {
	t.Helper()
	var runs []*results.Results
	var names []string
	for i, f := range []string{"nightly-base", "nightly-same", "nightly-base", "nightly-same", "nightly-base", "nightly-slow", "nightly-slow"} {
		r := loadStudy(t, filepath.Join(resultsFixtures, f))
		r.Started = time.Date(2026, 3, 1+i, 2, 0, 0, 0, time.UTC)
		r.Finished = r.Started.Add(20 * time.Minute)
		runs = append(runs, r)
		names = append(names, "results/nightly/2026-03-0"+string(rune('1'+i)))
	}
	tr, err := results.Trend(runs, results.TrendOptions{Threshold: results.DefaultThreshold, NoiseFactor: results.DefaultTrendNoiseFactor, Names: names})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestTrendGolden: the data behind the trend page's charts.
func TestTrendGolden(t *testing.T) {
	b, err := TrendJSON(nightlyTrend(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "nightly.trend.json", b)
}

// TestTrendPage: the trend page is well-formed, has its sections and a
// chart per series, and refers to nothing outside itself.
func TestTrendPage(t *testing.T) {
	tr := nightlyTrend(t)
	var buf bytes.Buffer
	if err := WriteTrend(&buf, tr, Options{}); err != nil {
		t.Fatal(err)
	}
	doc := checkPage(t, buf.Bytes())
	if !slices.Equal(doc.sections, TrendSections) {
		t.Errorf("sections %v, want %v", doc.sections, TrendSections)
	}
	if len(doc.charts) != min(len(tr.Series), maxTrendCharts) {
		t.Errorf("%d charts for %d series", len(doc.charts), len(tr.Series))
	}
	if tr.Counts.Steps == 0 {
		t.Fatal("the nightly trend found no step; the test needs one")
	}
	td := BuildTrend(tr, Options{})
	if capped := BuildTrend(tr, Options{MaxCellCharts: 3}); len(capped.Charts) != 3 || !strings.Contains(capped.Left, "charts for 3 of 20 series") {
		t.Errorf("capped at 3: %d charts, %q", len(capped.Charts), capped.Left)
	}
	if len(td.Charts[0].Steps) == 0 || len(td.Charts[0].Levels) != len(td.Charts[0].Steps)+1 {
		t.Errorf("first chart %s: %d steps, %d levels; want the series with steps first, a level more than steps", td.Charts[0].Name, len(td.Charts[0].Steps), len(td.Charts[0].Levels))
	}
}

func TestTrendLevels(t *testing.T) {
	pts := []Point{{X: 0}, {X: 1}, {X: 2}, {X: 3}, {X: 4}, {X: 5}}
	got := trendLevels(pts, []results.TrendStep{{Run: 2, Before: 10, After: 12}, {Run: 5, Before: 12, After: 9}})
	want := []Level{{0, 1, 10}, {2, 4, 12}, {5, 5, 9}}
	if !slices.Equal(got, want) {
		t.Errorf("levels %v, want %v", got, want)
	}
	if trendLevels(pts, nil) != nil {
		t.Error("levels without steps")
	}
}
