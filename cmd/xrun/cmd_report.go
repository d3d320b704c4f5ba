package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/xrun-dev/xrun/engine/profile"
	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/htmlreport"
	"github.com/xrun-dev/xrun/results/layout"
	"github.com/xrun-dev/xrun/runner"
)

type reportOptions struct {
	format  string
	metrics []string
	output  string
}

// htmlFormat is the format package htmlreport draws (report.html, the
// diff's page); package results, which draws the others, does not know it.
const htmlFormat = "html"

func newReportCommand(a *app) *cobra.Command {
	opts := &reportOptions{}
	c := &cobra.Command{
		Use:   "report DIR",
		Short: "Re-render a results directory as tables, Markdown, CSV, JSON, Go benchmark format or an HTML page",
		Long: `Read a results directory (or its results.json) and print it again:

  text      the throughput table (median ±95% CI per cell, trtllm-bench metric
            names) and one pivot table per comparison with ratio and verdict
  markdown  the same as results.md
  csv       one row per cell: every parameter, and per metric the median and
            confidence interval bounds at full stored precision
  json      the canonical results.json
  bench     the Go benchmark format, one line per cell and repeat, so that
            benchstat (golang.org/x/perf/cmd/benchstat) works on xrun results
  html      report.html: the tables with charts (throughput against each
            numeric axis, the throughput-latency Pareto view, comparisons,
            kernels, telemetry over time, expert loads, energy) and the
            command that reproduces each cell; one file with nothing to load

Nothing is rerun; the statistics are recomputed from the stored repeats. GPU cells
that results.json gives no roofline (files written before xrun computed it) get
one from their cells/<id>/ records, for the "% roofline" column.`,
		Example: `  xrun report results/gemm-plugin
  xrun report results/gemm-plugin --format csv > gemm.csv
  xrun report results/gemm-plugin --format html --output gemm.html
  xrun report results/gemm-plugin --format bench | benchstat -col /gemm_plugin -`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runReport(cmd.Context(), a, opts, args) },
	}
	f := c.Flags()
	f.StringVar(&opts.format, "format", "text", "output format: "+strings.Join(reportFormats(), ", "))
	f.StringVarP(&opts.output, "output", "o", "", "write to this file (replaced whole, atomically) instead of stdout")
	f.StringSliceVar(&opts.metrics, "metric", nil, "metric keys to show (repeatable or comma-separated; default: headline metrics in tables, all in csv and bench)")
	return c
}

func runReport(_ context.Context, a *app, opts *reportOptions, args []string) error {
	if _, err := results.OutputFor(opts.format); err != nil && opts.format != htmlFormat {
		return usageError{fmt.Errorf("--format: unknown format %q; expected one of %s", opts.format, strings.Join(reportFormats(), ", "))}
	}
	r, file, err := results.Load(args[0])
	if err != nil {
		return err
	}
	attachRooflines(a, filepath.Dir(file), r)
	if err := results.CheckMetrics(opts.metrics, r); err != nil {
		return usageError{fmt.Errorf("--metric: %w", err)}
	}
	// Render fully before writing, so that a failure prints nothing.
	var buf bytes.Buffer
	if opts.format == htmlFormat {
		// The cells' files beside results.json give telemetry over time,
		// profile windows and expert loads per layer.
		err = htmlreport.Write(&buf, r, htmlreport.Options{Dir: filepath.Dir(file), Metrics: opts.metrics, Stage: profile.MoEStage})
	} else {
		err = results.Render(&buf, opts.format, r, results.RenderOptions{Metrics: opts.metrics})
	}
	if err != nil {
		return err
	}
	if opts.output != "" {
		if err := results.WriteFileAtomic(opts.output, buf.Bytes()); err != nil {
			return usageError{fmt.Errorf("--output: %w", err)}
		}
		return nil
	}
	_, err = a.gs.Stdout.Write(buf.Bytes())
	return err
}

// reportFormats are xrun report's formats: package results' and html.
func reportFormats() []string { return append(results.Formats(), htmlFormat) }

// attachRooflines gives the GPU cells of results read from dir the
// roofline that files written before xrun computed one lack, from the
// cells' records (the runner attaches them to new results itself). A cell
// that cannot have one (its records are gone, its GPU has no known
// ceilings) goes without; why is logged at debug level.
func attachRooflines(a *app, dir string, r *results.Results) {
	for _, err := range runner.AttachRooflines(r, func(id string) string { return layout.CellDir(dir, id) }) {
		a.log.Debug().Err(err).Msg("no roofline")
	}
}
