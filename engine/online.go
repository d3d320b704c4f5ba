package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/xrun-dev/xrun/datasets"
	"github.com/xrun-dev/xrun/engine/model"
)

// Server is an engine fed requests continuously, as an HTTP server feeds
// it (xrun serve): the in-flight batching scheduler admits each request
// when it comes, between iterations, and idles while none is in flight.
// The built-in engine implements it.
type Server interface {
	// Serve runs until in is closed and every request taken from it has
	// its last token (a graceful shutdown drains), or ctx ends: then the
	// requests not finished get an error. Requests must fit o.MaxSeqLen
	// (prompt plus output) and the model's vocabulary; one that does not
	// is refused through its Err.
	Serve(ctx context.Context, in <-chan *Submission, o ServeOptions) error
}

// ServeOptions size a served engine.
type ServeOptions struct {
	// MaxSeqLen is the longest prompt plus output a request may have
	// (the KV cache is sized for BatchSize of them); 0: the model's
	// positions.
	MaxSeqLen int
	// Sized, if set, is told how the engine sized itself before the first
	// request is admitted: a server says so, since a long MaxSeqLen on a
	// cache of whole-sequence slots admits fewer requests than BatchSize.
	Sized func(Sizing)
}

// Sizing is how many requests a served engine keeps in flight.
type Sizing struct {
	// Slots is the most requests in flight: BatchSize, or fewer where the
	// KV cache cannot hold BatchSize requests of MaxSeqLen tokens.
	Slots, BatchSize, MaxSeqLen int
}

// Token is one generated token as the engine read it back.
type Token struct {
	ID    int32
	Index int // 0 for the first
	Time  time.Time
}

// Submission is one request to a served engine. Its generated tokens come
// on Tokens, in order, which is closed after the last one (OutputTokens of
// them, EOS ignored) or when the engine stopped first (Err says why).
// Tokens has room for every token, so a slow reader never holds the
// engine back.
type Submission struct {
	InputIDs     []int32
	OutputTokens int
	Tokens       <-chan Token
	tokens       chan Token
	err          error
	// Submitted is when the engine took it.
	Submitted time.Time
}

// NewSubmission makes a request for Serve.
func NewSubmission(inputIDs []int32, outputTokens int) *Submission {
	ch := make(chan Token, max(outputTokens, 0))
	return &Submission{InputIDs: inputIDs, OutputTokens: outputTokens, Tokens: ch, tokens: ch}
}

// Err is why the request ended before its last token; read it once Tokens
// is closed.
func (s *Submission) Err() error { return s.err }

func (s *Submission) fail(err error) {
	s.err = err
	close(s.tokens)
}

// ErrStopped ends the requests a stopped Serve had not finished.
var ErrStopped = errors.New("the engine stopped before the request finished")

// Serve feeds the engine from in; see Server.
func (e *engine) Serve(ctx context.Context, in <-chan *Submission, o ServeOptions) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	maxLen := o.MaxSeqLen
	if maxLen <= 0 || maxLen > e.mc.MaxPos {
		maxLen = e.mc.MaxPos
	}
	// As Run: no more requests in flight than the KV cache holds whole,
	// each sized for the longest request allowed.
	if err := e.reserveActivations(e.cfg.MaxNumTokens, e.cfg.BatchSize); err != nil {
		return err
	}
	fit := e.cfg.BatchSize
	if kb, ok := e.be.(model.KVBudget); ok {
		fit = kb.MaxKVSlots(e.m.KVConfig(0, maxLen))
	}
	if fit < 1 {
		return &ParamError{Field: "max_seq_len", Value: fmt.Sprint(maxLen),
			Msg: fmt.Sprintf("a request this long does not fit the %s backend's KV-cache budget; serve shorter requests", e.cfg.Backend)}
	}
	slots := min(e.cfg.BatchSize, fit)
	capa := model.Capacity{MaxTokens: e.cfg.MaxNumTokens, Slots: slots, MaxLen: maxLen}
	capa.MaxLogitRows = min(slots, capa.MaxTokens)
	if err := e.m.Reserve(capa); err != nil {
		return e.reserveError(err)
	}
	if err := e.warmShapes(ctx, capa, nil); err != nil {
		return err
	}
	e.m.ResetRouting()
	if o.Sized != nil {
		o.Sized(Sizing{Slots: slots, BatchSize: e.cfg.BatchSize, MaxSeqLen: maxLen})
	}
	st := &runState{e: e, t0: time.Now(), batch: &model.Batch{}, next: make([]int32, capa.MaxLogitRows), slots: slots, serving: true}
	fd := &serverFeed{in: in, t0: st.t0, maxLen: maxLen, vocab: e.mc.Vocab, admitted: map[*datasets.Request]*Submission{}}
	err := st.run(ctx, fd, false)
	if err == nil {
		return nil
	}
	stop := fmt.Errorf("%w: %v", ErrStopped, err)
	fd.abort(stop)
	return err
}

