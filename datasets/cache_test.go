package datasets

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCache(t *testing.T) {
	rf := referenceFiles[0]
	want, err := os.ReadFile(filepath.Join("testdata", rf.file))
	if err != nil {
		t.Fatal(err)
	}
	c := Cache{Dir: filepath.Join(t.TempDir(), "cache")}

	e, err := c.Ensure(rf.p)
	if err != nil {
		t.Fatal(err)
	}
	if !e.Generated || e.Reason != "not cached yet" {
		t.Errorf("first Ensure = %+v, want a generation", e)
	}
	if got, _ := os.ReadFile(e.Path); !bytes.Equal(got, want) {
		t.Fatal("cached file differs from TensorRT-LLM's output")
	}
	if !strings.HasPrefix(filepath.Base(e.Path), "norm-n5-in100sd30-out50sd10-seed420-vocab32000-eos2-") {
		t.Errorf("cache file name %q", filepath.Base(e.Path))
	}
	sumLine, _ := os.ReadFile(e.Path + ".sha256")
	if string(sumLine) != e.SHA256+"  "+filepath.Base(e.Path)+"\n" {
		t.Errorf("hash file %q", sumLine)
	}

	// Reuse: same path, nothing written.
	st, _ := os.Stat(e.Path)
	e2, err := c.Ensure(rf.p)
	if err != nil || e2.Generated || e2.Path != e.Path || e2.SHA256 != e.SHA256 {
		t.Fatalf("second Ensure = %+v, %v; want a verified reuse", e2, err)
	}
	if st2, _ := os.Stat(e.Path); !os.SameFile(st, st2) {
		t.Error("reuse rewrote the file")
	}

	// Corruption (same size, one byte changed) is detected and repaired.
	data, _ := os.ReadFile(e.Path)
	data[10] ^= 1
	if err := os.WriteFile(e.Path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	e3, err := c.Ensure(rf.p)
	if err != nil || !e3.Generated || !strings.Contains(e3.Reason, "corrupted") {
		t.Fatalf("Ensure after corruption = %+v, %v", e3, err)
	}
	if got, _ := os.ReadFile(e.Path); !bytes.Equal(got, want) {
		t.Fatal("repaired file differs")
	}
	// A missing hash file regenerates too.
	os.Remove(e.Path + ".sha256")
	if e4, err := c.Ensure(rf.p); err != nil || !e4.Generated {
		t.Fatalf("Ensure without hash file = %+v, %v", e4, err)
	}

	// Different parameters, different file.
	p2 := rf.p
	p2.Seed = 421
	if path2, err := c.Path(p2); err != nil || path2 == e.Path {
		t.Fatalf("Path(seed 421) = %q, %v", path2, err)
	}
	// No temporary files are left behind.
	entries, _ := os.ReadDir(c.Dir)
	for _, de := range entries {
		if strings.HasPrefix(de.Name(), ".") {
			t.Errorf("leftover %s", de.Name())
		}
	}
	if len(entries) != 4 {
		t.Errorf("cache holds %d files, want 4", len(entries))
	}
}

func TestCacheBadParams(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "c")
	_, err := Cache{Dir: dir}.Path(Params{Dist: NormDist, NumRequests: 0, VocabSize: 10})
	if err == nil || !strings.Contains(err.Error(), "num_requests") {
		t.Fatalf("got %v", err)
	}
	if _, statErr := os.Stat(dir); !os.IsNotExist(statErr) {
		t.Error("bad parameters created the cache directory")
	}
}

