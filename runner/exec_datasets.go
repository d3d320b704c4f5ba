package runner

import (
	"context"
	"fmt"
	"time"

	dsets "github.com/xrun-dev/xrun/datasets"
)

// prepareDatasets generates (or verifies) every dataset the cells to run
// need, and checks dataset files, before any cell starts: a bad dataset is
// reported once, as bad input, not once per cell. Files are checked first,
// so that a bad one costs no generation and leaves nothing in the cache; a
// generation stops at an interrupt, leaving no part of its file behind.
func (s *study) prepareDatasets(ctx context.Context) error {
	done := map[string]bool{}
	for _, rc := range s.cells {
		d := rc.wc.Dataset
		if !rc.todo() || d.Generate != nil {
			continue
		}
		if ctx.Err() != nil {
			return fmt.Errorf("preparing datasets: %w", ErrInterrupted)
		}
		key := fmt.Sprintf("%s\x00%d", d.File, d.Vocab)
		if done[key] {
			continue
		}
		done[key] = true
		st, err := dsets.CheckFile(d.File, d.Vocab)
		if err != nil {
			return fmt.Errorf("dataset %s: %w", d.ID, err)
		}
		if err := s.checkLongest(d.ID, d.File, st.Longest); err != nil {
			return err
		}
		s.log.Info().Str("dataset", d.ID).Str("path", d.File).Int("requests", st.Requests).Msg("dataset file checked")
	}
	for _, rc := range s.cells {
		d := rc.wc.Dataset
		if !rc.todo() || d.Generate == nil {
			continue
		}
		if ctx.Err() != nil {
			return fmt.Errorf("preparing datasets: %w", ErrInterrupted)
		}
		key := d.Generate.Key()
		if done[key] {
			continue
		}
		done[key] = true
		// The lengths are drawn before the costly token ids, so a request
		// longer than a model's positions stops the study before anything
		// is generated or run.
		longest, err := dsets.LongestRequest(*d.Generate)
		if err != nil {
			return fmt.Errorf("dataset %s: %w", d.ID, err)
		}
		if err := s.checkLongest(d.ID, dsets.Cache{Dir: s.plan.CacheDir}.FilePath(*d.Generate), longest); err != nil {
			return err
		}
		t0 := time.Now()
		e, err := dsets.Cache{Dir: s.plan.CacheDir}.EnsureContext(ctx, *d.Generate)
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("dataset %s: generation stopped, nothing kept: %w", d.ID, ErrInterrupted)
			}
			return fmt.Errorf("dataset %s: %w", d.ID, err)
		}
		ev := s.log.Debug()
		if e.Generated {
			ev = s.log.Info().Str("reason", e.Reason).Str("elapsed", fmtDur(time.Since(t0)))
		}
		ev.Str("dataset", d.ID).Str("path", e.Path).Int("requests", d.Generate.NumRequests).Msg("dataset ready")
	}
	return nil
}

// checkLongest refuses a dataset whose longest request does not fit the
// positions of a model that a cell to run serves it with (checkLengths:
// xrun's own engine; external engines size themselves to the dataset).
func (s *study) checkLongest(id, file string, l dsets.Longest) error {
	for _, rc := range s.cells {
		if rc.todo() && rc.wc.Dataset.ID == id {
			if err := checkLengths(rc.cell, file, l.Line, l.Input, l.Output); err != nil {
				return fmt.Errorf("dataset %s, cell %s: %w", id, rc.cell.ID, err)
			}
		}
	}
	return nil
}
