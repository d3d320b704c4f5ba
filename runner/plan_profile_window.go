package runner

import (
	"fmt"
	"strings"
)

// windowCheck warns when a cell's profile window starts in its warm-up.
// Warm-up requests advance the iteration counter, as in TensorRT-LLM
// (trtllm-compat.md §3), so the window's iterations there profile the
// warm-up, a batch of warmup requests, not the timed run: a kernel table
// that looks like the cell's and is not. The warm-up's length is known
// here for generated datasets only, about: its requests run batch_size
// at a time, each round about one iteration per output token of the mean
// request.
func (d *decoder) windowCheck(p *Params, vals []int32, warn func(string)) {
	spans := p.ProfileSpans()
	if len(spans) == 0 || p.Warmup <= 0 || p.BatchSize <= 0 {
		return
	}
	ds := &p.Dataset
	var out int
	switch ds.Kind() {
	case GenNorm:
		out = ds.OutputMean
	case GenUnif:
		out = (ds.OutputMin + ds.OutputMax) / 2
	default:
		return
	}
	if out <= 0 {
		return
	}
	warmIters := (p.Warmup + p.BatchSize - 1) / p.BatchSize * out
	var early, shifted []string
	for _, s := range spans {
		if s.First < warmIters {
			early = append(early, spanString(s.First, s.Last))
		}
		shifted = append(shifted, spanString(s.First+warmIters, s.Last+warmIters))
	}
	if len(early) == 0 {
		return
	}
	what := "it starts"
	if len(early) < len(spans) {
		what = "its span " + strings.Join(early, ",") + " starts"
	}
	n, f := d.blame(vals, pProfileWindow, pWarmup)
	warn(fmt.Sprintf("profile_window %s (%s, %s): %s in the warm-up: the %d warm-up requests of about %d output tokens run iterations 0 to about %d (warm-up iterations count, as in TensorRT-LLM), so those profiled iterations are the warm-up's, not the timed requests'; %q profiles the same iterations of the timed run",
		p.ProfileWindow, f, d.where(n), what, p.Warmup, out, warmIters-1, strings.Join(shifted, ",")))
}

// spanString writes a span as profile_window does: "A-B", or "K".
func spanString(first, last int) string {
	if first == last {
		return fmt.Sprint(first)
	}
	return fmt.Sprintf("%d-%d", first, last)
}
