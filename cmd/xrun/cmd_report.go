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
	"github.com/xrun-dev/xrun/results/layout"
)

type reportOptions struct {
	format  string
	metrics []string
}

func newReportCommand(a *app) *cobra.Command {
	opts := &reportOptions{}
	c := &cobra.Command{
		Use:   "report DIR",
		Short: "Re-render a results directory as tables, Markdown, CSV, JSON or Go benchmark format",
		Long: `Read a results directory (or its results.json) and print it again:

  text      the throughput table (median ±95% CI per cell, trtllm-bench metric
            names) and one pivot table per comparison with ratio and verdict
  markdown  the same as results.md
  csv       one row per cell: every parameter, and per metric the median and
            confidence interval bounds at full stored precision
  json      the canonical results.json
  bench     the Go benchmark format, one line per cell and repeat, so that
            benchstat (golang.org/x/perf/cmd/benchstat) works on xrun results

Nothing is rerun; the statistics are recomputed from the stored repeats. GPU cells
that results.json gives no roofline (files written before xrun computed it) get
one from their cells/<id>/ records, for the "% roofline" column.`,
		Example: `  xrun report results/gemm-plugin
  xrun report results/gemm-plugin --format csv > gemm.csv
  xrun report results/gemm-plugin --format bench | benchstat -col /gemm_plugin -`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runReport(cmd.Context(), a, opts, args) },
	}
	f := c.Flags()
	f.StringVar(&opts.format, "format", "text", "output format: "+strings.Join(results.Formats(), ", "))
	f.StringSliceVar(&opts.metrics, "metric", nil, "metric keys to show (repeatable or comma-separated; default: headline metrics in tables, all in csv and bench)")
	return c
}

func runReport(_ context.Context, a *app, opts *reportOptions, args []string) error {
	if _, err := results.OutputFor(opts.format); err != nil {
		return usageError{fmt.Errorf("--format: %w", err)}
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
	if err := results.Render(&buf, opts.format, r, results.RenderOptions{Metrics: opts.metrics}); err != nil {
		return err
	}
	_, err = a.gs.Stdout.Write(buf.Bytes())
	return err
}

// attachRooflines gives the GPU cells of results read from dir the
// roofline that files written before xrun computed one lack, from the
// cells' records (the runner attaches them to new results itself). A cell
// that cannot have one (its records are gone, its GPU has no known
// ceilings) goes without; why is logged at debug level.
func attachRooflines(a *app, dir string, r *results.Results) {
	for _, err := range profile.AttachRooflines(r, func(id string) string { return layout.CellDir(dir, id) }) {
		a.log.Debug().Err(err).Msg("no roofline")
	}
}
