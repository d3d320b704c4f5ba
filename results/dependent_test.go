package results

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/results/golden"
)

// TestReportRealProfileRun renders a real GPU run of
// experiments/profile.yaml (model × gemm_plugin × profile_window on an
// H200). The dataset's EOS id and vocabulary and the routing mode follow
// the model: they are no axes of their own, so they get no column, no
// comparison and no place in the cell labels, and the model comparison
// pairs a dense and an MoE cell per row.
func TestReportRealProfileRun(t *testing.T) {
	r, err := ReadFile("testdata/profile-h200.results.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"markdown", "text"} {
		t.Run(format, func(t *testing.T) {
			var buf bytes.Buffer
			if err := Render(&buf, format, r, RenderOptions{}); err != nil {
				t.Fatal(err)
			}
			out := buf.String()
			for _, p := range []string{"dataset.eos_id", "dataset.vocab_size", "routing_mode"} {
				if strings.Contains(out, p) {
					t.Errorf("%s shows %s, a function of the model", format, p)
				}
			}
			golden.Check(t, "report-profile-h200."+format+".golden", buf.Bytes())
		})
	}
	rep := BuildReport(r, RenderOptions{})
	var titles []string
	for _, c := range rep.Comparisons {
		titles = append(titles, c.Axis)
		if c.Axis != "model" {
			continue
		}
		// Each pivot row pairs llama with qwen: 2 GEMM settings × 3 windows.
		if n := len(c.Tables[0].Rows); n != 6 {
			t.Errorf("model comparison has %d rows, want 6 (one per gemm_plugin × profile_window)", n)
		}
	}
	if want := []string{"profile_window", "model", "gemm_plugin"}; !slices.Equal(titles, want) {
		t.Errorf("comparisons = %v, want %v", titles, want)
	}
}

// TestDropDependent: a varying parameter that a single axis determines is
// no axis of its own.
func TestDropDependent(t *testing.T) {
	type cellParams = map[string]any
	build := func(declared []string, compare []string, cells ...cellParams) *Results {
		r := &Results{}
		for _, d := range declared {
			r.Axes = append(r.Axes, Axis{Name: d})
		}
		for _, c := range compare {
			r.Compare = append(r.Compare, CompareSpec{Axis: c})
		}
		for _, p := range cells {
			r.Cells = append(r.Cells, Cell{ID: formatScalar(len(r.Cells)), Params: p})
		}
		return r
	}
	// model × batch_size; eos follows the model, routing_mode is missing
	// for the dense model, seed varies on its own.
	grid := func(extra func(model string, batch int) cellParams) []cellParams {
		var out []cellParams
		for _, m := range []string{"llama", "qwen"} {
			for _, b := range []int{1, 8} {
				p := cellParams{"model": m, "batch_size": b}
				for k, v := range extra(m, b) {
					p[k] = v
				}
				out = append(out, p)
			}
		}
		return out
	}
	eos := map[string]any{"llama": 128001, "qwen": 151645}
	dependent := grid(func(m string, b int) cellParams {
		p := cellParams{"dataset.eos_id": eos[m]}
		if m == "qwen" {
			p["routing_mode"] = "learned"
		}
		return p
	})
	tests := []struct {
		name string
		r    *Results
		want []string
	}{
		{"declared axes determine eos and routing",
			build([]string{"model", "batch_size"}, nil, dependent...),
			[]string{"model", "batch_size"}},
		// Without declared axes model and eos determine each other, and
		// eos comes first in column order; routing_mode follows both.
		{"inferred without declared axes",
			build(nil, nil, dependent...),
			[]string{"batch_size", "dataset.eos_id"}},
		{"compared parameter stays",
			build([]string{"model", "batch_size"}, []string{"routing_mode"}, dependent...),
			[]string{"model", "batch_size", "routing_mode"}},
		{"independent parameter stays",
			build([]string{"model", "batch_size"}, nil, grid(func(m string, b int) cellParams {
				return cellParams{"dataset.eos_id": eos[m], "seed": map[string]int{"llama": b, "qwen": 9 - b}[m]}
			})...),
			[]string{"model", "batch_size", "seed"}},
		{"mutually determined: the first in column order stays",
			build(nil, nil, grid(func(m string, b int) cellParams {
				return cellParams{"engine": map[string]string{"llama": "a", "qwen": "b"}[m]}
			})...),
			[]string{"batch_size", "engine"}},
		{"mutually determined: the compared one stays",
			build(nil, []string{"model"}, grid(func(m string, b int) cellParams {
				return cellParams{"engine": map[string]string{"llama": "a", "qwen": "b"}[m]}
			})...),
			[]string{"batch_size", "model"}},
		{"declared axis stays even when determined",
			build([]string{"model", "engine"}, nil, grid(func(m string, b int) cellParams {
				return cellParams{"engine": map[string]string{"llama": "a", "qwen": "b"}[m]}
			})...),
			[]string{"model", "engine", "batch_size"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, a := range axes(tt.r) {
				got = append(got, a.Name)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("axes = %v, want %v", got, tt.want)
			}
		})
	}
}