// serverFeed takes a server's requests as they come.
type serverFeed struct {
	in       <-chan *Submission
	closed   bool
	queue    []*Submission
	admitted map[*datasets.Request]*Submission
	t0       time.Time
	maxLen   int
	vocab    int
}

// receive takes what has come without waiting.
func (f *serverFeed) receive() {
	for !f.closed {
		select {
		case s, ok := <-f.in:
			if !ok {
				f.closed = true
				return
			}
			f.queue = append(f.queue, s)
		default:
			return
		}
	}
}

func (f *serverFeed) pending() bool {
	f.receive()
	return !f.closed || len(f.queue) > 0
}

func (f *serverFeed) next(now time.Duration) (*datasets.Request, int, time.Duration, bool) {
	f.receive()
	for len(f.queue) > 0 {
		s := f.queue[0]
		f.queue = f.queue[1:]
		if err := f.check(s); err != nil {
			s.fail(err)
			continue
		}
		r := &datasets.Request{InputIDs: s.InputIDs, OutputTokens: s.OutputTokens}
		s.Submitted = f.t0.Add(now)
		f.admitted[r] = s
		return r, -1, now, true
	}
	return nil, 0, 0, false
}

// check refuses what the engine cannot run (the server checks first and
// answers with a clearer message; this keeps a bad request from reaching
// the model).
func (f *serverFeed) check(s *Submission) error {
	switch {
	case len(s.InputIDs) == 0 || s.OutputTokens < 1:
		return fmt.Errorf("a request needs at least one prompt token and one output token (has %d and %d)", len(s.InputIDs), s.OutputTokens)
	case len(s.InputIDs)+s.OutputTokens > f.maxLen:
		return fmt.Errorf("%d prompt + %d output tokens exceed the %d the engine serves", len(s.InputIDs), s.OutputTokens, f.maxLen)
	}
	for _, id := range s.InputIDs {
		if id < 0 || int(id) >= f.vocab {
			return fmt.Errorf("token id %d is outside the model's vocabulary [0, %d)", id, f.vocab)
		}
	}
	return nil
}

func (f *serverFeed) wait(ctx context.Context, _ time.Duration) error {
	if len(f.queue) > 0 || f.closed {
		return ctx.Err()
	}
	select {
	case s, ok := <-f.in:
		if !ok {
			f.closed = true
		} else {
			f.queue = append(f.queue, s)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (f *serverFeed) token(a *inflight, now time.Duration) {
	s := f.admitted[a.req]
	if s == nil {
		return
	}
	n := len(a.out)
	s.tokens <- Token{ID: a.out[n-1], Index: n - 1, Time: f.t0.Add(now)}
	if n == a.req.OutputTokens {
		close(s.tokens)
		delete(f.admitted, a.req)
	}
}

// abort ends every request not finished with err.
func (f *serverFeed) abort(err error) {
	for r, s := range f.admitted {
		s.fail(err)
		delete(f.admitted, r)
	}
	for _, s := range f.queue {
		s.fail(err)
	}
	f.queue = nil
}
