// Package openaitest is a fake OpenAI-compatible server for tests of the
// openai engine driver: its latencies are set, not measured, so that a
// test knows which loads meet an SLO whatever machine runs it. A request
// gets its first token TTFT × (the requests in flight when it arrived,
// itself included) after it arrived, then a token every TPOT, streamed as
// /v1/completions chunks with the usage last. A request stops counting as
// in flight once its last token is out, before its stream ends, so that a
// closed loop's next request never sees the one it follows: under a
// concurrency of N users every request's TTFT is at most N × TTFT. Die, Fail and Stall make it
// misbehave as broken servers do. Main runs it as a program (a server
// command for the driver to start).
package openaitest

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Server is the fake.
type Server struct {
	TTFT, TPOT time.Duration
	// DieAfter, when > 0, makes the request of that number (1-based)
	// call Die instead of answering.
	DieAfter int
	Die      func()
	// Fail, when set, answers every request with this status and an
	// OpenAI error whose message is FailMessage.
	Fail        int
	FailMessage string
	// Stall holds every request this long before its first token.
	Stall time.Duration

	inFlight atomic.Int64
	served   atomic.Int64
	mu       sync.Mutex
	// Seen are the requests' bodies, in order of arrival.
	Seen []map[string]any
}

// Handler serves /health, /v1/models and /v1/completions.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	mux.HandleFunc("/v1/models", func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, `{"object":"list","data":[{"id":"fake","object":"model"}]}`)
	})
	mux.HandleFunc("/v1/completions", s.complete)
	return mux
}

func (s *Server) complete(w http.ResponseWriter, r *http.Request) {
	n := s.inFlight.Add(1)
	var once sync.Once
	leave := func() { once.Do(func() { s.inFlight.Add(-1) }) }
	defer leave()
	k := s.served.Add(1)
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.Seen = append(s.Seen, body)
	s.mu.Unlock()
	if s.DieAfter > 0 && int(k) >= s.DieAfter && s.Die != nil {
		s.Die()
		return
	}
	if s.Fail != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(s.Fail)
		json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": s.FailMessage, "type": "server_error", "code": s.Fail}})
		return
	}
	maxTokens := 16
	if v, ok := body["max_tokens"].(float64); ok {
		maxTokens = int(v)
	}
	prompt, _ := body["prompt"].([]any)
	wait := func(d time.Duration) bool {
		select {
		case <-time.After(d):
			return true
		case <-r.Context().Done():
			return false
		}
	}
	if !wait(s.Stall + time.Duration(n)*s.TTFT) {
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	for i := range maxTokens {
		if i > 0 && !wait(s.TPOT) {
			return
		}
		fin := "null"
		if i == maxTokens-1 {
			fin = `"length"`
		}
		fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"text_completion\",\"choices\":[{\"index\":0,\"text\":\" %d\",\"finish_reason\":%s}]}\n\n", i, fin)
		if i == maxTokens-1 {
			leave()
		}
		fl.Flush()
	}
	fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"text_completion\",\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d}}\n\n", len(prompt), maxTokens, len(prompt)+maxTokens)
	io.WriteString(w, "data: [DONE]\n\n")
	fl.Flush()
}

// Main runs the fake as a program: --port P (on 127.0.0.1), --ttft and
// --tpot durations, --die-after K (the K-th request prints a CUDA error
// and exits with status 1), --ready-after D (/health answers 503 until
// D has passed). It returns the exit status.
func Main(args []string) int {
	fs := flag.NewFlagSet("openai-fake", flag.ContinueOnError)
	port := fs.String("port", "", "")
	ttft := fs.Duration("ttft", time.Millisecond, "")
	tpot := fs.Duration("tpot", time.Millisecond, "")
	dieAfter := fs.Int("die-after", 0, "")
	readyAfter := fs.Duration("ready-after", 0, "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	l, err := net.Listen("tcp", "127.0.0.1:"+*port)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("INFO: fake server listening on", l.Addr())
	s := &Server{TTFT: *ttft, TPOT: *tpot, DieAfter: *dieAfter, Die: func() {
		fmt.Fprintln(os.Stderr, "Traceback (most recent call last):\nRuntimeError: CUDA error: an illegal memory access was encountered")
		os.Exit(1)
	}}
	ready := time.Now().Add(*readyAfter)
	h := s.Handler()
	err = http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/health") && time.Now().Before(ready) {
			http.Error(w, "loading", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	}))
	fmt.Fprintln(os.Stderr, err)
	return 1
}
