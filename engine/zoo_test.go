package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestZooShapesConsistent(t *testing.T) {
	for _, name := range ModelNames() {
		c, _ := ZooModel(name)
		if c.Name != name || c.Heads%c.KVHeads != 0 || c.HeadDim%2 != 0 || c.DatasetVocab > c.Vocab || c.EOS >= c.Vocab {
			t.Errorf("%s: inconsistent shape %+v", name, c)
		}
		if c.MoE() != (c.TopK > 0) || (c.MoE() && c.Routing == "") {
			t.Errorf("%s: MoE fields inconsistent", name)
		}
	}
}

func TestLoadHFConfigGolden(t *testing.T) {
	for _, dir := range []string{"tiny-llama", "tiny-mixtral"} {
		c, err := LoadHFConfig(filepath.Join("testdata", "hf", dir))
		if err != nil {
			t.Fatal(err)
		}
		if c.Hidden != 64 || c.Layers != 2 || c.Heads != 4 || c.KVHeads != 2 || c.HeadDim != 16 || c.Vocab != 512 {
			t.Errorf("%s: %+v", dir, c)
		}
		if (dir == "tiny-mixtral") != c.MoE() {
			t.Errorf("%s: MoE = %v", dir, c.MoE())
		}
	}
}

func TestLoadHFConfigV4Rope(t *testing.T) {
	dir := t.TempDir()
	cfg := `{"model_type":"llama","hidden_size":64,"num_hidden_layers":1,"num_attention_heads":4,
	"num_key_value_heads":2,"intermediate_size":128,"vocab_size":100,"rms_norm_eps":1e-5,
	"bos_token_id":1,"eos_token_id":[2,3],"rope_theta":500000.0,
	"rope_scaling":{"rope_type":"llama3","factor":8.0,"low_freq_factor":1.0,"high_freq_factor":4.0,"original_max_position_embeddings":8192}}`
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := LoadHFConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.RopeTheta != 500000 || c.RopeScaling == nil || c.RopeScaling.Factor != 8 || c.EOS != 2 || c.HeadDim != 16 {
		t.Errorf("got %+v scaling %+v", c, c.RopeScaling)
	}
}

func TestLoadHFConfigErrors(t *testing.T) {
	cases := map[string]string{
		`{"model_type":"llama",`:                     "invalid JSON",
		`{"model_type":"bert"}`:                      `"model_type"`,
		`{"model_type":"llama","hidden_size":"big"}`: `"hidden_size"`,
		`{"model_type":"llama","hidden_size":64,"num_hidden_layers":1,"num_attention_heads":4,"num_key_value_heads":3}`: `"num_key_value_heads"`,
	}
	for cfg, want := range cases {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o644)
		_, err := LoadHFConfig(dir)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "config.json") {
			t.Errorf("%s: error %v, want it to name config.json and %s", cfg, err, want)
		}
	}
	if _, err := LookupModel(filepath.Join(t.TempDir(), "missing")); err == nil || !strings.Contains(err.Error(), "tinyllama-1.1b") {
		t.Errorf("missing dir: %v", err)
	}
}
