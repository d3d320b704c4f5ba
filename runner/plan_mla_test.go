package runner

import (
	"errors"
	"strings"
	"testing"
)

// The CUDA backend has no MLA kernels: the plan refuses the DeepSeek-V3
// architecture on engine cuda with the spec's line, warns on engine auto
// and keeps the refusal for when auto resolves to cuda; engine cpu runs it.
func TestPlanRefusesMLAOnCUDA(t *testing.T) {
	_, err := ParseSpec("t.yaml", []byte("params: {engine: cuda}\nmatrix:\n  model: [tiny-llama, tiny-deepseek]\n"), LoadOptions{})
	var se *SpecError
	if !errors.As(err, &se) || !se.BadInput() || se.Line != 3 || se.Field != "matrix.model[1]" ||
		!strings.Contains(se.Msg, "engine cuda: model tiny-deepseek has the DeepSeek-V3 architecture") ||
		!strings.Contains(se.Msg, "the CUDA backend has no MLA kernels yet; run it on engine cpu") {
		t.Errorf("engine cuda: %v, want a *SpecError at line 3, matrix.model[1]", err)
	}

	s := mustParse(t, "params: {model: tiny-deepseek}\nmatrix:\n  engine: [auto, cpu]\n")
	if len(s.Plan.Warnings) != 1 || !strings.Contains(s.Plan.Warnings[0], "model tiny-deepseek on engine auto (matrix.engine[0], line 3)") {
		t.Errorf("warnings %q", s.Plan.Warnings)
	}
	checked := 0
	for i := range s.Plan.Cells {
		c := &s.Plan.Cells[i]
		for _, backend := range []string{"cpu", "cuda"} {
			err := c.CheckBackend(backend)
			if c.Params.Engine != "auto" || backend != "cuda" {
				if err != nil {
					t.Errorf("%s on %s: %v", c.ID, backend, err)
				}
				continue
			}
			checked++
			var se *SpecError
			if !errors.As(err, &se) || !strings.Contains(se.Msg, "engine auto, which runs on the cuda backend here: model tiny-deepseek has the DeepSeek-V3 architecture") {
				t.Errorf("%s on cuda: %v", c.ID, err)
			}
		}
	}
	if checked != 1 {
		t.Errorf("%d cells of engine auto, want 1", checked)
	}
}
