package htmlreport

import (
	"fmt"
	"slices"

	"os"
	"path/filepath"

	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/layout"
)

// DefaultMaxCellCharts is how many cells get charts of their own
// (profile, telemetry, expert load) by default: enough for every study
// xrun ships but the nightly one, whose hundred cells would make a page
// nobody scrolls and that is rewritten after every cell.
const DefaultMaxCellCharts = 12

// Options tune a page.
type Options struct {
	// Dir is the results directory; its cells/<id>/ files give the
	// telemetry over time, the profile windows and the expert loads per
	// layer. "" reads nothing but the results.
	Dir string
	// Metrics are the metric keys of the tables and comparison charts;
	// empty means the headline metrics present (as results.RenderOptions).
	Metrics []string
	// Stage names the MoE stage of a kernel for the kernel categories
	// (engine/profile.MoEStage); nil files MoE kernels by results'
	// categories only.
	Stage KernelStage
	// MaxCellCharts caps the cells that get charts of their own, per
	// kind; 0 means DefaultMaxCellCharts. On the trend page it caps the
	// series charts instead (0: 30).
	MaxCellCharts int
}

func (o Options) maxCells() int {
	if o.MaxCellCharts > 0 {
		return o.MaxCellCharts
	}
	return DefaultMaxCellCharts
}

// ProfileChart is a profiled cell's kernels and diagnosis.
type ProfileChart struct {
	Name      string      `json:"name"`
	Cell      string      `json:"cell"`
	Label     string      `json:"label"`
	Window    string      `json:"window"`
	Kernels   KernelTimes `json:"kernels"`
	Diagnosis []string    `json:"diagnosis,omitempty"`
}

// Study is everything report.html draws, as data: the page renders it
// and nothing else, so golden-testing it tests what the charts show.
type Study struct {
	Name        string            `json:"name"`
	Throughput  []AxisChart       `json:"throughput"`
	Latency     *LatencyChart     `json:"latency"`
	Serving     *ServingChart     `json:"serving,omitempty"` // load points only (curves_serving.go)
	Comparisons []CompareChart    `json:"comparisons"`
	KernelPairs []KernelPairChart `json:"kernel_pairs"`
	Profiles    []ProfileChart    `json:"profiles"`
	Telemetry   []TelemetryChart  `json:"telemetry"`
	Throttle    []ThrottleLine    `json:"throttle"`
	MoE         []ExpertChart     `json:"moe"`
	Energy      []EnergyChart     `json:"energy"`
	Commands    []Command         `json:"commands"`
	// Left says, per section, which cells got no chart of their own and
	// why (the cap).
	Left map[string]string `json:"left,omitempty"`
}

// BuildStudy computes every chart's data from normalized results (see
// results.Normalized), reading the cells' files in o.Dir.
func BuildStudy(r *results.Results, o Options) *Study {
	s := newStudy(r)
	ro := results.RenderOptions{Metrics: o.Metrics}
	st := &Study{
		Name:        r.Name,
		Throughput:  ThroughputCharts(r),
		Latency:     ThroughputLatency(r),
		Serving:     ServingCurves(r),
		Comparisons: CompareCharts(r, ro),
		Energy:      EnergyCharts(r),
		Commands:    ReproduceCommands(r),
		Left:        map[string]string{},
	}
	limit := o.maxCells()
	byID := map[string]*results.Cell{}
	for _, c := range s.cells {
		byID[c.ID] = c
	}

	// Profiles, and the kernel changes of the pairs the report's
	// comparisons make.
	var profiled []*results.Cell
	for _, c := range s.cells {
		if c.Status == results.StatusOK && c.Profile != nil && len(c.Profile.Kernels) > 0 {
			profiled = append(profiled, c)
		}
	}
	for _, c := range capCells(st, "profiles", profiled, limit, "profiled cells") {
		kt, _ := CellKernels(c, o.Stage)
		st.Profiles = append(st.Profiles, ProfileChart{Name: "kernels-" + c.ID, Cell: c.ID, Label: s.labels[c.ID], Window: c.Profile.Window,
			Kernels: kt, Diagnosis: c.Profile.Diagnosis})
	}
	var pairs []KernelPairChart
	for _, ct := range results.BuildReport(r, ro).Comparisons {
		for _, p := range ct.Kernels {
			a, b := byID[p.BaseID], byID[p.CellID]
			if a == nil || b == nil {
				continue
			}
			ch, ok := kernelPair("kernel-pair-"+p.BaseID+"-"+p.CellID, a, b, p.Base, p.Value, p.Changes, o.Stage)
			if ok {
				ch.Where = p.Where
				pairs = append(pairs, ch)
			}
		}
	}
	if n := len(pairs) - limit; n > 0 {
		st.Left["kernel_pairs"] = fmt.Sprintf("charts for the first %d of %d compared pairs of profiled cells; results.md lists every pair's kernel changes", limit, len(pairs))
		pairs = pairs[:limit]
	}
	st.KernelPairs = pairs

	// Telemetry: throttled cells first, then profiled ones, then the
	// rest in table order; over time only where cells/ was kept.
	var tel []*results.Cell
	for _, c := range s.cells {
		if c.Telemetry != nil {
			st.Throttle = append(st.Throttle, ThrottleLine{Cell: c.ID, Label: s.labels[c.ID], Throttled: c.Telemetry.Throttled, Verdict: ThrottleVerdict(c.Telemetry)})
		}
		if c.Telemetry != nil || slices.Contains(c.Artifacts, telemetryArtifact(c.ID)) {
			tel = append(tel, c)
		}
	}
	if fi, err := os.Stat(filepath.Join(o.Dir, layout.CellsDir)); o.Dir != "" && err == nil && fi.IsDir() {
		rank := func(c *results.Cell) int {
			switch {
			case c.Telemetry != nil && c.Telemetry.Throttled:
				return 0
			case c.Profile != nil:
				return 1
			}
			return 2
		}
		slices.SortStableFunc(tel, func(a, b *results.Cell) int { return rank(a) - rank(b) })
		for _, c := range capCells(st, "telemetry", tel, limit, "cells with telemetry (throttled, then profiled cells first)") {
			st.Telemetry = append(st.Telemetry, CellTelemetry(o.Dir, c, s.labels[c.ID]))
		}
	}

	var moe []*results.Cell
	for _, c := range s.cells {
		if c.ExpertLoad != nil && len(c.ExpertLoad.Histogram) > 0 {
			moe = append(moe, c)
		}
	}
	for _, c := range capCells(st, "moe", moe, limit, "MoE cells") {
		st.MoE = append(st.MoE, CellExperts(o.Dir, c, s.labels[c.ID]))
	}
	if len(st.Left) == 0 {
		st.Left = nil
	}
	return st
}

// capCells keeps the first limit cells and notes in st.Left how many of
// what were left without a chart.
func capCells(st *Study, section string, cells []*results.Cell, limit int, what string) []*results.Cell {
	if len(cells) <= limit {
		return cells
	}
	st.Left[section] = fmt.Sprintf("charts for %d of %d %s (the page draws at most %d a section; cells/<id>/ has every cell's files)", limit, len(cells), what, limit)
	return cells[:limit]
}

func telemetryArtifact(id string) string { return layout.CellArtifact(id, layout.TelemetryFile) }

// ThrottleLine is a cell's throttle verdict, for every cell with
// telemetry, charted or not.
type ThrottleLine struct {
	Cell      string `json:"cell"`
	Label     string `json:"label"`
	Throttled bool   `json:"throttled"`
	Verdict   string `json:"verdict"`
}
