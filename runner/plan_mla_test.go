package runner

import (
	"testing"
)

// The CUDA backend has MLA kernels: the DeepSeek-V3 architecture plans on
// engine cuda and auto like any model, with no warning, and a cell of
// engine auto may resolve to either backend.
func TestPlanRunsMLAOnCUDA(t *testing.T) {
	s := mustParse(t, "params: {model: tiny-deepseek}\nmatrix:\n  engine: [auto, cuda, cpu]\n")
	if len(s.Plan.Warnings) != 0 {
		t.Errorf("warnings %q", s.Plan.Warnings)
	}
	if len(s.Plan.Cells) != 3 {
		t.Fatalf("%d cells, want 3", len(s.Plan.Cells))
	}
	for i := range s.Plan.Cells {
		c := &s.Plan.Cells[i]
		for _, backend := range []string{"cpu", "cuda"} {
			if c.Params.Engine != "auto" && c.Params.Engine != backend {
				continue
			}
			if err := c.CheckBackend(backend); err != nil {
				t.Errorf("%s on %s: %v", c.ID, backend, err)
			}
		}
	}
}