func TestWriteFileAtomicFailure(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.jsonl")
	if err := os.WriteFile(path, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := WriteFileAtomic(path, func(w io.Writer) error {
		_, _ = io.WriteString(w, "partial")
		return io.ErrUnexpectedEOF
	})
	if err != io.ErrUnexpectedEOF {
		t.Fatalf("got %v", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "old\n" {
		t.Errorf("file became %q", got)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("leftover files: %v", entries)
	}
}

func TestParamsValidate(t *testing.T) {
	norm := func(mod func(*Params)) Params {
		p := Params{Dist: NormDist, NumRequests: 1, InputMean: 10, OutputMean: 10, Seed: DefaultSeed, VocabSize: 100, EOSID: 2}
		mod(&p)
		return p
	}
	unif := func(mod func(*Params)) Params {
		p := Params{Dist: UnifDist, NumRequests: 1, InputMin: 1, InputMax: 2, OutputMin: 1, OutputMax: 2, Seed: DefaultSeed, VocabSize: 100, EOSID: 2}
		mod(&p)
		return p
	}
	cases := []struct {
		p     Params
		field string
	}{
		{norm(func(p *Params) { p.NumRequests = 0 }), "num_requests"},
		{norm(func(p *Params) { p.InputStdev = -1 }), "input_stdev"},
		{norm(func(p *Params) { p.OutputStdev = -5 }), "output_stdev"},
		{norm(func(p *Params) { p.InputMean = MaxTokens; p.InputStdev = 1 }), "input_stdev"},
		{norm(func(p *Params) { p.Seed = 1 << 32 }), "random_seed"},
		{norm(func(p *Params) { p.Seed = -1 }), "random_seed"},
		{norm(func(p *Params) { p.VocabSize = 0 }), "vocab_size"},
		{norm(func(p *Params) { p.EOSID = 100; p.FullVocabSize = 100 }), "eos_id"},
		{norm(func(p *Params) { p.EOSID = -1 }), "eos_id"},
		{norm(func(p *Params) { p.VocabSize = 1; p.EOSID = 0 }), "vocab_size"},
		{norm(func(p *Params) { p.LoRA = &LoRAParams{Rand: &[2]int{3, 2}} }), "rand_task_id"},
		{unif(func(p *Params) { p.InputMin = 3 }), "input_min"},
		{unif(func(p *Params) { p.OutputMin = 0 }), "output_min"},
		{unif(func(p *Params) { p.OutputMax = MaxTokens + 1 }), "output_max"},
		{unif(func(p *Params) { p.Seed = -3 }), "random_seed"},
		{unif(func(p *Params) { p.Dist = "token-zipf-dist" }), "dist"},
	}
	for _, c := range cases {
		err := c.p.Validate()
		pe, ok := err.(*ParamError)
		if !ok || pe.Field != c.field || !pe.BadInput() {
			t.Errorf("%+v: got %v, want a ParamError for %s", c.p, err, c.field)
		}
	}
	// Valid edge cases: EOS beyond the base vocabulary (Llama-3), seeds
	// beyond 32 bits for unif, negative means (lengths floor at 1).
	for _, p := range []Params{
		norm(func(p *Params) { p.VocabSize = 128000; p.EOSID = 128001; p.FullVocabSize = 128256 }),
		norm(func(p *Params) { p.InputMean = -5; p.Seed = 1<<32 - 1 }),
		unif(func(p *Params) { p.Seed = 1 << 40 }),
		norm(func(p *Params) { p.VocabSize = 1; p.EOSID = 3; p.FullVocabSize = 10 }),
	} {
		if err := p.Validate(); err != nil {
			t.Errorf("%+v: %v", p, err)
		}
	}
}

func TestCanonicalIgnoresUnusedFields(t *testing.T) {
	a := Params{Dist: NormDist, NumRequests: 3, InputMean: 5, OutputMean: 5, Seed: 1, VocabSize: 10, EOSID: 2}
	b := a
	b.InputMin, b.OutputMax, b.FullVocabSize = 7, 9, 99 // not part of a norm dataset
	if a.Key() != b.Key() {
		t.Error("unused fields changed the key")
	}
	b.EOSID = 3
	if a.Key() == b.Key() {
		t.Error("eos_id did not change the key")
	}
	if got, want := a.Canonical(), "xrun-dataset/v1 token-norm-dist num_requests=3 input_mean=5 input_stdev=0 output_mean=5 output_stdev=0 random_seed=1 vocab_size=10 eos_id=2"; got != want {
		t.Errorf("Canonical = %q\nwant %q", got, want)
	}
}
