package datasets

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
)

// referenceFiles are outputs of TensorRT-LLM's own prepare_dataset.py
// (--stdout); the file names give the parameters.
var referenceFiles = []struct {
	file string
	p    Params
}{
	{"norm_n5_in100sd30_out50sd10_seed420_vocab32000_eos2.jsonl", Params{
		Dist: NormDist, NumRequests: 5, InputMean: 100, InputStdev: 30, OutputMean: 50, OutputStdev: 10,
		Seed: 420, VocabSize: 32000, EOSID: 2}},
	{"norm_n12_in30sd0_out4sd0_seed11_vocab50_eos0.jsonl", Params{
		Dist: NormDist, NumRequests: 12, InputMean: 30, InputStdev: 0, OutputMean: 4, OutputStdev: 0,
		Seed: 11, VocabSize: 50, EOSID: 0}},
	{"unif_n4_in10-20_out5-9_seed7_vocab1000_eos2.jsonl", Params{
		Dist: UnifDist, NumRequests: 4, InputMin: 10, InputMax: 20, OutputMin: 5, OutputMax: 9,
		Seed: 7, VocabSize: 1000, EOSID: 2}},
}

func TestReferenceFilesByteForByte(t *testing.T) {
	for _, rf := range referenceFiles {
		t.Run(rf.file, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join("testdata", rf.file))
			if err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			if err := Write(&got, rf.p); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				gotFile := filepath.Join("testdata", rf.file+".got")
				_ = os.WriteFile(gotFile, got.Bytes(), 0o644)
				t.Fatalf("output differs from TensorRT-LLM's; wrote %s", gotFile)
			}
		})
	}
}

// TestRandTaskID checks --rand-task-id: random.randint per request, drawn
// after every token id from the same stream (expected ids computed with
// CPython from the reference files' lengths), -1 meaning no LoRA, and the
// token ids unchanged by it.
func TestRandTaskID(t *testing.T) {
	cases := []struct {
		ref    int
		lo, hi int
		want   []int
	}{
		{0, 0, 2, []int{1, 1, 2, 0, 0}},
		{1, -1, 3, []int{-1, 2, -1, 3, 1, -1, 0, 0, 2, 1, 0, -1}},
	}
	for _, c := range cases {
		rf := referenceFiles[c.ref]
		plain, err := GenerateAll(rf.p)
		if err != nil {
			t.Fatal(err)
		}
		p := rf.p
		p.LoRA = &LoRAParams{Dir: "loras", Rand: &[2]int{c.lo, c.hi}}
		got, err := GenerateAll(p)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range got {
			want := c.want[i]
			switch {
			case want == -1 && r.LoRATaskID != nil:
				t.Errorf("%s request %d: LoRA task %d, want none", rf.file, i, *r.LoRATaskID)
			case want != -1 && (r.LoRATaskID == nil || *r.LoRATaskID != want):
				t.Errorf("%s request %d: LoRA task %v, want %d", rf.file, i, r.LoRATaskID, want)
			}
			if !slices.Equal(r.InputIDs, plain[i].InputIDs) {
				t.Errorf("%s request %d: token ids changed by --rand-task-id", rf.file, i)
			}
		}
	}
	// The written line carries lora_request after output_tokens, as
	// prepare_dataset.py's print_text_dataset adds it.
	p := referenceFiles[0].p
	p.NumRequests = 1
	p.LoRA = &LoRAParams{Dir: "/tmp/loras", TaskID: 4}
	var buf bytes.Buffer
	if err := Write(&buf, p); err != nil {
		t.Fatal(err)
	}
	if want := `,"output_tokens":46,"lora_request":{"lora_name":"lora_4","lora_int_id":4,"lora_path":"/tmp/loras/4"}}` + "\n"; !bytes.HasSuffix(buf.Bytes(), []byte(want)) {
		t.Errorf("line %q does not end in %q", buf.String(), want)
	}
	// A fixed task id of -1 means no LoRA at all.
	p.LoRA.TaskID = -1
	buf.Reset()
	if err := Write(&buf, p); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(buf.Bytes(), []byte("lora_request")) {
		t.Errorf("task id -1 wrote a lora_request: %s", buf.String())
	}
}

// TestWriteStopsOnError checks that a failing writer ends the pipelined
// generation with its error (and no goroutine left blocked).
func TestWriteStopsOnError(t *testing.T) {
	p := Params{Dist: NormDist, NumRequests: 2000, InputMean: 500, OutputMean: 10, Seed: 1, VocabSize: 32000, EOSID: 2}
	w := &failingWriter{after: 3}
	if err := Write(w, p); err != errWriteFailed {
		t.Fatalf("got %v, want the writer's error", err)
	}
}

var errWriteFailed = errors.New("disk full")

type failingWriter struct{ after int }

func (f *failingWriter) Write(b []byte) (int, error) {
	if f.after == 0 {
		return 0, errWriteFailed
	}
	f.after--
	return len(b), nil
}

// TestSerialAndPipelinedAgree compares the one-goroutine path with the
// pipelined one on a dataset of many batches.
func TestSerialAndPipelinedAgree(t *testing.T) {
	p := Params{Dist: UnifDist, NumRequests: 700, InputMin: 1, InputMax: 900, OutputMin: 1, OutputMax: 9,
		Seed: 99, VocabSize: 1000, EOSID: 999, LoRA: &LoRAParams{Dir: "d", Rand: &[2]int{-1, 1}}}
	var piped bytes.Buffer
	if err := Write(&piped, p); err != nil {
		t.Fatal(err)
	}
	prev := runtime.GOMAXPROCS(1)
	var serial bytes.Buffer
	err := Write(&serial, p)
	runtime.GOMAXPROCS(prev)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(piped.Bytes(), serial.Bytes()) {
		t.Fatal("pipelined and serial output differ")
	}
	// Token ids of a request are distinct whenever it is shorter than the
	// vocabulary (random.sample), except that the EOS scrub's replacement,
	// (999+1) % 1000 = 0, may also have been drawn; the EOS never occurs.
	reqs, err := ReadAll(NewReader(&serial, "mem"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reqs {
		seen := map[int32]bool{}
		for _, id := range r.InputIDs {
			if (seen[id] && id != 0) || id == 999 {
				t.Fatalf("request %d: id %d repeated or EOS", r.TaskID, id)
			}
			seen[id] = true
		}
	}
}
