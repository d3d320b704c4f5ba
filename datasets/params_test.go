package datasets

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// An EOS id at or beyond the base vocabulary (Llama-3: 128001 with 128000
// base ids) is what prepare_dataset.py gets from such a tokenizer; it is
// valid with or without the tokenizer's full size, which only bounds it.
func TestValidateEOSBeyondVocab(t *testing.T) {
	base := Params{Dist: NormDist, NumRequests: 1, InputMean: 4, OutputMean: 4, Seed: DefaultSeed}
	cases := []struct {
		vocab, eos, full int
		field            string // "" when valid
	}{
		{128000, 128001, 0, ""},
		{128000, 128001, 128256, ""},
		{128000, 127999, 0, ""},
		{100, math.MaxInt32, 0, ""},
		{1, 1, 0, ""}, // the only token is 0, never the EOS
		{128000, 128256, 128256, "eos_id"},
		{100, 100, 100, "eos_id"},
		{100, math.MaxInt32 + 1, 0, "eos_id"},
		{100, -1, 0, "eos_id"},
		{1, 0, 0, "vocab_size"},
	}
	for _, c := range cases {
		p := base
		p.VocabSize, p.EOSID, p.FullVocabSize = c.vocab, c.eos, c.full
		err := p.Validate()
		var pe *ParamError
		switch {
		case c.field == "" && err != nil:
			t.Errorf("vocab %d eos %d full %d: %v", c.vocab, c.eos, c.full, err)
		case c.field != "" && (!errors.As(err, &pe) || pe.Field != c.field):
			t.Errorf("vocab %d eos %d full %d: got %v, want a ParamError for %s", c.vocab, c.eos, c.full, err, c.field)
		}
	}
}

// With the EOS beyond the vocabulary the scrub never fires, so the dataset
// is the raw draws: exactly TensorRT-LLM's reference files whose draws
// held neither the EOS 2 nor its replacement 3 (checked below), with the
// EOS moved past the vocabulary.
func TestEOSBeyondVocabByteForByte(t *testing.T) {
	for _, rf := range referenceFiles {
		if rf.p.EOSID != 2 {
			continue
		}
		t.Run(rf.file, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join("testdata", rf.file))
			if err != nil {
				t.Fatal(err)
			}
			// A scrubbed 2 would read as 3; with neither present the
			// reference is the draws themselves.
			err = Generate(rf.p, func(r *Request) error {
				for _, id := range r.InputIDs {
					if id == 2 || id == 3 {
						t.Fatalf("reference request %d holds token %d; it cannot show the raw draws", r.TaskID, id)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, eos := range []int{rf.p.VocabSize, rf.p.VocabSize + 1, math.MaxInt32} {
				p := rf.p
				p.EOSID = eos
				var got bytes.Buffer
				if err := Write(&got, p); err != nil {
					t.Fatalf("eos %d: %v", eos, err)
				}
				if !bytes.Equal(got.Bytes(), want) {
					t.Errorf("eos %d: output differs from TensorRT-LLM's %s", eos, rf.file)
				}
			}
		})
	}
}
