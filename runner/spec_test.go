package runner

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/results/golden"
)

// badDirs hold malformed specs, each NN-name.yaml with NN-name.err, the
// exact message. In testdata/bad every file is bad on its own; in
// testdata/bad-flags each is valid and made bad by its NN-name.args
// (--set and --max-cells; see readArgs), so the message names the flag.
var badDirs = []struct {
	dir      string
	min      int
	withArgs bool
}{
	{"testdata/bad", 30, false},
	{"testdata/bad-flags", 1, true},
}

// badCases lists dir/*.yaml and checks each has (or, in testdata/bad, has
// not) an .args file.
func badCases(t *testing.T, dir string, min int, withArgs bool) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < min {
		t.Fatalf("%d malformed specs in %s, want at least %d", len(names), dir, min)
	}
	for _, n := range names {
		if _, err := os.Stat(strings.TrimSuffix(n, ".yaml") + ".args"); (err == nil) != withArgs {
			t.Errorf("%s: an .args file belongs in testdata/bad-flags, and there only", n)
		}
	}
	for i, n := range names {
		names[i] = strings.TrimSuffix(filepath.Base(n), ".yaml")
	}
	return names
}

// TestBadSpecs loads every malformed spec from inside testdata/bad, so
// that messages name the file as a user in that directory would see it.
func TestBadSpecs(t *testing.T) {
	for _, bd := range badDirs {
		t.Run(filepath.Base(bd.dir), func(t *testing.T) { testBadSpecs(t, bd.dir, bd.min, bd.withArgs) })
	}
}

func testBadSpecs(t *testing.T, dir string, min int, withArgs bool) {
	names := badCases(t, dir, min, withArgs)
	t.Chdir(dir)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			opts := readArgs(t, name+".args")
			_, err := LoadSpec(name+".yaml", opts)
			if err == nil {
				t.Fatal("loaded without error")
			}
			var se *SpecError
			if !errors.As(err, &se) || !se.BadInput() {
				t.Fatalf("error %T is not a *SpecError: %v", err, err)
			}
			if se.Set == "" && (se.Line < 1 || se.Column < 1) {
				t.Errorf("no line:column in %q", err)
			}
			if se.Set == "" && !strings.HasPrefix(err.Error(), name+".yaml:") {
				t.Errorf("message does not start with the file name: %q", err)
			}
			// The message is NN-name.err beside the spec, under testdata/.
			golden.Check(t, filepath.Join(strings.TrimPrefix(dir, "testdata/"), name+".err"), err.Error()+"\n")
		})
	}
}

