package runner

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/results/golden"
)

// TestPlanCommandsGolden checks xrun plan --commands: every command the
// cells of external engines will run, with a fixed cache and results
// directory; the repository's own path is written <repo>.
func TestPlanCommandsGolden(t *testing.T) {
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, spec string }{
		{"engines", "testdata/plan/engines.yaml"},
		{"trtllm-gemm", "../experiments/trtllm-gemm.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := LoadSpec(tc.spec, LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			if err := spec.Plan.WriteCommands(&b, CommandsOptions{CacheDir: "/cache", Out: "/results"}); err != nil {
				t.Fatal(err)
			}
			got := strings.ReplaceAll(b.String(), repo, "<repo>")
			golden.Check(t, "plan/"+tc.name+".commands.golden", got)
		})
	}
}

// TestPlanCommandsExpandEverything checks that no placeholder survives
// into a command a run starts.
func TestPlanCommandsExpandEverything(t *testing.T) {
	spec, err := LoadSpec("testdata/plan/engines.yaml", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range spec.Plan.Cells {
		c := &spec.Plan.Cells[i]
		cmds, err := spec.Plan.CellCommands(c, CommandsOptions{CacheDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		if c.Params.Engine == "cuda" && cmds != nil {
			t.Errorf("%s: the built-in engine runs no command, got %v", c.ID, cmds)
		}
		for _, cmd := range cmds {
			s := cmd.String()
			if strings.Contains(s, "{") && !strings.Contains(s, "<build key>") {
				t.Errorf("%s: %s: a placeholder is left: %s", c.ID, cmd.Stage, s)
			}
		}
	}
	if _, err := os.Stat("results"); err == nil {
		t.Error("planning the commands created a results directory")
	}
}
