package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/xrun-dev/xrun/engine/profile"
	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/layout"
)

type kernelsOptions struct {
	format string
}

func newKernelsCommand(a *app) *cobra.Command {
	opts := &kernelsOptions{}
	c := &cobra.Command{
		Use:   "kernels DIR CELL_A CELL_B",
		Short: "What changed in the kernels between two profiled cells",
		Long: `Compare the kernel summaries (cells/<id>/kernels.csv, or where that file is
gone the kernels results.json keeps per profiled cell) of two profiled cells of
a results directory: every kernel with its time per profiled iteration in A
and in B side by side, their ratio and launches per iteration, and the
kernels that ran in only one of them. Kernels of one kind (GEMM, attention,
norm, ...) found only in A and only in B are paired: for gemm_plugin auto vs
disable, the note says which GEMM kernels replaced which.

A cell is named by its id or by any prefix that names exactly one cell.
Times are per iteration when both cells record how many iterations their
window covered (results.json or cells/<id>/cell.json), window totals
otherwise. results.md sums the same diff up in a few lines under each
comparison of profiled cells, and xrun diff between two runs per cell.`,
		Example: `  xrun kernels results/gemm-plugin bs64-disable bs64-auto
  xrun kernels results/gemm-plugin bs64-disable bs64-auto --format markdown >> comment.md`,
		Args: cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error { return runKernels(cmd.Context(), a, opts, args) },
	}
	c.Flags().StringVar(&opts.format, "format", "text", "output format: text or markdown")
	return c
}

func runKernels(_ context.Context, a *app, opts *kernelsOptions, args []string) error {
	if opts.format != "text" && opts.format != "markdown" {
		return usageError{fmt.Errorf("--format: %q; expected text or markdown", opts.format)}
	}
	dir := args[0]
	ids, err := cellIDs(dir)
	if err != nil {
		return err
	}
	profiles := recordedProfiles(dir)
	var cells [2]results.KernelCell
	for i, arg := range args[1:] {
		id, err := resolveCell(dir, ids, arg)
		if err != nil {
			return err
		}
		var source string
		if cells[i], source, err = cellKernels(dir, id, profiles(id)); err != nil {
			return err
		}
		a.log.Debug().Str("cell", id).Str("source", source).Msg("kernel summary")
	}
	var buf bytes.Buffer
	if err := results.DiffKernels(cells[0], cells[1]).Render(&buf, opts.format); err != nil {
		return err
	}
	_, err = a.gs.Stdout.Write(buf.Bytes())
	return err
}

// cellIDs lists the cells of a results directory.
func cellIDs(dir string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(dir, layout.CellsDir))
	if err != nil {
		return nil, usageError{fmt.Errorf("%s: not a results directory with a %s/ folder: %w", dir, layout.CellsDir, err)}
	}
	var ids []string
	for _, e := range entries {
		if e.IsDir() {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}

// resolveCell finds a cell by its id or a prefix naming only it.
func resolveCell(dir string, ids []string, arg string) (string, error) {
	if slices.Contains(ids, arg) {
		return arg, nil
	}
	var match []string
	for _, id := range ids {
		if strings.HasPrefix(id, arg) {
			match = append(match, id)
		}
	}
	switch len(match) {
	case 1:
		return match[0], nil
	case 0:
		return "", usageError{fmt.Errorf("%s: no cell %q; cells: %s", dir, arg, listIDs(ids))}
	}
	return "", usageError{fmt.Errorf("%s: %q names %d cells (%s); give more of the id", dir, arg, len(match), listIDs(match))}
}

func listIDs(ids []string) string {
	if len(ids) > 8 {
		return strings.Join(ids[:8], ", ") + fmt.Sprintf(", ... (%d in all)", len(ids))
	}
	return strings.Join(ids, ", ")
}

// cellKernels reads a cell's kernel summary: its kernels.csv, which lists
// every kernel of the window, or, where that file is gone (results copied
// without their cells' artifacts), the kernels its recorded profile keeps
// (the top ones in full, since distinct_kernels the others by name, time
// and launches). source says which, for the debug log.
func cellKernels(dir, id string, p *results.Profile) (k results.KernelCell, source string, err error) {
	iters := 0
	if p != nil {
		iters = p.Iterations
	}
	path := filepath.Join(layout.CellDir(dir, id), layout.KernelsFile)
	f, err := os.Open(path)
	switch {
	case err == nil:
		defer f.Close()
		stats, err := profile.ReadKernelsCSV(f, path)
		if err != nil {
			return k, "", err
		}
		// A kernels.csv lists every kernel of the window: complete. Its rows
		// have results.json's kernel fields, so each converts as it is.
		all := make([]results.Kernel, len(stats))
		for i, s := range stats {
			all[i] = results.Kernel(s)
		}
		return results.KernelCell{ID: id, Iterations: iters, Kernels: all, Complete: true}, path, nil
	case !errors.Is(err, fs.ErrNotExist):
		return k, "", err
	}
	if p != nil {
		if k, ok := results.ProfileKernels(&results.Cell{ID: id, Profile: p}, ""); ok {
			return k, "recorded profile (" + layout.KernelsFile + " missing)", nil
		}
	}
	return k, "", usageError{fmt.Errorf("cell %s has no %s and no kernels recorded in %s: it was not profiled (set profile_window) or its profiled pass failed",
		id, layout.KernelsFile, layout.JSONFile)}
}

// recordedProfiles returns a cell's recorded profile summary: from
// results.json or, while a run is still going, from the cell's cell.json;
// nil when neither has one.
func recordedProfiles(dir string) func(id string) *results.Profile {
	fromResults := map[string]*results.Profile{}
	if r, _, err := results.Load(dir); err == nil {
		for _, c := range r.Cells {
			if c.Profile != nil {
				fromResults[c.ID] = c.Profile
			}
		}
	}
	return func(id string) *results.Profile {
		if p, ok := fromResults[id]; ok {
			return p
		}
		var rec struct {
			Profile *results.Profile `json:"profile"`
		}
		data, err := os.ReadFile(filepath.Join(layout.CellDir(dir, id), layout.CellFile))
		if err != nil || json.Unmarshal(data, &rec) != nil {
			return nil
		}
		return rec.Profile
	}
}