func mustParse(t *testing.T, spec string, sets ...string) *Spec {
	t.Helper()
	s, err := ParseSpec("t.yaml", []byte(spec), LoadOptions{Sets: sets})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Every parameter has its documented default.
func TestDefaults(t *testing.T) {
	s := mustParse(t, "params: {model: tinyllama-1.1b}\n")
	if s.Name != "t" || s.Out != "results/t" || s.Repeats != 3 || s.SchemaVersion != 1 {
		t.Errorf("name %q out %q repeats %d version %d", s.Name, s.Out, s.Repeats, s.SchemaVersion)
	}
	if len(s.Plan.Cells) != 1 {
		t.Fatalf("%d cells, want 1", len(s.Plan.Cells))
	}
	c := s.Plan.Cells[0]
	want := Params{
		Engine: "auto", Model: "tinyllama-1.1b", Dtype: "float16", KVCacheDtype: "auto", MoEWeights: "auto", FP8Activations: "auto", BatchSize: 2048, MaxNumTokens: 8192,
		GemmPlugin: "auto", RoutingMode: "learned", ProfileWindow: "none", Seed: 0, Warmup: 2,
		GPUsPerCell: 1, KVCacheFreeGPUMemFraction: 0.9, TrtllmBackend: "pytorch", TP: 1, PP: 1, EP: 1, ExtraLLMAPIOptions: "none", Timeout: 0, Burstiness: 1,
		Dataset: DatasetParams{
			Generator: GenNorm, NumRequests: 1000, InputMean: 128, InputStdev: 0, OutputMean: 128, OutputStdev: 0,
			InputMin: 128, InputMax: 128, OutputMin: 128, OutputMax: 128, Seed: 420,
			VocabSize: 32000, EOSID: 2, // TinyLlama's tokenizer
		},
	}
	if c.Params != want {
		t.Errorf("params\n got %+v\nwant %+v", c.Params, want)
	}
	if c.Model == nil || c.Model.Name != "tinyllama-1.1b" || c.ModelRef != "tinyllama-1.1b" {
		t.Errorf("model config %+v, ref %q", c.Model, c.ModelRef)
	}
	if !strings.HasPrefix(c.ID, "cell-") || c.ID != "cell-"+c.Hash[:8] {
		t.Errorf("id %q for a one-cell study", c.ID)
	}
}

// Flat holds exactly the parameters that identify a cell, as JSON scalars.
func TestFlat(t *testing.T) {
	s := mustParse(t, "params: {model: tiny-llama, engine: cpu, timeout: 1h, dataset: {rand_task_id: [2, 5]}}\n")
	c := s.Plan.Cells[0]
	flat := c.Flat()
	for _, absent := range []string{"routing_mode", "dtype", "kv_cache_free_gpu_mem_fraction", "timeout", "dataset.input_min", "dataset.output_max"} {
		if _, ok := flat[absent]; ok {
			t.Errorf("Flat has %s, which does not apply", absent)
		}
	}
	for k, want := range map[string]any{
		"model": "tiny-llama", "batch_size": 2048, "dataset.input_mean": 128, "dataset.vocab_size": 512,
		"dataset.rand_task_id": "2-5", "profile_window": "none", "engine": "cpu",
	} {
		if flat[k] != want {
			t.Errorf("Flat[%s] = %#v, want %#v", k, flat[k], want)
		}
	}
	for k, v := range flat {
		switch v.(type) {
		case int, float64, string:
		default:
			t.Errorf("Flat[%s] is %T, not a JSON scalar", k, v)
		}
	}
	na := c.NotApplicable()
	if !slices.Contains(na, "routing_mode") || !slices.Contains(na, "dtype") || slices.Contains(na, "model") {
		t.Errorf("NotApplicable() = %v", na)
	}
	if c.Params.Timeout.String() != "1h0m0s" {
		t.Errorf("timeout %v", c.Params.Timeout)
	}
}

// A cell's hash depends on its parameters only: the same cell in two
// different studies has the same hash, and the ids of a study are fixed.
func TestCellHashStable(t *testing.T) {
	a := mustParse(t, "name: a\nparams: {model: tiny-llama}\nmatrix: {batch_size: [1, 8]}\n")
	b := mustParse(t, "name: b\nrepeats: 7\nmatrix:\n  gemm_plugin: [auto]\n  model: [tiny-llama, tiny-moe]\n  include: [{batch_size: 8}]\n")
	if got, want := a.Plan.Cells[1].Hash, b.Plan.Cells[0].Hash; got != want {
		t.Errorf("the same cell hashes differently in two studies: %s vs %s", got, want)
	}
	// Pinned: a change to the canonical encoding must be deliberate (it
	// changes every id; bump the version line in appendCanonical).
	var ids []string
	for _, c := range a.Plan.Cells {
		ids = append(ids, c.ID)
	}
	if want := []string{"bs1-4d469dcc", "bs8-7158127f"}; !slices.Equal(ids, want) {
		t.Errorf("ids %q, want %q", ids, want)
	}
}

func TestCanonicalValues(t *testing.T) {
	for _, tt := range []struct {
		spec, err string
	}{
		{"matrix: {routing_mode: [\"zipf:1\", \"zipf:1.0\"]}", `matrix.routing_mode[1]: duplicate value zipf:1 (also at [0])`},
		{"matrix: {profile_window: [5, \"5\"]}", `matrix.profile_window[1]: duplicate value 5 (also at [0])`},
		{"matrix: {profile_window: [\"1-2, 4\", \"1-2,4\"]}", `matrix.profile_window[1]: duplicate value 1-2,4 (also at [0])`},
		{"matrix: {kv_cache_free_gpu_mem_fraction: [1, 1.0]}", `matrix.kv_cache_free_gpu_mem_fraction[1]: duplicate value 1 (also at [0])`},
		{"matrix: {model: [tiny-llama, ./tiny-llama]}", `matrix.model[1]: "./tiny-llama": no such model directory`},
		{"matrix: {model: [tiny-llama, tiny-llama/]}", `matrix.model[1]: "./tiny-llama": no such model directory`},
	} {
		_, err := ParseSpec("t.yaml", []byte("params: {model: tiny-moe}\n"+tt.spec+"\n"), LoadOptions{})
		if err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%s: error %v, want it to contain %q", tt.spec, err, tt.err)
		}
	}
	s := mustParse(t, "params: {model: tiny-moe, routing_mode: \"zipf: 2.50\", profile_window: \" 3 , 7-9\"}\n")
	p := s.Plan.Cells[0].Params
	if p.RoutingMode != "zipf:2.5" || p.ProfileWindow != "3,7-9" {
		t.Errorf("canonical routing %q profile %q", p.RoutingMode, p.ProfileWindow)
	}
	if mode, skew := p.Routing(); mode != "zipf" || skew != 2.5 {
		t.Errorf("Routing() = %q, %v", mode, skew)
	}
	if spans := p.ProfileSpans(); !slices.Equal(spans, []Span{{First: 3, Last: 3}, {First: 7, Last: 9}}) {
		t.Errorf("ProfileSpans() = %v", spans)
	}
}

