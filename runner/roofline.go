package runner

import (
	"github.com/xrun-dev/xrun/engine/profile"
	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/layout"
)

// attachRooflines gives the study's GPU cells their roofline before
// results.json is written: engine/profile computes it from each cell's
// records (iterations.csv, expert_load.csv), once per cell, here where
// results are assembled rather than in the worker, so that xrun report
// computes it the same way for results written before it existed. A cell
// that cannot have one goes without; why is logged at debug level.
func (s *study) attachRooflines() {
	for _, err := range profile.AttachRooflines(s.res, func(id string) string { return layout.CellDir(s.dir, id) }) {
		s.log.Debug().Err(err).Msg("no roofline")
	}
}

// keptRooflines are the rooflines old (the results.json a resumed run
// found) gave the cells whose records this run keeps: needed for a cell
// whose iterations.csv is gone, as when the finished cells' data
// files stayed behind on the machine that measured them (bench/gpu-multi.sh
// carries only what --resume needs) — without it the rewritten results
// would drop the roofline of every cell an earlier run finished. Only an
// entry with the record's very repeats counts: anything else describes
// another measurement.
func keptRooflines(old *results.Results, cells []*runCell) map[string]*results.Roofline {
	prior := map[string]*results.Roofline{}
	byID := map[string]*results.Cell{}
	for i := range old.Cells {
		byID[old.Cells[i].ID] = &old.Cells[i]
	}
	for _, rc := range cells {
		if rc.record == nil || rc.record.Status != results.StatusOK {
			continue
		}
		oc := byID[rc.cell.ID]
		if oc == nil || oc.Roofline == nil || oc.Status != results.StatusOK || !results.SameRepeats(oc.Repeats, rc.record.Repeats) {
			continue
		}
		prior[rc.cell.ID] = oc.Roofline
	}
	return prior
}
