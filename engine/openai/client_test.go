package openai

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// clock ticks a millisecond per call, so that chunk times are known.
func clock() func() time.Time {
	t0 := time.Unix(0, 0)
	n := 0
	return func() time.Time {
		n++
		return t0.Add(time.Duration(n) * time.Millisecond)
	}
}

func TestReadStream(t *testing.T) {
	for _, tc := range []struct {
		name, stream string
		tokens       int
		counted      string
		chunks       int
		err          string
	}{
		{"vLLM completions, usage last", "data: {\"choices\":[{\"index\":0,\"text\":\" a\",\"finish_reason\":null}]}\n\n" +
			"data: {\"choices\":[{\"index\":0,\"text\":\" b c\",\"finish_reason\":\"length\"}]}\n\n" +
			"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":3,\"total_tokens\":6}}\n\ndata: [DONE]\n\n", 3, "usage", 2, ""},
		{"chat deltas, role first, no usage", "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n" +
			": keep-alive comment\n\nevent: message\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\n" +
			"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"y\"},\"finish_reason\":\"length\"}]}\n\n", 2, "chunks", 2, ""},
		{"token ids counted", "data: {\"choices\":[{\"index\":0,\"text\":\" 5 6\",\"token_ids\":[5,6],\"finish_reason\":\"length\"}]}\n\ndata: [DONE]\n\n", 2, "token_ids", 1, ""},
		{"cut short", "data: {\"choices\":[{\"index\":0,\"text\":\" a\",\"finish_reason\":null}]}\n\n", 0, "", 0, "without finishing"},
		{"error event", "data: {\"choices\":[{\"index\":0,\"text\":\" a\"}]}\n\ndata: {\"error\":{\"message\":\"CUDA out of memory\"}}\n\n", 0, "", 0, "CUDA out of memory"},
		{"not JSON", "data: {oops\n\n", 0, "", 0, "not JSON"},
	} {
		tm := &Timing{}
		err := readStream(strings.NewReader(tc.stream), tm, clock())
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if tm.OutputTokens != tc.tokens || tm.Counted != tc.counted || len(tm.Chunks) != tc.chunks {
			t.Errorf("%s: %d tokens by %s in %d chunks, want %d by %s in %d", tc.name, tm.OutputTokens, tm.Counted, len(tm.Chunks), tc.tokens, tc.counted, tc.chunks)
		}
		for i := 1; i < len(tm.Chunks); i++ {
			if !tm.Chunks[i].After(tm.Chunks[i-1]) || !tm.End.After(tm.Chunks[i]) {
				t.Errorf("%s: chunk times %v end %v", tc.name, tm.Chunks, tm.End)
			}
		}
	}
}

// FuzzReadStream: any stream is read to an answer or a RequestError,
// never a panic, and a read stream's chunks are in order.
func FuzzReadStream(f *testing.F) {
	f.Add("data: {\"choices\":[{\"index\":0,\"text\":\" a\",\"finish_reason\":\"length\"}],\"usage\":{\"completion_tokens\":1}}\n\ndata: [DONE]\n\n")
	f.Add("data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n")
	f.Add("data: [DONE]\n")
	f.Add("data: {\"error\":{\"message\":\"m\"}}\n")
	f.Fuzz(func(t *testing.T, s string) {
		tm := &Timing{}
		err := readStream(strings.NewReader(s), tm, clock())
		if err != nil {
			if _, ok := err.(*RequestError); !ok {
				t.Fatalf("%T %v", err, err)
			}
			return
		}
		if tm.OutputTokens < 0 && tm.Counted != "usage" {
			t.Fatalf("negative count %d by %s", tm.OutputTokens, tm.Counted)
		}
		for i := 1; i < len(tm.Chunks); i++ {
			if tm.Chunks[i].Before(tm.Chunks[i-1]) {
				t.Fatal("chunks out of order")
			}
		}
	})
}

// FuzzParseTokenIDs: a prompt or message content parses to ids or to a
// message saying what was expected, never both, never a panic; ids read
// as text round-trip through TokenText.
func FuzzParseTokenIDs(f *testing.F) {
	for _, s := range []string{`[1, 2, 3]`, `" 1 2 3"`, `"Hello"`, `[[1], [2]]`, `["a"]`, `null`, ``, `[1.5]`, `{"a":1}`} {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, raw string, asText bool) {
		ids, msg := ParseTokenIDs(json.RawMessage(raw), asText)
		if msg != "" && ids != nil {
			t.Fatalf("ids %v and message %q", ids, msg)
		}
		if msg == "" && len(ids) > 0 && asText && strings.HasPrefix(strings.TrimSpace(raw), `"`) {
			back, m := ParseTokenIDs(json.RawMessage(mustJSON(TokenText(ids))), true)
			if m != "" || len(back) != len(ids) {
				t.Fatalf("%v: round trip %v %q", ids, back, m)
			}
		}
	})
}
