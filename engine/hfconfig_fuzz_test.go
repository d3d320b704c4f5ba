package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func FuzzLoadHFConfig(f *testing.F) {
	for _, name := range []string{"tiny-llama", "tiny-mixtral", "tiny-deepseek-v3"} {
		b, err := os.ReadFile(filepath.Join("testdata", "hf", name, "config.json"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"model_type":"qwen3_moe","hidden_size":8,"num_hidden_layers":1,"num_attention_heads":2,"num_experts":4,"num_experts_per_tok":2,"intermediate_size":8,"vocab_size":10,"rms_norm_eps":1e-6,"rope_scaling":{"rope_type":"yarn","factor":4,"original_max_position_embeddings":64,"truncate":false}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := parseHFConfig("model", "model/config.json", data)
		if err != nil {
			if !strings.Contains(err.Error(), "config.json") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		// Whatever it accepts, the model must accept too.
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted a config the model rejects: %v", err)
		}
	})
}
