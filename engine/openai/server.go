package openai

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xrun-dev/xrun/engine"
)

// ServerOptions configure a Server.
type ServerOptions struct {
	// Model is the name the server serves (GET /v1/models); requests
	// naming another model are refused, requests naming none are served.
	Model string
	// MaxSeqLen is the longest prompt plus max_tokens served; Vocab the
	// model's vocabulary (token ids must be below it).
	MaxSeqLen int
	Vocab     int
	// Sized, if set, hears how many requests the engine keeps in flight
	// (engine.ServeOptions.Sized).
	Sized func(engine.Sizing)
	// Now is the clock of the responses' created field; nil: time.Now.
	Now func() time.Time
}

// DefaultMaxTokens is max_tokens when a request gives none (OpenAI's).
const DefaultMaxTokens = 16

// maxBody bounds a request body: a prompt of a million token ids.
const maxBody = 16 << 20

// Server is the built-in engine behind the OpenAI-compatible API.
type Server struct {
	eng  engine.Server
	o    ServerOptions
	in   chan *engine.Submission
	seq  atomic.Int64
	done chan struct{} // closed when the engine stopped
	err  error         // why, once done is closed

	mu     sync.RWMutex
	closed bool
	drain  atomic.Bool
	// sized is set once the engine has sized and warmed itself: /health
	// says ready from then on, as vLLM's does after its graph capture.
	sized atomic.Bool
}

// NewServer puts e behind the API; Run runs it.
func NewServer(e engine.Server, o ServerOptions) *Server {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Server{eng: e, o: o, in: make(chan *engine.Submission), done: make(chan struct{})}
}

// Run serves requests on the engine until Close has been called and the
// requests in flight are done, or ctx ends (a hard stop: what is in
// flight fails).
func (s *Server) Run(ctx context.Context) error {
	sized := func(z engine.Sizing) {
		s.sized.Store(true)
		if s.o.Sized != nil {
			s.o.Sized(z)
		}
	}
	err := s.eng.Serve(ctx, s.in, engine.ServeOptions{MaxSeqLen: s.o.MaxSeqLen, Sized: sized})
	s.err = err
	close(s.done)
	return err
}

// Drain makes the server refuse new requests (503, and /health says so)
// while those in flight finish: the first step of a graceful shutdown.
func (s *Server) Drain() { s.drain.Store(true) }

// Close drains and tells the engine no more requests come: Run returns
// once those in flight are done. Call it after the HTTP server has shut
// down, so that no handler still submits.
func (s *Server) Close() {
	s.Drain()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.in)
	}
}

// Handler is the API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/health", s.health)
	mux.HandleFunc("/v1/models", s.models)
	mux.HandleFunc("/v1/completions", s.completions)
	mux.HandleFunc("/v1/chat/completions", s.chat)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "invalid_request_error", "", fmt.Sprintf("no route %s %s; xrun serve has POST /v1/completions, POST /v1/chat/completions, GET /v1/models and GET /health", r.Method, r.URL.Path))
	})
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, typ, param, msg string) {
	writeJSON(w, status, ErrorBody{Error: ErrorDetail{Message: msg, Type: typ, Param: param, Code: status}})
}

func (s *Server) stopped() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method != http.MethodGet && r.Method != http.MethodHead:
		writeError(w, http.StatusMethodNotAllowed, "invalid_request_error", "", "GET /health")
	case s.stopped():
		writeError(w, http.StatusServiceUnavailable, "server_error", "", "the engine stopped: "+errText(s.err))
	case s.drain.Load():
		writeError(w, http.StatusServiceUnavailable, "server_error", "", "the server is shutting down")
	case !s.sized.Load():
		// A load generator that starts timing at ready must not time
		// the warm-up (requests sent now wait for it).
		writeError(w, http.StatusServiceUnavailable, "server_error", "", "the engine is warming up (its decode batch sizes: XRUN_WARM_SHAPES)")
	default:
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "ok\n")
	}
}

func errText(err error) string {
	if err == nil {
		return "its input closed"
	}
	return err.Error()
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		writeError(w, http.StatusMethodNotAllowed, "invalid_request_error", "", "GET /v1/models")
		return
	}
	writeJSON(w, http.StatusOK, ModelList{Object: "list", Data: []Model{{ID: s.o.Model, Object: "model", Created: s.o.Now().Unix(), OwnedBy: "xrun", MaxModelLen: s.o.MaxSeqLen}}})
}

// job is one request as the handlers share it.
type job struct {
	ids       []int32
	maxTokens int
	stream    bool
	usage     bool // stream_options.include_usage
	chat      bool
}

// decode reads a request body into v, answering the client itself when it
// cannot.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if r.Method != http.MethodPost {
		writeError(w, http.StatusMethodNotAllowed, "invalid_request_error", "", "POST "+r.URL.Path)
		return false
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "the body is not a JSON request: "+err.Error())
		return false
	}
	return true
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	var req CompletionRequest
	if !decode(w, r, &req) {
		return
	}
	ids, msg := ParseTokenIDs(req.Prompt, false)
	if msg != "" {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "prompt", "prompt: "+msg)
		return
	}
	j := &job{ids: ids, stream: req.Stream, usage: req.StreamOptions != nil && req.StreamOptions.IncludeUsage}
	if !s.check(w, req.Model, req.N, req.MaxTokens, j) {
		return
	}
	s.serve(w, r, j)
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	var req ChatRequest
	if !decode(w, r, &req) {
		return
	}
	if len(req.Messages) == 0 {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "messages", "messages: expected at least one message")
		return
	}
	var ids []int32
	for i, m := range req.Messages {
		part, msg := ParseTokenIDs(m.Content, true)
		if msg != "" {
			writeError(w, http.StatusBadRequest, "invalid_request_error", "messages", fmt.Sprintf("messages[%d].content: %s", i, msg))
			return
		}
		ids = append(ids, part...)
	}
	maxTokens := req.MaxCompletionTokens
	if maxTokens == nil {
		maxTokens = req.MaxTokens
	}
	j := &job{ids: ids, stream: req.Stream, usage: req.StreamOptions != nil && req.StreamOptions.IncludeUsage, chat: true}
	if !s.check(w, req.Model, req.N, maxTokens, j) {
		return
	}
	s.serve(w, r, j)
}

