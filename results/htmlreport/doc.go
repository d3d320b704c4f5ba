// Package htmlreport owns xrun's HTML pages: report.html, the one file
// per results directory that shows a study as charts (throughput against
// every numeric axis with its confidence intervals and roofline, the
// throughput-latency trade-off with its Pareto front, every comparison's
// ratios and verdicts, kernels, telemetry over time, expert loads, energy)
// beside the tables and the command that reproduces each cell; the page of
// `xrun diff --format html`; and the page of a trend over runs.
//
// Every chart's data comes from a pure function of the results
// (BuildStudy, BuildDiff, BuildTrend and the functions they call: Pareto
// fronts, ratios with their bounds, kernel time by kind, telemetry spans,
// levels between steps); those are golden-tested as JSON under testdata/
// (go test ./results/htmlreport -update rewrites them), and only then
// drawn. The SVG itself is checked for presence and well-formedness, not
// byte for byte: its text depends on font metrics. Drawing is
// gonum.org/v1/plot rendering SVG through vg/vgsvg: pure Go, so the
// cgo-free build draws too; the SVG is inlined in the page, so the file
// opens from disk with no network and no JavaScript (nothing to load,
// nothing a browser may block), prints as vectors, and stays readable
// when zoomed. The page is html/template with its stylesheet embedded
// (go:embed); it references nothing outside itself.
//
// Charts are <svg> elements inside an element of class "chart" carrying
// data-chart="<name>", and every part of the page is a <section id=...>,
// so tests (and people) can find them.
//
// Comparisons pair cells as results' tables do (results.Comparisons),
// kernel changes come from results' kernel diff, and MoE stages from the
// caller (Options.Stage: engine/profile.MoEStage), so that this package
// re-implements none of them and does not depend on the engine.
//
// The package reads results and, where the results directory has them,
// cells/<id>/ files (telemetry.csv, cell.json, iterations.csv,
// expert_load.csv); it imports package results, never the reverse: the
// runner and cmd/xrun call it where they write results.md or print a
// report. Per-cell charts are capped (Options.MaxCellCharts), and the page
// says which cells it left out, so that a nightly study of a hundred cells
// still renders in a moment after every cell.
package htmlreport
