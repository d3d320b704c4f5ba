package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/profile"
	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/htmlreport"
	"github.com/xrun-dev/xrun/results/layout"
)

// loadRecords finds the cells an earlier run completed with the same
// fingerprint: those are not run again.
func (s *study) loadRecords() {
	for _, rc := range s.cells {
		rec, err := readCellRecord(s.dir, rc.cell.ID)
		switch {
		case err != nil:
			s.log.Warn().Err(err).Str("cell", rc.cell.ID).Msg("ignoring an unreadable cell record; the cell runs again")
		case rec == nil:
		case rec.Fingerprint != rc.wc.Fingerprint:
			s.log.Debug().Str("cell", rc.cell.ID).Msg("earlier record has another fingerprint (parameters, build, backend or device changed)")
		case rec.Status == results.StatusOK || !rc.selected:
			rc.record = rec
		}
		if rc.todo() {
			kept, why := loadKeptRepeats(s.dir, rc.wc, s.plan.Repeats)
			rc.kept = kept
			if len(kept) > 0 {
				s.log.Info().Str("cell", rc.cell.ID).Int("repeats_kept", len(kept)).Int("repeats", s.plan.Repeats).Msg("repeats recorded by an earlier run are kept; the cell runs the rest")
			} else if why != "" {
				s.log.Debug().Str("cell", rc.cell.ID).Str("reason", why).Msg("repeats recorded by an earlier run are not kept")
			}
		}
	}
}

// initResults lays out results.json: every planned cell, with its record
// where there is one, else as skipped with the reason.
func (s *study) initResults(ctx context.Context) {
	s.res = &results.Results{
		Name:        s.spec.Name,
		Description: s.spec.Description,
		Spec:        specJSON(s.spec),
		SpecFile:    s.spec.File,
		SpecSets:    s.spec.Sets,
		Environment: Environment(ctx, s.spec.Dir, s.devs, s.gpus),
		Axes:        resultAxes(s.spec),
		Started:     time.Now(),
		OrderSeed:   s.seed,
		Cells:       make([]results.Cell, 0, len(s.cells)),
		Reference:   s.spec.Reference,
		SLO:         s.spec.SLO,
		Search:      s.spec.Search,
	}
	s.res.Environment.Engines = s.engineTools()
	s.res.Environment.Switches = s.switches()
	for _, c := range s.spec.Compare {
		s.res.Compare = append(s.res.Compare, results.CompareSpec{Axis: c.Axis, Baseline: c.Baseline})
	}
	var prior map[string]*results.Roofline
	if s.o.Resume {
		// The study began with the first run of it.
		if old, err := results.ReadFile(filepath.Join(s.dir, layout.JSONFile)); err == nil {
			if old.Started.Before(s.res.Started) && !old.Started.IsZero() {
				s.res.Started = old.Started
			}
			prior = keptRooflines(old, s.cells)
		}
	}
	s.byID = map[string]int{}
	for _, rc := range s.cells {
		var c results.Cell
		switch {
		case rc.todo():
			c = results.Cell{Status: results.StatusSkipped, Error: notRunYet}
			if s.o.Resume {
				if c.Repeats = keptMetrics(s.dir, rc.wc, s.plan.Repeats); len(c.Repeats) > 0 {
					c.Error += fmt.Sprintf(" (%d of %d repeats kept from an earlier run)", len(c.Repeats), s.plan.Repeats)
				}
			}
		case rc.record != nil:
			c = rc.record.Cell
			// The previous results.json's roofline (keptRooflines): a
			// record is kept only under the same build, so its records
			// would give the same one, and they may be gone. Without it,
			// attachRooflines computes one.
			c.Roofline = prior[rc.cell.ID]
		case rc.selected:
			c = results.Cell{Status: results.StatusSkipped, Error: "not run"}
		default:
			c = results.Cell{Status: results.StatusSkipped, Error: results.NotSelected}
		}
		c.ID, c.Params, c.Summary = rc.cell.ID, rc.wc.Params, nil
		s.byID[c.ID] = len(s.res.Cells)
		s.res.Cells = append(s.res.Cells, c)
	}
}

// specJSON is the spec the plan was built from, as a JSON object.
func specJSON(spec *Spec) json.RawMessage {
	var v any
	if err := yaml.Unmarshal(spec.Effective, &v); err == nil {
		if b, err := json.Marshal(v); err == nil {
			return b
		}
	}
	return json.RawMessage("{}")
}

// resultAxes lists the parameters that vary between cells with their
// values in the spec's order, as results.json's axes.
func resultAxes(spec *Spec) []results.Axis {
	var out []results.Axis
	for _, key := range spec.Plan.Varying {
		var order []any
		seen := map[string]bool{}
		add := func(v any) {
			if k := formatValue(v); !seen[k] {
				seen[k] = true
				order = append(order, v)
			}
		}
		for _, ax := range spec.Axes {
			if k := slices.Index(ax.Keys, key); k >= 0 {
				for _, row := range ax.Values {
					add(row[k])
				}
			}
		}
		// Keep the values cells have, in the spec's order, then those only
		// include entries brought.
		present := map[string]any{}
		var extra []any
		for i := range spec.Plan.Cells {
			if v, ok := spec.Plan.Cells[i].Flat()[key]; ok {
				k := formatValue(v)
				if _, dup := present[k]; !dup {
					present[k] = v
					if !seen[k] {
						extra = append(extra, v)
					}
				}
			}
		}
		var values []any
		for _, v := range order {
			if pv, ok := present[formatValue(v)]; ok {
				values = append(values, pv)
			}
		}
		values = append(values, extra...)
		if s := spec.Search; s != nil && s.Axis == key {
			// The search's points join the axis as it measures them:
			// in numeric order, the tables and curves read along it.
			slices.SortStableFunc(values, func(a, b any) int { return compareLoad(a, b) })
		}
		if len(values) > 1 {
			out = append(out, results.Axis{Name: key, Values: values})
		}
	}
	return out
}