// check validates what both endpoints share.
func (s *Server) check(w http.ResponseWriter, model string, n, maxTokens *int, j *job) bool {
	bad := func(param, format string, args ...any) bool {
		writeError(w, http.StatusBadRequest, "invalid_request_error", param, fmt.Sprintf(format, args...))
		return false
	}
	if model != "" && model != s.o.Model {
		writeError(w, http.StatusNotFound, "invalid_request_error", "model", fmt.Sprintf("the model %q does not exist; this server serves %q", model, s.o.Model))
		return false
	}
	if n != nil && *n != 1 {
		return bad("n", "n: %d: xrun serve generates one completion per request", *n)
	}
	j.maxTokens = DefaultMaxTokens
	if maxTokens != nil {
		j.maxTokens = *maxTokens
	}
	switch {
	case j.maxTokens < 1:
		return bad("max_tokens", "max_tokens: %d: expected at least 1 (xrun serve generates exactly max_tokens tokens)", j.maxTokens)
	case len(j.ids) == 0:
		return bad("prompt", "the prompt is empty; expected at least one token id")
	case j.maxTokens > s.o.MaxSeqLen-len(j.ids): // not the sum: a huge max_tokens would overflow it
		return bad("max_tokens", "the prompt's %d tokens and max_tokens %d exceed the %d tokens a request may have (xrun serve --max-seq-len)", len(j.ids), j.maxTokens, s.o.MaxSeqLen)
	}
	for _, id := range j.ids {
		if id < 0 || int(id) >= s.o.Vocab {
			return bad("prompt", "token id %d is outside the model's vocabulary [0, %d)", id, s.o.Vocab)
		}
	}
	return true
}

// submit hands a request to the engine; false when it was answered
// already (the server is shutting down, the client left).
func (s *Server) submit(w http.ResponseWriter, r *http.Request, sub *engine.Submission) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed || s.drain.Load() {
		writeError(w, http.StatusServiceUnavailable, "server_error", "", "the server is shutting down")
		return false
	}
	select {
	case s.in <- sub:
		return true
	case <-s.done:
		writeError(w, http.StatusServiceUnavailable, "server_error", "", "the engine stopped: "+errText(s.err))
	case <-r.Context().Done():
	}
	return false
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request, j *job) {
	sub := engine.NewSubmission(j.ids, j.maxTokens)
	if !s.submit(w, r, sub) {
		return
	}
	seq := strconv.FormatInt(s.seq.Add(1), 10)
	id, object := "cmpl-"+seq, "text_completion"
	if j.chat {
		id, object = "chatcmpl-"+seq, "chat.completion"
	}
	created := s.o.Now().Unix()
	usage := func(n int) *Usage {
		return &Usage{PromptTokens: len(j.ids), CompletionTokens: n, TotalTokens: len(j.ids) + n}
	}
	if !j.stream {
		var out []int32
		for t := range sub.Tokens {
			out = append(out, t.ID)
		}
		if err := sub.Err(); err != nil {
			writeError(w, http.StatusInternalServerError, "server_error", "", err.Error())
			return
		}
		length := "length"
		c := Choice{TokenIDs: out, FinishReason: &length}
		text := TokenText(out)
		if j.chat {
			c.Message = &ChatContent{Role: "assistant", Content: text}
		} else {
			c.Text = &text
		}
		writeJSON(w, http.StatusOK, Response{ID: id, Object: object, Created: created, Model: s.o.Model, Choices: []Choice{c}, Usage: usage(len(out))})
		return
	}
	if j.chat {
		object = "chat.completion.chunk"
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	bw := bufio.NewWriter(w)
	event := func(v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		bw.WriteString("data: ")
		bw.Write(b)
		bw.WriteString("\n\n")
		if err := bw.Flush(); err != nil {
			return err
		}
		if flusher != nil {
			flusher.Flush()
		}
		return nil
	}
	n := 0
	for t := range sub.Tokens {
		n++
		text := TokenText([]int32{t.ID})
		c := Choice{TokenIDs: []int32{t.ID}}
		if j.chat {
			c.Delta = &ChatContent{Content: text}
			if t.Index == 0 {
				c.Delta.Role = "assistant"
			}
		} else {
			c.Text = &text
		}
		chunk := Response{ID: id, Object: object, Created: created, Model: s.o.Model, Choices: []Choice{c}}
		if t.Index == j.maxTokens-1 {
			length := "length"
			chunk.Choices[0].FinishReason = &length
			if !j.usage {
				chunk.Usage = usage(n)
			}
		}
		if event(chunk) != nil {
			// The client left; the engine finishes the request unread.
			return
		}
	}
	if err := sub.Err(); err != nil {
		event(ErrorBody{Error: ErrorDetail{Message: err.Error(), Type: "server_error", Code: http.StatusInternalServerError}})
		return
	}
	if j.usage {
		event(Response{ID: id, Object: object, Created: created, Model: s.o.Model, Choices: []Choice{}, Usage: usage(n)})
	}
	bw.WriteString("data: [DONE]\n\n")
	bw.Flush()
	if flusher != nil {
		flusher.Flush()
	}
}
