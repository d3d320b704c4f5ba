package openai

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xrun-dev/xrun/datasets"
	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/openai/openaitest"
)

// fakeEnv makes the test binary the fake server (openaitest.Main).
const fakeEnv = "XRUN_TEST_OPENAI_FAKE"

func TestMain(m *testing.M) {
	if os.Getenv(fakeEnv) == "1" {
		os.Exit(openaitest.Main(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// serveTiny runs xrun serve's handler on the cpu engine with the tiny
// model, over loopback; it returns the base URL (without /v1).
func serveTiny(t *testing.T) (string, *Server, engine.Engine) {
	t.Helper()
	e, err := engine.New(context.Background(), engine.Config{Model: "tiny-llama", BatchSize: 8, MaxNumTokens: 64})
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(e.(engine.Server), ServerOptions{Model: "tiny-llama", MaxSeqLen: 96, Vocab: e.Model().Vocab})
	ran := make(chan error, 1)
	go func() { ran <- s.Run(context.Background()) }()
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		hs.Close()
		s.Close()
		if err := <-ran; err != nil {
			t.Errorf("Run: %v", err)
		}
		e.Close()
	})
	return hs.URL, s, e
}

func post(t *testing.T, url, body string) (int, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func TestServerCompletions(t *testing.T) {
	base, _, _ := serveTiny(t)
	// The served engine is busy serving (Serve holds it), so the
	// reference tokens come from a twin: the same model and seed.
	e, err := engine.New(context.Background(), engine.Config{Model: "tiny-llama", BatchSize: 8, MaxNumTokens: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	prompt := []int32{5, 9, 13, 2}
	want, err := e.Run(context.Background(), []datasets.Request{{InputIDs: prompt, OutputTokens: 6}}, engine.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ids := want.Requests[0].OutputIDs
	code, b := post(t, base+"/v1/completions", `{"model":"tiny-llama","prompt":[5,9,13,2],"max_tokens":6,"temperature":0.7,"top_p":0.9}`)
	var r Response
	if code != 200 || json.Unmarshal(b, &r) != nil || len(r.Choices) != 1 {
		t.Fatalf("%d %s", code, b)
	}
	c := r.Choices[0]
	if !slices.Equal(c.TokenIDs, ids) || *c.Text != TokenText(ids) || *c.FinishReason != "length" || r.Object != "text_completion" {
		t.Errorf("choice %+v, want tokens %v", c, ids)
	}
	if r.Usage == nil || *r.Usage != (Usage{PromptTokens: 4, CompletionTokens: 6, TotalTokens: 10}) {
		t.Errorf("usage %+v", r.Usage)
	}
	// Chat: the content's token ids, as numbers or as the server's own
	// text, concatenated.
	code, b = post(t, base+"/v1/chat/completions", `{"messages":[{"role":"system","content":[5,9]},{"role":"user","content":" 13 2"}],"max_completion_tokens":6}`)
	var cr Response
	if code != 200 || json.Unmarshal(b, &cr) != nil || len(cr.Choices) != 1 || cr.Choices[0].Message == nil {
		t.Fatalf("chat: %d %s", code, b)
	}
	if m := cr.Choices[0].Message; m.Role != "assistant" || m.Content != TokenText(ids) || cr.Object != "chat.completion" {
		t.Errorf("chat message %+v, want %q", m, TokenText(ids))
	}
}

// events reads a server-sent event stream's data lines.
func events(t *testing.T, r io.Reader) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

func TestServerStreams(t *testing.T) {
	base, _, _ := serveTiny(t)
	for _, tc := range []struct {
		name, path, body string
		usageChunk       bool
	}{
		{"completions", "/v1/completions", `{"prompt":[1,2,3],"max_tokens":5,"stream":true,"stream_options":{"include_usage":true}}`, true},
		{"completions, usage on the last token", "/v1/completions", `{"prompt":[1,2,3],"max_tokens":5,"stream":true}`, false},
		{"chat", "/v1/chat/completions", `{"messages":[{"role":"user","content":[1,2,3]}],"max_tokens":5,"stream":true,"stream_options":{"include_usage":true}}`, true},
	} {
		resp, err := http.Post(base+tc.path, "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
			t.Fatalf("%s: %d %s", tc.name, resp.StatusCode, ct)
		}
		ev := events(t, resp.Body)
		resp.Body.Close()
		want := 5 + 1 // a chunk per token, [DONE]
		if tc.usageChunk {
			want++
		}
		if len(ev) != want || ev[len(ev)-1] != "[DONE]" {
			t.Fatalf("%s: events %q", tc.name, ev)
		}
		var last Response
		for i, d := range ev[:5] {
			var r Response
			if err := json.Unmarshal([]byte(d), &r); err != nil || len(r.Choices) != 1 || len(r.Choices[0].TokenIDs) != 1 {
				t.Fatalf("%s: chunk %d %s", tc.name, i, d)
			}
			fin := r.Choices[0].FinishReason
			if (fin != nil) != (i == 4) {
				t.Errorf("%s: chunk %d finish_reason %v", tc.name, i, fin)
			}
			if tc.path == "/v1/chat/completions" && (r.Choices[0].Delta == nil || (r.Choices[0].Delta.Role == "assistant") != (i == 0)) {
				t.Errorf("%s: chunk %d delta %+v", tc.name, i, r.Choices[0].Delta)
			}
			last = r
		}
		usage := last.Usage
		if tc.usageChunk {
			var r Response
			json.Unmarshal([]byte(ev[5]), &r)
			if len(r.Choices) != 0 || last.Usage != nil {
				t.Errorf("%s: usage chunk %s after %+v", tc.name, ev[5], last)
			}
			usage = r.Usage
		}
		if usage == nil || usage.CompletionTokens != 5 || usage.PromptTokens != 3 {
			t.Errorf("%s: usage %+v", tc.name, usage)
		}
	}
}

func TestServerRefuses(t *testing.T) {
	base, s, _ := serveTiny(t)
	for _, tc := range []struct {
		path, body string
		code       int
		want       string
	}{
		{"/v1/completions", `{"prompt":"Hello there"}`, 400, "no tokenizer"},
		{"/v1/completions", `{"prompt":["Hello"]}`, 400, "no tokenizer"},
		{"/v1/completions", `{"prompt":[[1,2],[3]]}`, 400, "one prompt per request"},
		{"/v1/completions", `{"prompt":[1,2],"n":2}`, 400, "one completion per request"},
		{"/v1/completions", `{"prompt":[1,2],"max_tokens":0}`, 400, "at least 1"},
		{"/v1/completions", `{"prompt":[1,2],"max_tokens":95}`, 400, "--max-seq-len"},
		// So large that prompt plus max_tokens overflows an int.
		{"/v1/completions", `{"prompt":[1,2],"max_tokens":9223372036854775807}`, 400, "--max-seq-len"},
		{"/v1/completions", `{"prompt":[1,99999999]}`, 400, "vocabulary"},
		{"/v1/completions", `{"prompt":[]}`, 400, "empty"},
		{"/v1/completions", `{"model":"llama","prompt":[1]}`, 404, `serves "tiny-llama"`},
		{"/v1/completions", `{"prompt":[1]`, 400, "not a JSON request"},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"Hello"}]}`, 400, "messages[0].content"},
		{"/v1/chat/completions", `{"messages":[]}`, 400, "at least one message"},
		{"/v1/embeddings", `{}`, 404, "no route"},
	} {
		code, b := post(t, base+tc.path, tc.body)
		var eb ErrorBody
		if code != tc.code || json.Unmarshal(b, &eb) != nil || !strings.Contains(eb.Error.Message, tc.want) {
			t.Errorf("%s %s: %d %s, want %d with %q", tc.path, tc.body, code, b, tc.code, tc.want)
		}
	}
	resp, err := http.Get(base + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var ml ModelList
	json.NewDecoder(resp.Body).Decode(&ml)
	resp.Body.Close()
	if len(ml.Data) != 1 || ml.Data[0].ID != "tiny-llama" || ml.Data[0].MaxModelLen != 96 {
		t.Errorf("models %+v", ml)
	}
	health := func() int {
		resp, err := http.Get(base + "/health")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// 503 while the engine warms its batch sizes (it may still be at it on
	// a loaded machine), then 200.
	c := health()
	for deadline := time.Now().Add(30 * time.Second); c == 503 && time.Now().Before(deadline); c = health() {
		time.Sleep(20 * time.Millisecond)
	}
	if c != 200 {
		t.Errorf("health %d, want 200 once warm", c)
	}
	s.Drain()
	if c := health(); c != 503 {
		t.Errorf("draining: health %d, want 503", c)
	}
	if code, b := post(t, base+"/v1/completions", `{"prompt":[1]}`); code != 503 || !strings.Contains(string(b), "shutting down") {
		t.Errorf("draining: %d %s", code, b)
	}
}

func TestServerDrainsInFlight(t *testing.T) {
	e, err := engine.New(context.Background(), engine.Config{Model: "tiny-llama", BatchSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	s := NewServer(e.(engine.Server), ServerOptions{Model: "m", MaxSeqLen: 600, Vocab: e.Model().Vocab})
	ran := make(chan error, 1)
	go func() { ran <- s.Run(context.Background()) }()
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	resp, err := http.Post(hs.URL+"/v1/completions", "application/json", strings.NewReader(`{"prompt":[1,2],"max_tokens":400,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	// The request is in flight (its headers came with its first token):
	// a graceful shutdown finishes it.
	srv := hs.Config
	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(context.Background()) }()
	ev := events(t, resp.Body)
	resp.Body.Close()
	if len(ev) != 401 || ev[400] != "[DONE]" {
		t.Errorf("%d events, the last %q; want 400 tokens and [DONE]", len(ev), ev[len(ev)-1])
	}
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
	s.Close()
	select {
	case err := <-ran:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the engine did not stop after Close")
	}
}

// warmingEngine sizes itself only when released, as an engine warming
// its decode batch sizes does.
type warmingEngine struct{ release chan struct{} }

func (w warmingEngine) Serve(ctx context.Context, in <-chan *engine.Submission, o engine.ServeOptions) error {
	<-w.release
	o.Sized(engine.Sizing{Slots: 1, BatchSize: 1, MaxSeqLen: o.MaxSeqLen})
	for range in {
	}
	return nil
}

// TestHealthWaitsForWarmUp: /health answers 503 until the engine has
// sized and warmed itself, so that a load generator's readiness probe
// does not start the clock on the warm-up.
func TestHealthWaitsForWarmUp(t *testing.T) {
	w := warmingEngine{release: make(chan struct{})}
	var heard []engine.Sizing
	s := NewServer(w, ServerOptions{Model: "m", MaxSeqLen: 32, Vocab: 100, Sized: func(z engine.Sizing) { heard = append(heard, z) }})
	ran := make(chan error, 1)
	go func() { ran <- s.Run(context.Background()) }()
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	status := func() (int, string) {
		resp, err := http.Get(hs.URL + "/health")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if c, b := status(); c != http.StatusServiceUnavailable || !strings.Contains(b, "warming up") {
		t.Errorf("before the engine sized itself: %d %s", c, b)
	}
	close(w.release)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c, _ := status(); c == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("/health never became ready")
		}
		time.Sleep(5 * time.Millisecond)
	}
	s.Close()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	if len(heard) != 1 || heard[0].MaxSeqLen != 32 {
		t.Errorf("ServerOptions.Sized heard %+v", heard)
	}
}
