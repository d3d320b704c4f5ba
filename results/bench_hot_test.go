package results

import (
	"fmt"
	"io"
	"testing"
)

// bigStudy is a nightly-sized file: 256 cells x 10 repeats x 37 metrics.
func bigStudy() *Results {
	s := nightly(9, 0)
	base := s.cells[0]
	s.cells = nil
	for i := range 256 {
		c := base
		c.params = Params{"model": "llama-3.1-8b", "batch_size": 1 << (i % 9), "dataset.input_mean": 128 * (i/9 + 1)}
		s.cells = append(s.cells, c)
	}
	s.repeats = 10
	s.slugKeys = []string{"batch_size", "dataset.input_mean"}
	return s.build()
}

func BenchmarkMarshal(b *testing.B) {
	r := bigStudy()
	data, _ := Marshal(r)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Marshal(r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParse(b *testing.B) {
	data, err := Marshal(bigStudy())
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Parse(data, "big.json"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDiff(b *testing.B) {
	old, _ := normalized(bigStudy())
	new, _ := normalized(bigStudy())
	for b.Loop() {
		d := Diff(old, new, DiffOptions{Threshold: DefaultThreshold})
		if err := d.WriteMarkdown(io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRenderText(b *testing.B) {
	r, _ := normalized(bigStudy())
	for b.Loop() {
		if err := (textOutput{}).Render(io.Discard, r, RenderOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

func TestBigStudyShape(t *testing.T) {
	r := bigStudy()
	if n := len(r.Cells); n != 256 {
		t.Fatalf("%d cells", n)
	}
	if _, err := Marshal(r); err != nil {
		t.Fatal(fmt.Errorf("big study: %w", err))
	}
}
