package datasets

import (
	"context"
	"io"
	"math"
	"runtime"
)

// Generator produces a synthetic dataset request by request, identical to
// TensorRT-LLM's prepare_dataset.py for the same parameters. Its memory
// depends on the vocabulary size and the longest request, not on the
// number of requests.
type Generator struct {
	p    Params
	next int

	// Lengths. Input and output lengths are drawn after re-seeding with the
	// same seed, so for norm they share one standard-normal sequence; for
	// unif the bounded draws differ per range, so each side has its own
	// generator.
	gauss          legacyGauss
	unifIn, unifOu *pcg64

	tokens  *tokenSampler
	taskRNG *pyRandom // positioned after every token draw; nil without Rand

	req    Request
	taskID int
}

// NewGenerator validates p and prepares the generator.
func NewGenerator(p Params) (*Generator, error) {
	return newGenerator(context.Background(), p)
}

// cancelTokens is how many token ids a generation draws between two looks
// at its context: a few milliseconds of work, so that an interrupt is
// honoured at once however large the dataset, at no measurable cost.
const cancelTokens = 1 << 16

// newGenerator is NewGenerator, stopping with ctx's error when ctx ends
// while it draws (--rand-task-id draws the whole dataset once up front).
func newGenerator(ctx context.Context, p Params) (*Generator, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	g := &Generator{p: p}
	g.reset()
	if l := p.LoRA; l != nil && l.Rand != nil {
		// prepare_dataset.py draws the task ids with random.randint after
		// all token ids, from the same stream. Running the token draws once
		// without output gives that stream's position, so the ids can be
		// drawn lazily, one per request, in constant memory.
		drawn := 0
		for i := 0; i < p.NumRequests; i++ {
			g.draw()
			if drawn += len(g.req.InputIDs); drawn >= cancelTokens {
				drawn = 0
				if err := ctx.Err(); err != nil {
					return nil, err
				}
			}
		}
		g.taskRNG = g.tokens.r
		g.reset()
	}
	return g, nil
}

// reset seeds every stream for request 0.
func (g *Generator) reset() {
	g.next = 0
	seed := uint64(g.p.Seed)
	switch g.p.Dist {
	case NormDist:
		g.gauss.seed(uint32(seed))
	case UnifDist:
		g.unifIn, g.unifOu = newPCG64(seed), newPCG64(seed)
	}
	r := &pyRandom{}
	r.seed(seed)
	g.tokens = newTokenSampler(r, g.p.VocabSize)
}

// Len is the number of requests the generator produces in all.
func (g *Generator) Len() int { return g.p.NumRequests }

// lengths draws request i's input and output lengths.
func (g *Generator) lengths() (in, out int) {
	if g.p.Dist == NormDist {
		z := g.gauss.gauss()
		return normLength(g.p.InputMean, g.p.InputStdev, z), normLength(g.p.OutputMean, g.p.OutputStdev, z)
	}
	in = int(g.unifIn.integer(int64(g.p.InputMin), int64(g.p.InputMax)))
	out = int(g.unifOu.integer(int64(g.p.OutputMin), int64(g.p.OutputMax)))
	return in, out
}

// normLength is max(1, ceil(loc + scale*z)) as prepare_dataset.py maps
// np.random.normal's values; Validate bounds the result by MaxTokens.
func normLength(mean, stdev int, z float64) int {
	x := float64(mean) + float64(float64(stdev)*z)
	return max(1, int(math.Ceil(x)))
}

// Next returns the next request, or nil after the last one. The request and
// its InputIDs are reused by the following call; copy what must outlive it.
func (g *Generator) Next() *Request {
	if g.next >= g.p.NumRequests {
		return nil
	}
	g.draw()
	g.req.TaskID = g.next
	g.req.LoRATaskID = nil
	if l := g.p.LoRA; l != nil {
		id := l.TaskID
		if l.Rand != nil {
			id = int(g.taskRNG.randint(int64(l.Rand[0]), int64(l.Rand[1])))
		}
		if id != -1 { // -1 means "no LoRA" in prepare_dataset.py
			g.taskID = id
			g.req.LoRATaskID = &g.taskID
		}
	}
	g.next++
	return &g.req
}

// draw fills g.req's lengths and token ids from the length and token streams.
func (g *Generator) draw() {
	in, out := g.lengths()
	if cap(g.req.InputIDs) < in {
		g.req.InputIDs = make([]int32, in, max(in, 2*cap(g.req.InputIDs)))
	}
	ids := g.req.InputIDs[:in]
	g.tokens.draw(ids)
	// gen_random_tokens replaces EOS (while it occurs) by (eos+1) % vocab;
	// Validate guarantees the replacement differs from EOS, so one pass
	// removes every occurrence. An EOS beyond the base vocabulary (Llama-3)
	// never occurs.
	eos := int32(g.p.EOSID)
	repl := int32((g.p.EOSID + 1) % g.p.VocabSize)
	for i, t := range ids {
		if t == eos {
			ids[i] = repl
		}
	}
	g.req.InputIDs = ids
	g.req.OutputTokens = out
}

