package main

import (
	"encoding/json"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

type planJSONView struct {
	Name  string
	Cells []struct {
		ID     string
		Hash   string
		Params map[string]any
	}
	Counts struct{ Cells, Excluded, Collapsed int }
}

func decodePlan(t *testing.T, out string) planJSONView {
	t.Helper()
	var p planJSONView
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("plan --json is not valid JSON: %v", err)
	}
	return p
}

// Every shipped study plans cleanly, twice to the same bytes, and its JSON
// names every cell with its parameters.
func TestPlanExperiments(t *testing.T) {
	files, _ := filepath.Glob("../../experiments/*.yaml")
	if len(files) < 5 {
		t.Fatalf("found %d experiments, want at least 5", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r1 := runCLI(t, nil, "plan", f)
			r2 := runCLI(t, nil, "plan", f)
			if r1.code != 0 || r1.stderr != "" {
				t.Fatalf("exit %d, stderr %q", r1.code, r1.stderr)
			}
			if r1.stdout != r2.stdout {
				t.Fatal("two runs printed different plans")
			}
			j1 := runCLI(t, nil, "plan", "--json", f)
			j2 := runCLI(t, nil, "plan", f, "--json")
			if j1.code != 0 || j1.stdout != j2.stdout {
				t.Fatalf("--json: exit %d, identical %v, stderr %q", j1.code, j1.stdout == j2.stdout, j1.stderr)
			}
			p := decodePlan(t, j1.stdout)
			if len(p.Cells) == 0 || len(p.Cells) != p.Counts.Cells {
				t.Fatalf("%d cells, counts say %d", len(p.Cells), p.Counts.Cells)
			}
			ids := map[string]bool{}
			for _, c := range p.Cells {
				if c.ID == "" || !strings.HasSuffix(c.ID, c.Hash[:8]) || len(c.Params) == 0 || c.Params["model"] == nil {
					t.Errorf("cell %+v lacks an id, hash or parameters", c)
				}
				if ids[c.ID] {
					t.Errorf("duplicate id %s", c.ID)
				}
				ids[c.ID] = true
				if !strings.Contains(r1.stdout, c.ID+" ") {
					t.Errorf("text plan lacks cell %s", c.ID)
				}
			}
		})
	}
}

func TestPlanSet(t *testing.T) {
	r := runCLI(t, nil, "plan", "--json", "../../experiments/quickstart.yaml",
		"--set", "matrix.batch_size=[8,16]", "--set", "params.dataset.num_requests=100",
		"--set", "matrix.dataset.input_mean=[16, 32]")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	p := decodePlan(t, r.stdout)
	if len(p.Cells) != 8 {
		t.Fatalf("%d cells, want 2 batch sizes x 2 gemm plugins x 2 input means", len(p.Cells))
	}
	var bs []float64
	for _, c := range p.Cells {
		if n := c.Params["dataset.num_requests"]; n != 100.0 {
			t.Errorf("%s: num_requests %v, want 100", c.ID, n)
		}
		if b := c.Params["batch_size"].(float64); !slices.Contains(bs, b) {
			bs = append(bs, b)
		}
	}
	if !slices.Equal(bs, []float64{8, 16}) {
		t.Errorf("batch sizes %v, want [8 16]", bs)
	}
}

// An override wins over the other place a parameter may be given.
func TestPlanSetPinsAndSweeps(t *testing.T) {
	r := runCLI(t, nil, "plan", "--json", "../../experiments/gemm.yaml", "--set", "params.batch_size=8")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if p := decodePlan(t, r.stdout); len(p.Cells) != 2 || p.Cells[0].Params["batch_size"] != 8.0 {
		t.Errorf("pinning batch_size: %d cells, want 2 at batch size 8", len(p.Cells))
	}
	r = runCLI(t, nil, "plan", "../../experiments/quickstart.yaml", "--set", "matrix.dtype=[float16, bfloat16]")
	if r.code != 0 || !strings.Contains(r.stdout, "12 cells to run") {
		t.Errorf("sweeping dtype: exit %d, %s%s", r.code, r.stdout, r.stderr)
	}
}

func TestPlanUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"plan"},
		{"plan", "a.yaml", "b.yaml"},
		{"plan", "--max-cells", "0", "../../experiments/quickstart.yaml"},
		{"plan", "--set", "no-equals-sign", "../../experiments/quickstart.yaml"},
		{"plan", "does-not-exist.yaml"},
	} {
		r := runCLI(t, nil, args...)
		if r.code != exitBadInput || r.stdout != "" {
			t.Errorf("%v: exit %d, stdout %q; want 2 and nothing", args, r.code, r.stdout)
		}
	}
	r := runCLI(t, nil, "plan", "does-not-exist.yaml")
	if want := "xrun: does-not-exist.yaml: cannot read the spec: no such file or directory\n"; r.stderr != want {
		t.Errorf("stderr %q, want %q", r.stderr, want)
	}
}

// snapshot lists every file under dir with its size and modification time.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		m[p] = info.ModTime().Format(time.RFC3339Nano) + " " + info.Mode().String() + " " + strconv.FormatInt(info.Size(), 10)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Every malformed spec in runner/testdata/bad makes `xrun plan FILE` exit 2
// with exactly its .err message, naming file:line:column and the field,
// with nothing on stdout and nothing written to disk; the specs in
// runner/testdata/bad-flags do the same with their --set / --max-cells
// arguments, and their messages name the flag.
func TestPlanBadSpecs(t *testing.T) {
	for _, dir := range []string{"bad", "bad-flags"} {
		t.Run(dir, func(t *testing.T) { testPlanBadSpecs(t, dir) })
	}
}

func testPlanBadSpecs(t *testing.T, dir string) {
	t.Chdir("../../runner/testdata/" + dir)
	names, _ := filepath.Glob("*.yaml")
	if min := map[string]int{"bad": 30, "bad-flags": 1}[dir]; len(names) < min {
		t.Fatalf("%d malformed specs in %s, want at least %d", len(names), dir, min)
	}
	before := snapshot(t, ".")
	for _, name := range names {
		base := strings.TrimSuffix(name, ".yaml")
		t.Run(base, func(t *testing.T) {
			want, err := os.ReadFile(base + ".err")
			if err != nil {
				t.Fatal(err)
			}
			args := []string{"plan", name}
			if extra, err := os.ReadFile(base + ".args"); err == nil {
				for _, line := range strings.Split(strings.TrimSpace(string(extra)), "\n") {
					if n, ok := strings.CutPrefix(line, "max-cells "); ok {
						args = append(args, "--max-cells", n)
					} else {
						args = append(args, "--set", line)
					}
				}
			}
			for _, js := range []bool{false, true} {
				a := args
				if js {
					a = append(slices.Clone(args), "--json")
				}
				r := runCLI(t, nil, a...)
				if r.code != exitBadInput {
					t.Errorf("%v: exit %d, want 2", a, r.code)
				}
				if r.stdout != "" {
					t.Errorf("%v: wrote to stdout: %q", a, r.stdout)
				}
				if r.stderr != "xrun: "+string(want) {
					t.Errorf("%v: stderr\n got %q\nwant %q", a, r.stderr, "xrun: "+string(want))
				}
				msg := string(want)
				if dir == "bad" && !regexp.MustCompile(`^`+regexp.QuoteMeta(name)+`:\d+:\d+: `).MatchString(msg) {
					t.Errorf("message does not name file:line:column: %q", msg)
				}
				if !strings.HasPrefix(msg, name+":") && !strings.HasPrefix(msg, "--set ") {
					t.Errorf("message names neither the file nor the --set: %q", msg)
				}
			}
		})
	}
	if after := snapshot(t, "."); !maps.Equal(before, after) {
		t.Errorf("xrun plan changed files under runner/testdata/%s", dir)
	}
}