// write rewrites results.json and results.md (atomically); a failure is
// logged and remembered. Once a write has failed no more cells start (see
// halted): what they measured could not be recorded.
func (s *study) write() {
	s.res.Finished = time.Now()
	s.attachRooflines()
	write := s.writeResults
	if write == nil {
		write = results.WriteDir
	}
	if err := write(s.dir, s.res); err != nil {
		s.lastErr = err
		s.log.Error().Err(err).Str("dir", s.dir).Msg("writing results")
		s.stop(writeFailure("writing results", err))
		return
	}
	s.lastErr = nil
	// report.html is drawn from what was just written; xrun report --format
	// html draws it again, so a failure is logged and stops nothing.
	if err := htmlreport.WriteDir(s.dir, s.res, htmlreport.Options{Stage: profile.MoEStage}); err != nil {
		s.log.Warn().Err(err).Str("dir", s.dir).Msg("writing " + layout.HTMLFile)
	}
}

// record merges one cell's outcome into the results and writes them.
func (s *study) record(rc *runCell, o outcome) {
	c := &s.res.Cells[s.byID[rc.cell.ID]]
	switch {
	case o.rec != nil:
		*c = o.rec.Cell
		if n := len(c.Repeats); c.Status == results.StatusFailed && n > 0 {
			c.Error += fmt.Sprintf("; %d of %d repeats kept (xrun run --resume runs the rest)", n, s.plan.Repeats)
		}
	case o.interrupted:
		// The repeats the worker recorded are kept, and shown.
		kept := keptMetrics(s.dir, rc.wc, s.plan.Repeats)
		note := interruptedNote(len(kept), s.plan.Repeats, rc.wc)
		if o.timeLimit != nil {
			note = stoppedNote(len(kept), s.plan.Repeats, rc.wc)
			s.limitStopped(o.timeLimit)
			s.log.Warn().Str("cell", rc.cell.ID).Fields(o.timeLimit.fields()).Int("repeats_kept", len(kept)).
				Msg("not started: it would not finish before the time limit (xrun run --resume runs it)")
		}
		*c = results.Cell{Status: results.StatusSkipped, Error: note,
			Repeats: kept, Artifacts: existingArtifacts(s.dir, rc.cell.ID)}
	default:
		kept := keptMetrics(s.dir, rc.wc, s.plan.Repeats)
		*c = results.Cell{Status: results.StatusFailed, Error: o.failure, Repeats: kept, Artifacts: existingArtifacts(s.dir, rc.cell.ID)}
		if len(kept) > 0 {
			c.Error += fmt.Sprintf("; %d of %d repeats kept (xrun run --resume runs the rest)", len(kept), s.plan.Repeats)
		}
	}
	// The plan's parameters are authoritative (JSON would turn the
	// record's integers into floats), and summaries are the writer's.
	c.ID, c.Params, c.Summary = rc.cell.ID, rc.wc.Params, nil
	switch {
	case o.writeErr != nil:
		s.stop(writeFailure("cell "+rc.cell.ID, o.writeErr))
	case c.Status == results.StatusFailed && strings.Contains(c.Error, syscall.ENOSPC.Error()):
		// The worker's own failure to write its records comes as text.
		s.stop(fmt.Errorf("the disk is full: cell %s could not record what it measured: %w", rc.cell.ID, syscall.ENOSPC))
	}
	s.progress.CellFinished(rc.cell.ID, c.Status, o.elapsed)
	switch c.Status {
	case results.StatusOK:
		ev := s.log.Info().Str("cell", c.ID).Str("elapsed", fmtDur(o.elapsed))
		if sum := results.Summarize(column(c.Repeats, "system_output_throughput_tok_s")); sum.N > 0 {
			ev = ev.Float64("output_tok_s", sum.Median)
		}
		ev.Msg("cell ok")
	case results.StatusFailed:
		s.log.Warn().Str("cell", c.ID).Str("elapsed", fmtDur(o.elapsed)).Str("error", c.Error).Msg("cell failed")
	case results.StatusSkipped:
		if o.timeLimit != nil {
			s.log.Info().Str("cell", c.ID).Msg("cell stopped at the time limit")
			break
		}
		fallthrough
	default:
		s.log.Info().Str("cell", c.ID).Msg("cell interrupted")
	}
	s.write()
}

// notRunYet is the error of a cell waiting for its turn, until it runs or
// the study stops (the SLO frontier reads it: such a search goes on).
const notRunYet = results.NotRunYet

// interruptedNote is the error of a cell whose worker was interrupted
// after recording kept of its repeats.
func interruptedNote(kept, repeats int, c *workerCell) string {
	spans, _ := engine.ParseProfileWindow(c.Engine.ProfileWindow)
	switch {
	case kept == 0:
		return "not run: interrupted while running (xrun run --resume runs it)"
	case kept == repeats && len(spans) > 0:
		return fmt.Sprintf("interrupted after %d of %d repeats, in the profiled pass; xrun run --resume runs the profiled pass", kept, repeats)
	}
	return fmt.Sprintf("interrupted after %d of %d repeats; xrun run --resume runs the rest", kept, repeats)
}

func column(reps []results.Metrics, key string) []float64 {
	var out []float64
	for _, m := range reps {
		if v, ok := m[key]; ok {
			out = append(out, v)
		}
	}
	return out
}