// LongestRequest finds p's request with the most input plus output tokens
// from the length draws alone (the token ids, the costly part, are never
// drawn): its line in the generated file (1-based) and its lengths.
func LongestRequest(p Params) (Longest, error) {
	if err := p.Validate(); err != nil {
		return Longest{}, err
	}
	g := &Generator{p: p}
	g.reset()
	var l Longest
	for i := range p.NumRequests {
		if in, out := g.lengths(); in+out > l.Input+l.Output {
			l = Longest{Line: i + 1, Input: in, Output: out}
		}
	}
	return l, nil
}

// Generate calls fn for every request of the dataset, in order; the request
// is reused after fn returns.
func Generate(p Params, fn func(*Request) error) error {
	g, err := NewGenerator(p)
	if err != nil {
		return err
	}
	for r := g.Next(); r != nil; r = g.Next() {
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

// GenerateAll returns the whole dataset in memory, for callers (the engine)
// that need every request at once.
func GenerateAll(p Params) ([]Request, error) {
	var out []Request
	err := Generate(p, func(r *Request) error {
		c := *r
		c.InputIDs = append([]int32(nil), r.InputIDs...)
		if r.LoRATaskID != nil {
			id := *r.LoRATaskID
			c.LoRATaskID = &id
		}
		out = append(out, c)
		return nil
	})
	return out, err
}

// Write generates the dataset and writes it to w in trtllm-bench's line
// format, streaming: memory is bounded by a few batches of token ids, not by
// the number of requests. Drawing token ids and formatting them cost about
// the same, so with two or more CPUs they run in two goroutines connected
// by a small ring of batches.
func Write(w io.Writer, p Params) error {
	return WriteContext(context.Background(), w, p)
}

// WriteContext is Write, stopped when ctx ends: it then returns ctx's error
// (context.Canceled on an interrupt) within a few milliseconds, whatever
// the size of the dataset, having written part of it to w. Callers that
// write a file write it through WriteFileAtomic, which removes the part.
func WriteContext(ctx context.Context, w io.Writer, p Params) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	g, err := newGenerator(ctx, p)
	if err != nil {
		return err
	}
	jw := NewWriter(w)
	if p.LoRA != nil {
		jw.LoRADir = p.LoRA.Dir
	}
	if runtime.GOMAXPROCS(0) < 2 {
		drawn := 0
		for r := g.Next(); r != nil; r = g.Next() {
			if drawn += len(r.InputIDs); drawn >= cancelTokens {
				drawn = 0
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			if err := jw.Write(r); err != nil {
				return err
			}
		}
		return jw.Flush()
	}
	return writePipelined(ctx, g, jw)
}

// batchTokens is how many token ids a batch collects before it is handed
// to the formatter (256 KiB of ids).
const batchTokens = 1 << 16

// batch carries consecutive requests from the generator to the formatter.
type batch struct {
	ids  []int32 // the requests' token ids, back to back
	reqs []batchReq
}

type batchReq struct {
	taskID, inputs, outputs int
	lora                    int
	hasLoRA                 bool
}

func writePipelined(ctx context.Context, g *Generator, jw *Writer) error {
	const nBatches = 4
	free := make(chan *batch, nBatches)
	full := make(chan *batch, nBatches)
	done := make(chan struct{}) // closed when the formatter gives up
	for range nBatches {
		free <- &batch{ids: make([]int32, 0, batchTokens)}
	}
	// complete is set when the generator handed over every request; read
	// once full is closed (the close orders it).
	complete := false
	go func() {
		defer close(full)
		b := <-free
		for r := g.Next(); r != nil; r = g.Next() {
			m := batchReq{taskID: r.TaskID, inputs: len(r.InputIDs), outputs: r.OutputTokens}
			if r.LoRATaskID != nil {
				m.lora, m.hasLoRA = *r.LoRATaskID, true
			}
			b.ids = append(b.ids, r.InputIDs...)
			b.reqs = append(b.reqs, m)
			if len(b.ids) < batchTokens {
				continue
			}
			select {
			case full <- b:
			case <-done:
				return
			case <-ctx.Done():
				return
			}
			select {
			case b = <-free:
			case <-done:
				return
			case <-ctx.Done():
				return
			}
			b.ids, b.reqs = b.ids[:0], b.reqs[:0]
		}
		if len(b.reqs) > 0 {
			select {
			case full <- b:
			case <-done:
				return
			case <-ctx.Done():
				return
			}
		}
		complete = true
	}()
	var (
		err    error
		req    Request
		loraID int
	)
	for b := range full {
		if err == nil {
			// A batch is batchTokens (= cancelTokens) ids: a look at ctx
			// per batch stops the formatter, and the generator, promptly.
			if err = ctx.Err(); err != nil {
				close(done)
			}
		}
		if err == nil {
			off := 0
			for _, m := range b.reqs {
				req = Request{TaskID: m.taskID, InputIDs: b.ids[off : off+m.inputs], OutputTokens: m.outputs}
				if m.hasLoRA {
					loraID = m.lora
					req.LoRATaskID = &loraID
				}
				off += m.inputs
				if err = jw.Write(&req); err != nil {
					close(done) // the generator stops; keep draining
					break
				}
			}
		}
		free <- b
	}
	if err == nil && !complete {
		// The generator stopped for ctx after the formatter's last look.
		err = ctx.Err()
	}
	if err != nil {
		return err
	}
	return jw.Flush()
}