// --set reaches every part of a spec, with the file's validation.
func TestSets(t *testing.T) {
	base := "name: s\nparams:\n  model: tiny-llama\n  dataset: {num_requests: 10}\nmatrix:\n  batch_size: [1, 2]\n"
	for _, tt := range []struct {
		sets  []string
		check func(s *Spec) string
	}{
		{[]string{"matrix.batch_size=[8,16,32]"}, func(s *Spec) string { return fmt.Sprint(len(s.Plan.Cells)) }},
		{[]string{"params.dataset.num_requests=100"}, func(s *Spec) string { return fmt.Sprint(s.Plan.Cells[0].Params.Dataset.NumRequests) }},
		{[]string{"params.dataset.input_stdev=3", "params.dataset.input_stdev=4"}, func(s *Spec) string { return fmt.Sprint(s.Plan.Cells[0].Params.Dataset.InputStdev) }},
		{[]string{"params.batch_size=64"}, func(s *Spec) string { return fmt.Sprint(len(s.Plan.Cells), s.Plan.Cells[0].Params.BatchSize) }},
		{[]string{"matrix.dataset.num_requests=[5, 6]"}, func(s *Spec) string { return fmt.Sprint(len(s.Plan.Cells), s.Plan.Varying) }},
		{[]string{"matrix.zips.len=[{dataset.input_mean: 8, dataset.output_mean: 9}]"}, func(s *Spec) string { return fmt.Sprint(s.Plan.Cells[0].Params.Dataset.OutputMean) }},
		{[]string{"matrix={model: [tiny-moe], routing_mode: [learned, perfect]}"}, func(s *Spec) string { return strings.Join(s.Plan.Varying, ",") }},
		{[]string{"compare=[{axis: batch_size, baseline: 2}]"}, func(s *Spec) string { return fmt.Sprint(s.Compare) }},
		{[]string{"name=other", "out=elsewhere", "repeats=9", "description=hi there"}, func(s *Spec) string { return fmt.Sprint(s.Name, s.Out, s.Repeats, s.Description) }},
		{[]string{"matrix.include=[{batch_size: 3}]"}, func(s *Spec) string { return fmt.Sprint(len(s.Plan.Cells)) }},
	} {
		got := tt.check(mustParse(t, base, tt.sets...))
		want := map[string]string{
			"[matrix.batch_size=[8,16,32]]":                                       "3",
			"[params.dataset.num_requests=100]":                                   "100",
			"[params.dataset.input_stdev=3 params.dataset.input_stdev=4]":         "4",
			"[params.batch_size=64]":                                              "1 64",
			"[matrix.dataset.num_requests=[5, 6]]":                                "4 [batch_size dataset.num_requests]",
			"[matrix.zips.len=[{dataset.input_mean: 8, dataset.output_mean: 9}]]": "9",
			"[matrix={model: [tiny-moe], routing_mode: [learned, perfect]}]":      "routing_mode",
			"[compare=[{axis: batch_size, baseline: 2}]]":                         "[{batch_size 2}]",
			"[name=other out=elsewhere repeats=9 description=hi there]":           "otherelsewhere9hi there",
			"[matrix.include=[{batch_size: 3}]]":                                  "3",
		}[fmt.Sprint(tt.sets)]
		if got != want {
			t.Errorf("--set %v: got %q, want %q", tt.sets, got, want)
		}
	}
}

