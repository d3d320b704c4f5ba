package runner

import (
	"errors"
	"strings"
	"testing"

	dsets "github.com/xrun-dev/xrun/datasets"
)

// The plan refuses what a cell's run would fail on, and only that: the
// boundaries pass, and what the run alone can know is a warning. (The
// messages of the refusals are in testdata/bad, 81 onwards.)
func TestPlanTimeChecks(t *testing.T) {
	cases := []struct {
		name, spec string
		err        string // a substring of the error; "" when the spec plans
		warning    string // a substring of the one warning; "" for none
	}{
		// tinyllama-1.1b has 2048 positions, tiny-llama 4096.
		{"norm fills the positions", "params: {model: tinyllama-1.1b, dataset: {input_mean: 2000, output_mean: 48}}", "", ""},
		{"norm one past", "params: {model: tinyllama-1.1b, dataset: {input_mean: 2000, output_mean: 49}}", "2049 tokens, more than model tinyllama-1.1b's 2048 positions", ""},
		{"unif fills the positions", "params: {model: tiny-llama, engine: cpu, dataset: {generator: token-unif-dist, input_min: 1, input_max: 4000, output_min: 1, output_max: 96}}", "", ""},
		{"unif one past", "params: {model: tiny-llama, engine: cpu, dataset: {generator: token-unif-dist, input_min: 1, input_max: 4000, output_min: 1, output_max: 97}}", "= 4097 tokens", ""},
		{"external engines keep their own limits", "params: {model: tinyllama-1.1b, engine: trtllm, dataset: {input_mean: 4000}}", "", ""},
		{"tail fits", "params: {model: tinyllama-1.1b, dataset: {input_mean: 1000, input_stdev: 100, output_mean: 400, output_stdev: 8}}", "", ""},
		{"tail passes", "params: {model: tinyllama-1.1b, dataset: {input_mean: 1000, input_stdev: 100, output_mean: 449, output_stdev: 0}}",
			"", "mean + 6 stdevs is 2049 tokens"},
		{"tail passes, by how much", "params: {model: tinyllama-1.1b, dataset: {num_requests: 3000, input_mean: 1000, input_stdev: 32, output_mean: 1000}}",
			"", "about 200 of its 3000 requests are expected to be longer"},
		{"far tail passes", "params: {model: tinyllama-1.1b, dataset: {num_requests: 10, input_mean: 1000, input_stdev: 100, output_mean: 549}}",
			"", "the chance that one of its 10 requests is longer is about 3e-06"},
		{"vocabulary filled", "params: {model: tiny-llama, dataset: {vocab_size: 512, eos_id: 511}}", "", ""},
		{"vocabulary passed", "params: {model: tiny-llama, dataset: {vocab_size: 513}}", "beyond model tiny-llama's vocabulary of 512", ""},
		{"eos beyond the base ids (Llama 3)", "params: {model: llama-3.2-1b, dataset: {eos_id: 128255}}", "", ""},
		{"eos beyond the tokenizer", "params: {model: llama-3.2-1b, dataset: {eos_id: 128256}}", "dataset.eos_id 128256 is not a token of model llama-3.2-1b", ""},
		{"dataset files are read at run time", "params: {model: tiny-llama, dataset: {generator: testdata/plan/data/two.jsonl, vocab_size: 9999, input_mean: 9999}}", "", ""},
		{"float32 on cpu", "params: {model: tiny-llama, engine: cpu, dtype: float32}", "", ""},
		{"float32 on cuda", "params: {model: tiny-llama, engine: cuda, dtype: float32}", "dtype float32 on engine cuda", ""},
		{"float32 on auto", "params: {model: tiny-llama, dtype: float32}", "", "dtype float32 on engine auto (params.dtype, line 1): the CUDA backend"},
		// Warm-up requests advance the iteration counter: 2 of 128 output
		// tokens run iterations 0-127.
		{"window in the warm-up", `params: {model: tiny-llama, engine: cpu, warmup: 2, profile_window: "100-104", dataset: {output_mean: 128}}`,
			"", `profile_window 100-104 (params.profile_window, line 1): it starts in the warm-up: the 2 warm-up requests of about 128 output tokens run iterations 0 to about 127`},
		{"window across its end", `params: {model: tiny-llama, engine: cpu, warmup: 2, profile_window: "120-150", dataset: {output_mean: 128}}`,
			"", `"248-278" profiles the same iterations of the timed run`},
		{"one span in the warm-up", `params: {model: tiny-llama, engine: cpu, warmup: 2, profile_window: "20-30,200", dataset: {output_mean: 128, output_stdev: 16}}`,
			"", `its span 20-30 starts in the warm-up`},
		{"window after the warm-up", `params: {model: tiny-llama, engine: cpu, warmup: 2, profile_window: "128-130", dataset: {output_mean: 128}}`, "", ""},
		{"warm-up in rounds of batch_size", `params: {model: tiny-llama, engine: cpu, warmup: 3, batch_size: 2, profile_window: "10-12", dataset: {output_mean: 8}}`,
			"", "run iterations 0 to about 15"},
		{"no warm-up", `params: {model: tiny-llama, engine: cpu, warmup: 0, profile_window: "0-4"}`, "", ""},
		{"a dataset file: its lengths are unknown", `params: {model: tiny-llama, engine: cpu, profile_window: "0-4", dataset: {generator: testdata/plan/data/two.jsonl}}`, "", ""},
		{"float32 on trtllm", "params: {model: tinyllama-1.1b, engine: trtllm, dtype: float32}", "", ""},
		{"a checkpoint", "params: {model: ../engine/testdata/hf/tiny-llama, engine: cpu}", "", ""},
		{"no checkpoint (trtllm may take pytorch_model.bin)", "params: {model: testdata/models/tiny-llama-hf, engine: trtllm}", "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := parseCase(t, c.spec, c.err)
			if s == nil {
				return
			}
			checkWarning(t, s.Plan.Warnings, c.warning)
		})
	}
}

