package htmlreport

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/engine/profile"
	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/golden"
)

// diffs are pairs of package results' fixtures, as xrun diff compares
// them: a regression, kernel changes between profiled runs, rooflines,
// and two runs of the same code.
var diffs = map[string][2]string{
	"slow":     {"nightly-base", "nightly-slow"},
	"kernels":  {"gemm-profiled", "gemm-profiled-new"},
	"roofline": {"roofline", "roofline-new"},
	"same":     {"nightly-base", "nightly-same"},
}

func loadDiff(t *testing.T, pair [2]string) (*results.DiffReport, *results.Results, *results.Results) {
	t.Helper()
	var rs [2]*results.Results
	for i, name := range pair {
		r, err := results.Normalized(loadStudy(t, filepath.Join(resultsFixtures, name)))
		if err != nil {
			t.Fatal(err)
		}
		rs[i] = r
	}
	d := results.Diff(rs[0], rs[1], results.DiffOptions{Threshold: results.DefaultThreshold, NoiseFactor: results.DefaultNoiseFactor,
		OldName: pair[0], NewName: pair[1]})
	return d, rs[0], rs[1]
}

// TestDiffGolden: the data behind the diff page's charts.
func TestDiffGolden(t *testing.T) {
	for name, pair := range diffs {
		t.Run(name, func(t *testing.T) {
			d, old, new := loadDiff(t, pair)
			b, err := DiffJSON(d, old, new, Options{Stage: profile.MoEStage})
			if err != nil {
				t.Fatal(err)
			}
			golden.Check(t, "diff-"+name+".json", b)
		})
	}
}

// TestDiffPage: the diff page is well-formed, leads with the verdict,
// charts the changes with the regressions first, and draws kernel
// changes where both runs were profiled.
func TestDiffPage(t *testing.T) {
	for name, pair := range diffs {
		t.Run(name, func(t *testing.T) {
			d, old, new := loadDiff(t, pair)
			var buf bytes.Buffer
			if err := WriteDiff(&buf, d, old, new, Options{Stage: profile.MoEStage}); err != nil {
				t.Fatal(err)
			}
			doc := checkPage(t, buf.Bytes())
			if !slices.Equal(doc.sections, DiffSections) {
				t.Errorf("sections %v, want %v", doc.sections, DiffSections)
			}
			if !strings.Contains(doc.text, d.Label()+": "+d.Headline()) {
				t.Errorf("no verdict line %q", d.Label())
			}
			if !slices.Contains(doc.charts, "delta-all") {
				t.Errorf("no delta chart: %v", doc.charts)
			}
			dd := BuildDiff(d, old, new, Options{})
			switch name {
			case "slow":
				if d.Outcome != results.OutcomeRegression || !dd.Deltas[0].Regression || dd.Deltas[0].Cell != "bs64-3195f03b" {
					t.Errorf("outcome %s, first delta %+v: want the regressions first", d.Outcome, dd.Deltas[0])
				}
			case "kernels":
				if len(dd.Kernels) == 0 || !slices.Contains(doc.charts, dd.Kernels[0].Name) {
					t.Errorf("no kernel chart; charts %v", doc.charts)
				}
			case "same":
				if d.Outcome != results.OutcomeOK || slices.ContainsFunc(dd.Deltas, func(x Delta) bool { return x.Regression || x.Improvement }) {
					t.Errorf("two runs of the same code: outcome %s", d.Outcome)
				}
			}
		})
	}
}
