package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xrun-dev/xrun/engine/openai"
)

// freeAddr is a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return "127.0.0.1:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// syncBuffer is a bytes.Buffer written by the server's logger while the
// test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestServe runs xrun serve in-process on the cpu engine, loads it over
// loopback with the openai client, and stops it as SIGINT would: a
// graceful shutdown that finishes what is in flight and exits 0.
func TestServe(t *testing.T) {
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr syncBuffer
	gs := &globalState{Stdin: strings.NewReader(""), Stdout: &bytes.Buffer{}, Stderr: &stderr,
		Getenv: func(string) string { return "" }, Environ: func() []string { return nil }, Executable: "xrun"}
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, gs, []string{"serve", "--model", "tiny-llama", "--engine", "cpu", "--batch-size", "4", "--max-seq-len", "128", "--listen", addr})
	}()
	base := "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(base + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		select {
		case c := <-code:
			t.Fatalf("xrun serve exited %d before it was ready:\n%s", c, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("xrun serve not ready:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cl := &openai.Client{BaseURL: base + "/v1", Model: "tiny-llama", HTTP: http.DefaultClient}
	for _, chat := range []bool{false, true} {
		cl.Chat = chat
		tm, err := cl.Do(ctx, []int32{5, 6, 7}, 5)
		if err != nil {
			t.Fatal(err)
		}
		if tm.OutputTokens != 5 || len(tm.Chunks) != 5 || tm.Counted != "usage" {
			t.Errorf("chat %v: %d tokens in %d chunks (counted by %s), want 5 in 5", chat, tm.OutputTokens, len(tm.Chunks), tm.Counted)
		}
	}
	// A long request in flight when the signal comes finishes.
	long := make(chan error, 1)
	go func() {
		tm, err := cl.Do(context.Background(), []int32{1, 2}, 100)
		if err == nil && tm.OutputTokens != 100 {
			t.Errorf("drained request: %d tokens", tm.OutputTokens)
		}
		long <- err
	}()
	time.Sleep(50 * time.Millisecond)
	cancel()
	if err := <-long; err != nil {
		t.Errorf("the request in flight at shutdown: %v", err)
	}
	if c := <-code; c != 0 {
		t.Errorf("exit %d after a graceful shutdown, want 0:\n%s", c, stderr.String())
	}
	for _, want := range []string{"xrun serve: ready", "shutting down", "xrun serve: stopped"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, stderr.String())
		}
	}
}

func TestServeUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve"}, "--model: required"},
		{[]string{"serve", "--model", "tiny-llama", "--engine", "trtllm"}, "--engine"},
		{[]string{"serve", "--model", "no-such-model", "--engine", "cpu"}, "no-such-model"},
		{[]string{"serve", "--model", "tiny-llama", "--engine", "cpu", "--max-seq-len", "-1"}, "--max-seq-len"},
		{[]string{"serve", "--model", "tiny-llama", "--engine", "cpu", "--drain", "-1s"}, "--drain"},
	} {
		r := runCLI(t, nil, tc.args...)
		if r.code != exitBadInput || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
}
