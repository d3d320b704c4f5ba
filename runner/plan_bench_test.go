package runner

import (
	"fmt"
	"io"
	"strings"
	"testing"
)

// spec100k is a 102,000-combination matrix; the exclude removes 2,000 and
// the include extends half of the rest, leaving 100,000 cells.
func spec100k() []byte {
	var b strings.Builder
	b.WriteString("name: bench\nparams: {model: tiny-moe, engine: cuda}\nmatrix:\n  batch_size: [")
	for i := 1; i <= 51; i++ {
		if i > 1 {
			b.WriteString(", ")
		}
		fmt.Fprint(&b, i)
	}
	b.WriteString("]\n  gemm_plugin: [auto, disable]\n")
	// Lengths stay within tiny-moe's 4096 positions, which the plan checks.
	for _, axis := range []struct {
		name string
		step int
	}{{"dataset.input_mean", 128}, {"dataset.output_mean", 128}, {"max_num_tokens", 1024}} {
		fmt.Fprintf(&b, "  %s: [", axis.name)
		for i := 1; i <= 10; i++ {
			if i > 1 {
				b.WriteString(", ")
			}
			fmt.Fprint(&b, i*axis.step)
		}
		b.WriteString("]\n")
	}
	b.WriteString("  exclude: [{batch_size: 1}]\n  include: [{gemm_plugin: disable, routing_mode: perfect}]\n")
	return []byte(b.String())
}

// BenchmarkPlan100k decodes, validates, expands and plans a study of
// 100,000 cells (ids, collapse detection, datasets, totals). Target: < 1 s.
func BenchmarkPlan100k(b *testing.B) {
	data := spec100k()
	opts := LoadOptions{MaxCells: 200_000}
	b.ReportAllocs()
	cpu := processCPU()
	for b.Loop() {
		s, err := ParseSpec("bench.yaml", data, opts)
		if err != nil {
			b.Fatal(err)
		}
		if n := len(s.Plan.Cells); n != 100_000 {
			b.Fatalf("%d cells", n)
		}
	}
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
}

// BenchmarkPlanText100k renders the 100,000-cell plan as text.
func BenchmarkPlanText100k(b *testing.B) {
	s, err := ParseSpec("bench.yaml", spec100k(), LoadOptions{MaxCells: 200_000})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Plan.WriteText(io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}
