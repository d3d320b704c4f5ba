package datasets

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func intp(v int) *int { return &v }

func TestRoundTrip(t *testing.T) {
	reqs := []Request{
		{TaskID: 0, InputIDs: []int32{0, 1, 9, 10, 99, 100, 12345, 2147483647}, OutputTokens: 1},
		{TaskID: 1, InputIDs: []int32{7}, OutputTokens: 128, LoRATaskID: intp(3)},
		{TaskID: 2, InputIDs: []int32{31999}, OutputTokens: 16777216, LoRATaskID: intp(0)},
	}
	var buf bytes.Buffer
	w := NewWriter(&buf)
	w.LoRADir = "loras"
	for i := range reqs {
		if err := w.Write(&reqs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	wantText := `{"task_id":0,"input_ids":[0,1,9,10,99,100,12345,2147483647],"output_tokens":1}
{"task_id":1,"input_ids":[7],"output_tokens":128,"lora_request":{"lora_name":"lora_3","lora_int_id":3,"lora_path":"loras/3"}}
{"task_id":2,"input_ids":[31999],"output_tokens":16777216,"lora_request":{"lora_name":"lora_0","lora_int_id":0,"lora_path":"loras/0"}}
`
	if diff := cmp.Diff(wantText, buf.String()); diff != "" {
		t.Fatalf("written text (-want +got):\n%s", diff)
	}
	got, err := ReadAll(NewReader(&buf, "mem"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(reqs, got); diff != "" {
		t.Fatalf("round trip (-want +got):\n%s", diff)
	}
}

func TestRoundTripGenerated(t *testing.T) {
	p := Params{Dist: NormDist, NumRequests: 300, InputMean: 200, InputStdev: 80, OutputMean: 20, OutputStdev: 5,
		Seed: 1, VocabSize: 300, EOSID: 7, LoRA: &LoRAParams{Dir: "/a/b/", Rand: &[2]int{-1, 4}}}
	want, err := GenerateAll(p)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Write(&buf, p); err != nil {
		t.Fatal(err)
	}
	got, err := ReadAll(NewReader(&buf, "mem"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("round trip (-want +got):\n%s", diff)
	}
	for _, r := range got {
		for _, id := range r.InputIDs {
			if id == 7 {
				t.Fatalf("request %d contains the EOS id", r.TaskID)
			}
		}
	}
}

func TestReadReferenceFiles(t *testing.T) {
	for _, rf := range referenceFiles {
		path := filepath.Join("testdata", rf.file)
		got, err := ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		want, err := GenerateAll(rf.p)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-generated +read):\n%s", rf.file, diff)
		}
		st, err := CheckFile(path, rf.p.VocabSize)
		if err != nil || st.Requests != rf.p.NumRequests {
			t.Errorf("CheckFile(%s) = %+v, %v", rf.file, st, err)
		}
	}
}

func TestReadLenientJSON(t *testing.T) {
	// Anything Python's json.loads accepts and trtllm-bench would use.
	in := `  { "output_tokens" : 5 , "extra": {"a": [1, 2.5e3, "x\"y", null, true]}, "input_ids" : [ 1 , 2,3 ] , "task_id": -4 }` + "\r\n" +
		"\n" + // blank lines are skipped
		`{"task_id":1,"logits":[4,5],"output_tokens":2,"prompt":"hi"}` + "\n" +
		`{"task_id":2,"input_ids":[6],"logits":[9],"output_tokens":3,"lora_request":{"lora_path":"p","lora_int_id":-1,"lora_name":"n"}}` + "\n" +
		`{"task_id":3,"input_ids":[6],"output_tokens":3,"lora_request":null,"task_id":8}` // no final newline
	got, err := ReadAll(NewReader(strings.NewReader(in), "mem"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Request{
		{TaskID: -4, InputIDs: []int32{1, 2, 3}, OutputTokens: 5},
		{TaskID: 1, InputIDs: []int32{4, 5}, OutputTokens: 2},
		{TaskID: 2, InputIDs: []int32{6}, OutputTokens: 3, LoRATaskID: intp(-1)},
		{TaskID: 8, InputIDs: []int32{6}, OutputTokens: 3},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

func TestReadErrors(t *testing.T) {
	good := `{"task_id":0,"input_ids":[1,2],"output_tokens":3}` + "\n"
	cases := []struct {
		name, in, want string
		vocab          int
	}{
		{"truncated line", good + `{"task_id":1,"input_ids":[1,2`, "mem:2: want ',' or ']' after input_ids[1], got the end of the line (truncated?)", 0},
		{"truncated number", good + `{"task_id":1,"input_ids":[1,`, "mem:2: want input_ids[1], got the end of the line (truncated?)", 0},
		{"truncated string", `{"task_`, "mem:1: unterminated string at the end of the line (truncated?)", 0},
		{"not an object", "[1,2]\n", `mem:1: column 1: want a JSON object '{', got an array`, 0},
		{"prompt only", `{"task_id":0,"prompt":"Hello","output_tokens":3}`, `mem:1: has a "prompt" but no "input_ids"`, 0},
		{"missing task", `{"input_ids":[1],"output_tokens":3}`, `mem:1: missing "task_id"`, 0},
		{"missing output", `{"task_id":0,"input_ids":[1]}`, `mem:1: missing "output_tokens"`, 0},
		{"missing ids", `{"task_id":0,"output_tokens":1}`, `mem:1: missing "input_ids"`, 0},
		{"empty ids", `{"task_id":0,"input_ids":[],"output_tokens":1}`, `mem:1: "input_ids" is empty`, 0},
		{"float id", `{"task_id":0,"input_ids":[1,2.5],"output_tokens":1}`, `mem:1: column 29: input_ids[1] = 2.5 is not a token id`, 0},
		{"negative id", `{"task_id":0,"input_ids":[-1],"output_tokens":1}`, `mem:1: column 27: input_ids[0] = -1 is not a token id`, 0},
		{"huge id", `{"task_id":0,"input_ids":[99999999999],"output_tokens":1}`, `input_ids[0] = 99999999999 is not a token id`, 0},
		{"string id", `{"task_id":0,"input_ids":["1"],"output_tokens":1}`, `input_ids[0]: want a token id, got a string`, 0},
		{"float output", `{"task_id":0,"input_ids":[1],"output_tokens":1.0}`, `"output_tokens": want an integer, got 1.0`, 0},
		{"zero output", `{"task_id":0,"input_ids":[1],"output_tokens":0}`, `"output_tokens" must be in [1, 16777216], got 0`, 0},
		{"trailing garbage", `{"task_id":0,"input_ids":[1],"output_tokens":1} x`, `column 49: found 'x' after the end of the object`, 0},
		{"two objects", `{"task_id":0,"input_ids":[1],"output_tokens":1}{}`, `found an object after the end of the object`, 0},
		{"outside vocab", good + `{"task_id":1,"input_ids":[5,32000],"output_tokens":1}`, `mem:2: input_ids[1] = 32000 is outside the model's vocabulary [0, 32000)`, 32000},
		{"bad lora", `{"task_id":0,"input_ids":[1],"output_tokens":1,"lora_request":{"lora_name":"x"}}`, `"lora_request" has no "lora_int_id"`, 0},
		{"legacy prompt", `{"metadata":{},"samples":[{"task_id":-1,"prompt":"x","output_len":3}]}`, `mem: samples[0]: has a "prompt"`, 0},
		{"legacy bad len", `{"metadata":{},"samples":[{"input_len":2,"input_ids":[1],"output_len":3,"task_id":-1}]}`, `samples[0]: "input_len" is 2 but "input_ids" has 1 tokens`, 0},
		{"legacy syntax", "{\"metadata\":{},\n\"samples\":[{\"input_ids\":[1,}]}", `mem:2: invalid character '}'`, 0},
		{"legacy type", `{"metadata":{},"samples":[{"input_ids":[1.5],"output_len":1}]}`, `mem:1: samples.input_ids: want int64, got a JSON number`, 0},
		{"empty file", "\n\n", `mem: dataset has no requests`, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := NewReader(strings.NewReader(c.in), "mem")
			r.Vocab = c.vocab
			_, err := ReadAll(r)
			if err == nil {
				t.Fatalf("no error, want %q", c.want)
			}
			var de *Error
			if !errors.As(err, &de) || !de.BadInput() {
				t.Errorf("error %T is not a bad-input *Error", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q\n   want it to contain %q", err, c.want)
			}
		})
	}
}

func TestReadLegacy(t *testing.T) {
	// The shape json.dump(workload.model_dump()) writes (default separators).
	in := `{"metadata": {"workload_type": "token-norm-dist", "num_requests": 2}, "samples": [` +
		`{"input_len": 2, "input_ids": [5, 6], "output_len": 3, "task_id": -1}, ` +
		`{"input_len": 1, "input_ids": [7], "output_len": 4, "task_id": 2}]}`
	got, err := ReadAll(NewReader(strings.NewReader(in), "old.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Request{
		{TaskID: 0, InputIDs: []int32{5, 6}, OutputTokens: 3},
		{TaskID: 1, InputIDs: []int32{7}, OutputTokens: 4, LoRATaskID: intp(2)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

func TestReadFileMissing(t *testing.T) {
	_, err := ReadFile(filepath.Join(t.TempDir(), "nope.jsonl"))
	if err == nil || !strings.Contains(err.Error(), "nope.jsonl: cannot read dataset") {
		t.Fatalf("got %v", err)
	}
}

func TestCheckVocab(t *testing.T) {
	reqs := []Request{{TaskID: 0, InputIDs: []int32{1}}, {TaskID: 1, InputIDs: []int32{2, 50}}}
	if err := CheckVocab(reqs, 51); err != nil {
		t.Fatal(err)
	}
	err := CheckVocab(reqs, 50)
	if err == nil || !strings.Contains(err.Error(), "request 1 (task_id 1): input_ids[1] = 50 is outside the model's vocabulary [0, 50)") {
		t.Fatalf("got %v", err)
	}
}

// FuzzReadJSONL checks the hand-written parser against encoding/json: it
// never panics, rejects what is not JSON, and whatever it accepts decodes
// to the same request through encoding/json.
func FuzzReadJSONL(f *testing.F) {
	for _, rf := range referenceFiles {
		b, err := os.ReadFile(filepath.Join("testdata", rf.file))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(bytes.SplitN(b, []byte("\n"), 2)[0]))
	}
	for _, s := range []string{
		`{"task_id":1,"input_ids":[1,2],"output_tokens":3,"lora_request":{"lora_name":"lora_3","lora_int_id":3,"lora_path":"l/3"}}`,
		` {"output_tokens":2,"logits":[0],"task_id":0,"x":[{"y":"\u00e9\n"},-1.5e-3,true,null]} `,
		`{"task_id":0,"prompt":"hi","output_tokens":1}`,
		`{"metadata":{},"samples":[{"input_ids":[1],"output_len":1,"task_id":-1}]}`,
		`{"task_id":0,"input_ids":[1,`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		if strings.ContainsAny(line, "\n") {
			// One line at a time; multi-line input is the reader's job.
			_, _ = ReadAll(NewReader(strings.NewReader(line), "fuzz"))
			return
		}
		var req Request
		p := lineParser{b: []byte(line)}
		err := p.parse(&req)
		var generic map[string]any
		jsonErr := json.Unmarshal([]byte(line), &generic)
		if err != nil {
			return // rejected: fine whether or not it was JSON
		}
		if jsonErr != nil {
			t.Fatalf("accepted %q, which encoding/json rejects: %v", line, jsonErr)
		}
		var std struct {
			TaskID       int64   `json:"task_id"`
			InputIDs     []int32 `json:"input_ids"`
			Logits       []int32 `json:"logits"`
			OutputTokens int64   `json:"output_tokens"`
			LoRA         *struct {
				ID int `json:"lora_int_id"`
			} `json:"lora_request"`
		}
		if err := json.Unmarshal([]byte(line), &std); err != nil {
			t.Fatalf("accepted %q, which does not decode as a request: %v", line, err)
		}
		ids := std.InputIDs
		if ids == nil {
			ids = std.Logits
		}
		want := Request{TaskID: int(std.TaskID), InputIDs: ids, OutputTokens: int(std.OutputTokens)}
		if std.LoRA != nil {
			want.LoRATaskID = &std.LoRA.ID
		}
		req.InputIDs = p.ids
		if diff := cmp.Diff(want, req); diff != "" {
			t.Fatalf("%q: (-encoding/json +ours):\n%s", line, diff)
		}
		// What we accept, we write back in the canonical form and re-read.
		out := AppendRequest(nil, &req, "d")
		back, err := ReadAll(NewReader(bytes.NewReader(out), "back"))
		if err != nil || len(back) != 1 || !cmp.Equal(back[0], req) {
			t.Fatalf("re-reading %q: %v %v", out, back, err)
		}
	})
}