// --set params.X pins X where the file pairs it with other axes in a zip:
// every row loses it, rows left alike merge, a zip left empty goes.
func TestSetPinsZipMember(t *testing.T) {
	base := `name: z
params: {model: tiny-llama, dataset: {input_mean: 8}}
matrix:
  batch_size: [1, 2]
  zips:
    row:
      - {dataset.output_mean: 4, dataset.num_requests: 30}
      - {dataset.output_mean: 8, dataset.num_requests: 20}
      - {dataset.output_mean: 8, dataset.num_requests: 10}
    only:
      - {max_num_tokens: 64}
      - {max_num_tokens: 128}
`
	s := mustParse(t, base, "params.dataset.num_requests=7", "params.max_num_tokens=256")
	var got []string
	for _, c := range s.Plan.Cells {
		p := c.Params
		got = append(got, fmt.Sprintf("bs%d/out%d/n%d/mnt%d", p.BatchSize, p.Dataset.OutputMean, p.Dataset.NumRequests, p.MaxNumTokens))
	}
	want := []string{"bs1/out4/n7/mnt256", "bs1/out8/n7/mnt256", "bs2/out4/n7/mnt256", "bs2/out8/n7/mnt256"}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("cells %v, want %v", got, want)
	}
}

func TestAnchorsAndAliases(t *testing.T) {
	s := mustParse(t, `
name: anchors
params:
  model: tiny-llama
  dataset: &short {num_requests: 10, input_mean: 16}
matrix:
  batch_size: &sizes [1, 4]
  max_num_tokens: *sizes
`)
	if len(s.Plan.Cells) != 4 || s.Plan.Cells[0].Params.Dataset.InputMean != 16 {
		t.Errorf("%d cells, input_mean %d", len(s.Plan.Cells), s.Plan.Cells[0].Params.Dataset.InputMean)
	}
}

func TestZipExcludeOnZipKey(t *testing.T) {
	s := mustParse(t, `
params: {model: tiny-llama}
matrix:
  batch_size: [1, 8]
  zips:
    len:
      - {dataset.input_mean: 10, dataset.output_mean: 20}
      - {dataset.input_mean: 30, dataset.output_mean: 40}
  exclude:
    - {batch_size: 8, dataset.output_mean: 40}
`)
	var got []string
	for _, c := range s.Plan.Cells {
		got = append(got, fmt.Sprint(c.Params.BatchSize, "/", c.Params.Dataset.InputMean, "/", c.Params.Dataset.OutputMean))
	}
	if want := []string{"1/10/20", "1/30/40", "8/10/20"}; !slices.Equal(got, want) {
		t.Errorf("cells %v, want %v", got, want)
	}
	if len(s.Axes) != 2 || s.Axes[1].Zip != "len" || len(s.Axes[1].Keys) != 2 {
		t.Errorf("axes %+v", s.Axes)
	}
}

func TestErrorFormat(t *testing.T) {
	for _, tt := range []struct {
		e    SpecError
		want string
	}{
		{SpecError{File: "a.yaml", Line: 3, Column: 7, Field: "params.x", Msg: "bad"}, "a.yaml:3:7: params.x: bad"},
		{SpecError{File: "a.yaml", Line: 1, Column: 1, Msg: "invalid YAML: oops"}, "a.yaml:1:1: invalid YAML: oops"},
		{SpecError{File: "a.yaml", Set: "repeats=0", Line: 1, Column: 9, Field: "repeats", Msg: "bad"}, "--set repeats=0: repeats: bad"},
		{SpecError{File: "a.yaml", Msg: "cannot read the spec: no such file or directory"}, "a.yaml: cannot read the spec: no such file or directory"},
	} {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("got %q, want %q", got, tt.want)
		}
	}
}

func TestSuggest(t *testing.T) {
	cands := []string{"batch_size", "max_num_tokens", "gemm_plugin", "dataset"}
	for word, want := range map[string]string{
		"batchsize": "batch_size", "Batch_Size": "batch_size", "bathc_size": "batch_size",
		"gemm": "gemm_plugin", "max_tokens": "", "zzz": "", "datset": "dataset",
	} {
		if got := closest(word, cands, nil); got != want {
			t.Errorf("closest(%q) = %q, want %q", word, got, want)
		}
	}
}

func TestModelDirectory(t *testing.T) {
	s, err := LoadSpec("testdata/plan/files.yaml", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := s.Plan.Cells[0]
	if c.Params.Model != "../models/tiny-llama-hf" || c.ModelRef != filepath.Join("testdata", "models", "tiny-llama-hf") {
		t.Errorf("model %q, ref %q", c.Params.Model, c.ModelRef)
	}
	if c.Model.Vocab != 512 || c.Params.Dataset.VocabSize != 512 {
		t.Errorf("vocab %d / %d from config.json", c.Model.Vocab, c.Params.Dataset.VocabSize)
	}
	file := s.Plan.Cells[2]
	if file.DatasetFile != filepath.Join("testdata", "plan", "data", "two.jsonl") || file.Dataset.Known {
		t.Errorf("dataset file %q known %v", file.DatasetFile, file.Dataset.Known)
	}
}
