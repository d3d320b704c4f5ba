package runner

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// tinyMatrix builds a matrixDef over string keys and string values, so that
// GitHub's documented strategy.matrix examples read as they do in its docs.
type tinyMatrix struct {
	keys []string
	vals []string
	def  matrixDef
}

func (tm *tinyMatrix) key(k string) int {
	if i := slices.Index(tm.keys, k); i >= 0 {
		return i
	}
	tm.keys = append(tm.keys, k)
	return len(tm.keys) - 1
}

func (tm *tinyMatrix) val(v string) int32 {
	tm.vals = append(tm.vals, v)
	return int32(len(tm.vals) - 1)
}

func (tm *tinyMatrix) axis(k string, vs ...string) {
	ax := mxAxis{keys: []int{tm.key(k)}}
	for _, v := range vs {
		ax.rows = append(ax.rows, []int32{tm.val(v)})
	}
	tm.def.axes = append(tm.def.axes, ax)
}

// entry parses "k=v k=v".
func (tm *tinyMatrix) entry(s string) mxEntry {
	var e mxEntry
	for _, kv := range strings.Fields(s) {
		k, v, _ := strings.Cut(kv, "=")
		e.keys = append(e.keys, tm.key(k))
		e.vals = append(e.vals, tm.val(v))
	}
	return e
}

// run expands and renders each combination as "k=v k=v" in key order.
func (tm *tinyMatrix) run() (combos, excluded []string) {
	tm.def.nkeys = len(tm.keys)
	tm.def.same = func(a, b int32) bool { return tm.vals[a] == tm.vals[b] }
	res := tm.def.expand()
	render := func(vals []int32) string {
		var parts []string
		for k, v := range vals {
			if v >= 0 {
				parts = append(parts, tm.keys[k]+"="+tm.vals[v])
			}
		}
		return strings.Join(parts, " ")
	}
	for _, c := range res.combos {
		combos = append(combos, render(c.vals))
	}
	for _, x := range res.excluded {
		excluded = append(excluded, fmt.Sprintf("%s (by %d)", render(x.vals), x.by))
	}
	return combos, excluded
}

