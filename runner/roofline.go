package runner

import "github.com/xrun-dev/xrun/engine/profile"

// attachRooflines gives the study's GPU cells their roofline before
// results.json is written: engine/profile computes it from each cell's
// records (iterations.csv, expert_load.csv), once per cell, here where
// results are assembled rather than in the worker, so that xrun report
// computes it the same way for results written before it existed. A cell
// that cannot have one goes without; why is logged at debug level.
func (s *study) attachRooflines() {
	for _, err := range profile.AttachRooflines(s.res, func(id string) string { return CellDir(s.dir, id) }) {
		s.log.Debug().Err(err).Msg("no roofline")
	}
}
