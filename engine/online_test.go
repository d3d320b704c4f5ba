package engine

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
)

func errorsIsCanceled(err error) bool { return errors.Is(err, context.Canceled) }

func serveEngine(t *testing.T) (Server, Engine) {
	t.Helper()
	e := newEngine(t, Config{Model: "tiny-llama", BatchSize: 3, MaxNumTokens: 16})
	s, ok := e.(Server)
	if !ok {
		t.Fatal("the built-in engine is no Server")
	}
	return s, e
}

func TestServeStreamsTokens(t *testing.T) {
	s, e := serveEngine(t)
	reqs := mixedRequests(7)
	// The same requests offline, for the tokens they must get.
	want, err := e.Run(context.Background(), reqs, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	in := make(chan *Submission)
	served := make(chan error, 1)
	go func() { served <- s.Serve(context.Background(), in, ServeOptions{MaxSeqLen: 64}) }()
	subs := make([]*Submission, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		subs[i] = NewSubmission(r.InputIDs, r.OutputTokens)
		wg.Add(1)
		go func() {
			defer wg.Done()
			in <- subs[i]
		}()
	}
	bad := NewSubmission([]int32{1, 1 << 30}, 2)
	in <- bad
	wg.Wait()
	for i, sub := range subs {
		var ids []int32
		var last Token
		for tok := range sub.Tokens {
			if tok.Index != len(ids) || tok.Time.Before(last.Time) || tok.Time.Before(sub.Submitted) {
				t.Errorf("request %d: token %+v after %+v (submitted %v)", i, tok, last, sub.Submitted)
			}
			ids = append(ids, tok.ID)
			last = tok
		}
		if sub.Err() != nil || !slices.Equal(ids, want.Requests[i].OutputIDs) {
			t.Errorf("request %d: tokens %v (err %v), offline %v", i, ids, sub.Err(), want.Requests[i].OutputIDs)
		}
	}
	for range bad.Tokens {
		t.Error("a token for a refused request")
	}
	if err := bad.Err(); err == nil || !strings.Contains(err.Error(), "vocabulary") {
		t.Errorf("refused request: %v", err)
	}
	close(in)
	if err := <-served; err != nil {
		t.Fatalf("Serve after its input closed: %v", err)
	}
}

func TestServeStops(t *testing.T) {
	s, _ := serveEngine(t)
	in := make(chan *Submission, 1)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, in, ServeOptions{}) }()
	// Long enough to be in flight when the engine is stopped, however
	// late this goroutine runs after the first token: seconds of decode
	// (the tiny model's positions allow 4096).
	const long = 3000
	sub := NewSubmission([]int32{1, 2, 3}, long)
	in <- sub
	<-sub.Tokens
	cancel()
	if err := <-served; !errors.Is(err, context.Canceled) {
		t.Fatalf("Serve: %v, want context.Canceled", err)
	}
	n := 1
	for range sub.Tokens {
		n++
	}
	if !errors.Is(sub.Err(), ErrStopped) || n >= long {
		t.Errorf("after %d tokens: %v, want ErrStopped", n, sub.Err())
	}
}

// TestServeSized: a served engine says how many requests it keeps in
// flight, fewer than BatchSize where whole-sequence slots of MaxSeqLen do
// not fit the KV budget (a server's --max-seq-len left at the model's
// positions).
func TestServeSized(t *testing.T) {
	sw := DefaultSwitches()
	sw.KVPaged = false
	for _, c := range []struct {
		budget int64
		want   Sizing
	}{
		{0, Sizing{Slots: 8, BatchSize: 8, MaxSeqLen: 48}},
		// tiny-llama: 512 bytes of K and V a position, 24 KiB a 48-slot.
		{2*24<<10 + 100, Sizing{Slots: 2, BatchSize: 8, MaxSeqLen: 48}},
	} {
		e := newEngine(t, Config{Model: "tiny-llama", BatchSize: 8, KVCacheBytes: c.budget, Switches: &sw})
		var got []Sizing
		in := make(chan *Submission)
		close(in)
		err := e.(Server).Serve(context.Background(), in, ServeOptions{MaxSeqLen: 48, Sized: func(z Sizing) { got = append(got, z) }})
		if err != nil || len(got) != 1 || got[0] != c.want {
			t.Errorf("budget %d: sized %+v (err %v), want %+v", c.budget, got, err, c.want)
		}
	}
}