// The examples of GitHub's "Running variations of jobs in a workflow"
// (docs.github.com, jobs.<job_id>.strategy.matrix), with their documented
// results.
func TestMatrixGitHubExamples(t *testing.T) {
	tests := []struct {
		name    string
		build   func(tm *tinyMatrix)
		want    []string
		wantExc []string
	}{{
		// "The order of the variables in the matrix determines the order
		// in which the jobs are created."
		name: "order",
		build: func(tm *tinyMatrix) {
			tm.axis("version", "10", "12", "14")
			tm.axis("os", "ubuntu-latest", "windows-latest")
		},
		want: []string{
			"version=10 os=ubuntu-latest", "version=10 os=windows-latest",
			"version=12 os=ubuntu-latest", "version=12 os=windows-latest",
			"version=14 os=ubuntu-latest", "version=14 os=windows-latest",
		},
	}, {
		// Original values are never overwritten; values added by an
		// include can be; an entry that fits no original combination is
		// a new one, and later entries do not extend it.
		name: "include fruit animal",
		build: func(tm *tinyMatrix) {
			tm.axis("fruit", "apple", "pear")
			tm.axis("animal", "cat", "dog")
			tm.def.include = []mxEntry{
				tm.entry("color=green"),
				tm.entry("color=pink animal=cat"),
				tm.entry("fruit=apple shape=circle"),
				tm.entry("fruit=banana"),
				tm.entry("fruit=banana animal=cat"),
			}
		},
		want: []string{
			"fruit=apple animal=cat color=pink shape=circle",
			"fruit=apple animal=dog color=green shape=circle",
			"fruit=pear animal=cat color=pink",
			"fruit=pear animal=dog color=green",
			"fruit=banana",
			"fruit=banana animal=cat",
		},
	}, {
		// "seven jobs, testing five versions for perl and only two for macos"
		name: "include perl macos",
		build: func(tm *tinyMatrix) {
			tm.axis("os", "ubuntu-latest")
			tm.axis("perl", "5.16", "5.20", "5.26", "5.30", "latest")
			tm.def.include = []mxEntry{
				tm.entry("os=macos-latest perl=5.26"),
				tm.entry("os=macos-latest perl=latest"),
			}
		},
		want: []string{
			"os=ubuntu-latest perl=5.16", "os=ubuntu-latest perl=5.20", "os=ubuntu-latest perl=5.26",
			"os=ubuntu-latest perl=5.30", "os=ubuntu-latest perl=latest",
			"os=macos-latest perl=5.26", "os=macos-latest perl=latest",
		},
	}, {
		// Expanding: windows-latest/16 gets npm 6, nothing else changes.
		name: "expand with include",
		build: func(tm *tinyMatrix) {
			tm.axis("os", "windows-latest", "ubuntu-latest")
			tm.axis("node", "12", "14", "16")
			tm.def.include = []mxEntry{tm.entry("os=windows-latest node=16 npm=6")}
		},
		want: []string{
			"os=windows-latest node=12", "os=windows-latest node=14", "os=windows-latest node=16 npm=6",
			"os=ubuntu-latest node=12", "os=ubuntu-latest node=14", "os=ubuntu-latest node=16",
		},
	}, {
		// Adding: nine combinations plus windows-latest/17.
		name: "add with include",
		build: func(tm *tinyMatrix) {
			tm.axis("os", "macos-latest", "windows-latest", "ubuntu-latest")
			tm.axis("version", "12", "14", "16")
			tm.def.include = []mxEntry{tm.entry("os=windows-latest version=17")}
		},
		want: []string{
			"os=macos-latest version=12", "os=macos-latest version=14", "os=macos-latest version=16",
			"os=windows-latest version=12", "os=windows-latest version=14", "os=windows-latest version=16",
			"os=ubuntu-latest version=12", "os=ubuntu-latest version=14", "os=ubuntu-latest version=16",
			"os=windows-latest version=17",
		},
	}, {
		// No matrix variables: every include entry runs.
		name: "include only",
		build: func(tm *tinyMatrix) {
			tm.def.include = []mxEntry{
				tm.entry("site=production datacenter=site-a"),
				tm.entry("site=staging datacenter=site-b"),
			}
		},
		want: []string{"site=production datacenter=site-a", "site=staging datacenter=site-b"},
	}, {
		// Partial matches: 12 - 1 - 2 = 9 jobs.
		name: "exclude",
		build: func(tm *tinyMatrix) {
			tm.axis("os", "macos-latest", "windows-latest")
			tm.axis("version", "12", "14", "16")
			tm.axis("environment", "staging", "production")
			tm.def.exclude = []mxEntry{
				tm.entry("os=macos-latest version=12 environment=production"),
				tm.entry("os=windows-latest version=16"),
			}
		},
		want: []string{
			"os=macos-latest version=12 environment=staging",
			"os=macos-latest version=14 environment=staging", "os=macos-latest version=14 environment=production",
			"os=macos-latest version=16 environment=staging", "os=macos-latest version=16 environment=production",
			"os=windows-latest version=12 environment=staging", "os=windows-latest version=12 environment=production",
			"os=windows-latest version=14 environment=staging", "os=windows-latest version=14 environment=production",
		},
		wantExc: []string{
			"os=macos-latest version=12 environment=production (by 0)",
			"os=windows-latest version=16 environment=staging (by 1)",
			"os=windows-latest version=16 environment=production (by 1)",
		},
	}, {
		// "All include combinations are processed after exclude. This
		// allows you to use include to add back combinations that were
		// previously excluded."
		name: "include adds back what exclude removed",
		build: func(tm *tinyMatrix) {
			tm.axis("os", "linux", "windows")
			tm.axis("node", "14", "16")
			tm.def.exclude = []mxEntry{tm.entry("os=windows")}
			tm.def.include = []mxEntry{tm.entry("os=windows node=16 experimental=true")}
		},
		want: []string{
			"os=linux node=14", "os=linux node=16",
			"os=windows node=16 experimental=true",
		},
		wantExc: []string{"os=windows node=14 (by 0)", "os=windows node=16 (by 0)"},
	}, {
		// An include entry made only of original values that match adds
		// nothing and creates nothing.
		name: "include matching originals only",
		build: func(tm *tinyMatrix) {
			tm.axis("os", "linux", "windows")
			tm.def.include = []mxEntry{tm.entry("os=linux")}
		},
		want: []string{"os=linux", "os=windows"},
	}, {
		// The first exclude entry that matches is the one reported.
		name: "exclude reports first matching entry",
		build: func(tm *tinyMatrix) {
			tm.axis("a", "1", "2")
			tm.def.exclude = []mxEntry{tm.entry("a=2"), tm.entry("a=2")}
		},
		want:    []string{"a=1"},
		wantExc: []string{"a=2 (by 0)"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tm := &tinyMatrix{}
			tt.build(tm)
			got, exc := tm.run()
			if !slices.Equal(got, tt.want) {
				t.Errorf("combinations:\n got %q\nwant %q", got, tt.want)
			}
			if !slices.Equal(exc, tt.wantExc) {
				t.Errorf("excluded:\n got %q\nwant %q", exc, tt.wantExc)
			}
		})
	}
}

// The same rules through the spec: GitHub's fruit/animal example with
// xrun parameters standing in (fruit = model, animal = batch_size, color
// = gemm_plugin, shape = dataset.input_mean).
func TestSpecIncludeSemantics(t *testing.T) {
	spec := `
name: include
params: {engine: cpu}
matrix:
  model: [tiny-llama, tiny-dense]
  batch_size: [1, 2]
  include:
    - {gemm_plugin: disable}
    - {gemm_plugin: auto, batch_size: 1}
    - {model: tiny-llama, dataset.input_mean: 64}
    - {model: tiny-moe}
    - {model: tiny-moe, batch_size: 1}
`
	s, err := ParseSpec("include.yaml", []byte(spec), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range s.Plan.Cells {
		p := c.Params
		got = append(got, fmt.Sprintf("%s bs%d %s in%d", p.Model, p.BatchSize, p.GemmPlugin, p.Dataset.InputMean))
	}
	want := []string{
		"tiny-llama bs1 auto in64",
		"tiny-llama bs2 disable in64",
		"tiny-dense bs1 auto in128",
		"tiny-dense bs2 disable in128",
		"tiny-moe bs2048 auto in128", // new combinations take the params' values
		"tiny-moe bs1 auto in128",
	}
	if !slices.Equal(got, want) {
		t.Errorf("cells:\n got %q\nwant %q", got, want)
	}
}
