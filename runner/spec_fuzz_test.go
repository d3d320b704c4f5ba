package runner

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzDecodeSpec feeds arbitrary bytes to the spec decoder: it must never
// panic; a rejection must be a *SpecError with a position; an accepted
// spec must plan to unique ids, render to valid JSON, and plan the same
// way twice.
func FuzzDecodeSpec(f *testing.F) {
	for _, glob := range []string{"testdata/bad/*.yaml", "testdata/bad-flags/*.yaml", "testdata/plan/*.yaml", "../experiments/*.yaml"} {
		files, _ := filepath.Glob(glob)
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Add([]byte("params: {model: tiny-moe}\nmatrix:\n  routing_mode: &r [learned, perfect]\n  include: [{routing_mode: uniform, batch_size: 3}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		opts := LoadOptions{MaxCells: 500}
		s, err := ParseSpec("fuzz.yaml", data, opts)
		if err != nil {
			var se *SpecError
			if !errors.As(err, &se) {
				t.Fatalf("error %T is not a *SpecError: %v", err, err)
			}
			if se.Line < 1 || se.Column < 1 || se.Msg == "" {
				t.Fatalf("error without a position or message: %#v", se)
			}
			return
		}
		cells := s.Plan.Cells
		if len(cells) == 0 || len(cells) > opts.MaxCells {
			t.Fatalf("%d cells", len(cells))
		}
		ids := map[string]bool{}
		for _, c := range cells {
			if ids[c.ID] || c.ID == "" {
				t.Fatalf("duplicate or empty id %q", c.ID)
			}
			ids[c.ID] = true
		}
		var a, b bytes.Buffer
		if err := s.Plan.WriteJSON(&a); err != nil || !json.Valid(a.Bytes()) {
			t.Fatalf("WriteJSON: %v", err)
		}
		s2, err := ParseSpec("fuzz.yaml", data, opts)
		if err != nil {
			t.Fatalf("second parse failed: %v", err)
		}
		if err := s2.Plan.WriteJSON(&b); err != nil || !bytes.Equal(a.Bytes(), b.Bytes()) {
			t.Fatal("the same spec planned differently twice")
		}
		if err := s.Plan.WriteText(&a); err != nil {
			t.Fatal(err)
		}
	})
}