// A warning is given once however many cells it concerns.
func TestPlanTimeWarningsOnce(t *testing.T) {
	s := mustParse(t, "params: {model: tiny-llama, dtype: float32, dataset: {input_mean: 4000, input_stdev: 10}}\nmatrix: {batch_size: [1, 2, 4]}\n")
	if len(s.Plan.Cells) != 3 || len(s.Plan.Warnings) != 2 {
		t.Errorf("%d cells, warnings %q; want 3 cells and 2 warnings", len(s.Plan.Cells), s.Plan.Warnings)
	}
}

// Engine auto's backend is known only when the study runs; CheckBackend
// then refuses float32 on cuda with the spec's line, as the plan does for
// engine cuda.
func TestCheckBackend(t *testing.T) {
	s := mustParse(t, "params: {model: tiny-llama}\nmatrix:\n  dtype: [float16, float32]\n  engine: [auto, cpu]\n")
	var checked int
	for i := range s.Plan.Cells {
		c := &s.Plan.Cells[i]
		for _, backend := range []string{"cpu", "cuda"} {
			err := c.CheckBackend(backend)
			bad := c.Params.Engine == "auto" && c.Params.Dtype == "float32" && backend == "cuda"
			if !bad {
				if err != nil {
					t.Errorf("%s on %s: %v", c.ID, backend, err)
				}
				continue
			}
			checked++
			var se *SpecError
			if !errors.As(err, &se) || !se.BadInput() || se.Line != 3 || se.Field != "matrix.dtype[1]" ||
				!strings.Contains(se.Msg, "computes in float16 or bfloat16 only") {
				t.Errorf("%s on %s: %v, want a *SpecError at line 3, matrix.dtype[1]", c.ID, backend, err)
			}
		}
	}
	if checked != 1 {
		t.Errorf("%d cells of engine auto and dtype float32, want 1", checked)
	}
}

// checkLengths is the run-time form of the position check, for lengths
// the plan cannot know: a dataset error naming the file and line.
func TestCheckLengths(t *testing.T) {
	s := mustParse(t, "params: {model: tinyllama-1.1b}\nmatrix: {engine: [cpu, trtllm]}\n")
	var cpu, ext *Cell
	for i := range s.Plan.Cells {
		if c := &s.Plan.Cells[i]; c.Params.Engine == "cpu" {
			cpu = c
		} else {
			ext = c
		}
	}
	if err := checkLengths(cpu, "d.jsonl", 3, 2000, 48); err != nil {
		t.Errorf("2048 tokens on 2048 positions: %v", err)
	}
	err := checkLengths(cpu, "d.jsonl", 3, 2000, 49)
	var de *dsets.Error
	if !errors.As(err, &de) || !de.BadInput() || err.Error() != "d.jsonl:3: a request of 2000 input + 49 output tokens, more than model tinyllama-1.1b's 2048 positions (max_position_embeddings)" {
		t.Errorf("2049 tokens: %v", err)
	}
	if err := checkLengths(ext, "d.jsonl", 3, 4000, 49); err != nil {
		t.Errorf("engine trtllm: %v", err)
	}
}
