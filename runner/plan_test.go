package runner

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/results/golden"
)

// readArgs reads NAME.args: one --set PATH=VALUE per line (without the
// --set), or "max-cells N".
func readArgs(t *testing.T, path string) LoadOptions {
	t.Helper()
	var opts LoadOptions
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return opts
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		if n, ok := strings.CutPrefix(line, "max-cells "); ok {
			if err := json.Unmarshal([]byte(n), &opts.MaxCells); err != nil {
				t.Fatal(err)
			}
			continue
		}
		opts.Sets = append(opts.Sets, line)
	}
	return opts
}

func TestPlanGolden(t *testing.T) {
	specs, _ := filepath.Glob("testdata/plan/*.yaml")
	exps, _ := filepath.Glob("../experiments/*.yaml")
	if len(exps) < 5 {
		t.Fatalf("found %d experiments, want at least 5", len(exps))
	}
	for _, path := range append(specs, exps...) {
		name := strings.TrimSuffix(filepath.Base(path), ".yaml")
		if strings.HasPrefix(path, "..") {
			name = "experiments-" + name
		}
		t.Run(name, func(t *testing.T) {
			opts := readArgs(t, strings.TrimSuffix(path, ".yaml")+".args")
			spec, err := LoadSpec(path, opts)
			if err != nil {
				t.Fatal(err)
			}
			// The cached encoding in expand must equal the plain one.
			for _, c := range spec.Plan.Cells {
				sum := sha256.Sum256(appendCanonical(nil, &c.Params, c.na, ""))
				if hex.EncodeToString(sum[:]) != c.Hash {
					t.Fatalf("cell %s: hash differs from the canonical encoding's", c.ID)
				}
			}
			if err := spec.Plan.EstimateTime(EstimateOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := spec.Plan.CheckMemory(MemoryOptions{}); err != nil {
				t.Fatal(err)
			}
			var text, js bytes.Buffer
			if err := spec.Plan.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			if err := spec.Plan.WriteJSON(&js); err != nil {
				t.Fatal(err)
			}
			if !json.Valid(js.Bytes()) {
				t.Fatal("WriteJSON wrote invalid JSON")
			}
			golden.Check(t, "plan/"+name+".txt.golden", text.Bytes())
			golden.Check(t, "plan/"+name+".json.golden", js.Bytes())
		})
	}
}

// The README's example spec is testdata/plan/readme.yaml (planned by
// TestPlanGolden); this keeps the two from drifting apart.
func TestReadmeExample(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := os.ReadFile("testdata/plan/readme.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := strings.Cut(string(spec), "\n") // the comment line
	if !strings.Contains(string(readme), "```yaml\n"+body+"```") {
		t.Error("README.md's example spec differs from testdata/plan/readme.yaml")
	}
}
