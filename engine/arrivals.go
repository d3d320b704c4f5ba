package engine

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/xrun-dev/xrun/datasets"
)

// Load is how a pass's requests arrive. The zero value is trtllm-bench's
// offline mode: every request submitted at once. RequestRate spaces their
// arrivals by gamma-distributed gaps of mean 1/RequestRate and shape
// Burstiness (1: a Poisson process; below 1 burstier, above 1 more
// regular: the coefficient of variation of the gaps is 1/sqrt(Burstiness)),
// as vLLM's `bench serve --request-rate --burstiness`. Concurrency is a
// closed loop of that many users (trtllm-bench --concurrency): a request is
// submitted only while fewer than Concurrency are in the system, the next
// one when one completes. Both together: requests arrive at the rate, and
// wait for a free user.
type Load struct {
	// RequestRate is in requests per second; 0 means infinite (offline).
	RequestRate float64 `json:"request_rate,omitempty"`
	// Burstiness is the gamma shape of the gaps; 0 means 1.
	Burstiness float64 `json:"burstiness,omitempty"`
	// Concurrency is the number of users of a closed loop; 0: unlimited.
	Concurrency int `json:"concurrency,omitempty"`
	// Seed seeds the arrival times, so that every repeat and every engine
	// sees the same schedule.
	Seed uint64 `json:"seed,omitempty"`
}

// Online reports whether requests arrive over time rather than all at
// once.
func (l Load) Online() bool { return l.RequestRate > 0 || l.Concurrency > 0 }

func (l Load) validate() error {
	bad := func(field string, v any, msg string) error {
		return &ParamError{Field: field, Value: fmt.Sprint(v), Msg: msg}
	}
	switch {
	case l.RequestRate < 0 || math.IsNaN(l.RequestRate) || math.IsInf(l.RequestRate, 0):
		return bad("request_rate", l.RequestRate, "a positive number of requests per second, or inf")
	case l.Burstiness < 0 || math.IsNaN(l.Burstiness) || math.IsInf(l.Burstiness, 0):
		return bad("burstiness", l.Burstiness, "a positive gamma shape (1: Poisson)")
	case l.Concurrency < 0:
		return bad("concurrency", l.Concurrency, "a non-negative number of users (0: unlimited)")
	}
	return nil
}

// Arrivals are the n requests' arrival times from the first one's (which
// is 0): nil when they all arrive at once (no rate).
func (l Load) Arrivals(n int) []time.Duration {
	if l.RequestRate <= 0 || n == 0 {
		return nil
	}
	shape := l.Burstiness
	if shape <= 0 {
		shape = 1
	}
	scale := 1 / (l.RequestRate * shape)
	rng := rand.New(rand.NewPCG(l.Seed, 0x61727269766c)) // "arrivl"
	out := make([]time.Duration, n)
	var t float64
	for i := 1; i < n; i++ {
		t += gamma(rng, shape) * scale
		out[i] = time.Duration(t * 1e9)
	}
	return out
}

// gamma draws from the gamma distribution of the given shape and scale 1
// (Marsaglia and Tsang's method; shapes below 1 through the boost
// Gamma(a) = Gamma(a+1)·U^(1/a)).
func gamma(rng *rand.Rand, shape float64) float64 {
	if shape < 1 {
		u := 1 - rng.Float64() // (0, 1]
		return gamma(rng, shape+1) * math.Pow(u, 1/shape)
	}
	d := shape - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := rng.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := 1 - rng.Float64()
		if u < 1-0.0331*x*x*x*x || math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return d * v
		}
	}
}

// feed is where the scheduler takes its requests from: a dataset
// submitted at once, a dataset arriving over time, or a server's stream
// of requests (online.go).
type feed interface {
	// pending reports whether requests remain to be admitted, now or
	// later.
	pending() bool
	// next returns the next request if it may be admitted at now (since
	// the run's start), with its index among the records (-1: not
	// recorded) and its submission time.
	next(now time.Duration) (r *datasets.Request, index int, start time.Duration, ok bool)
	// wait blocks, with nothing in flight, until next may say yes.
	wait(ctx context.Context, now time.Duration) error
	// token is called for every token read back, at now; a.out holds
	// the tokens so far.
	token(a *inflight, now time.Duration)
}

// datasetFeed serves a dataset: all at once (arrive nil, no users) or
// under a Load.
type datasetFeed struct {
	reqs   []datasets.Request
	record bool // index requests in the records (the timed phase)
	base   time.Duration
	// arrive are the arrival times from base (nil: all at base); users
	// is the closed loop's size (0: none) and freed the completion times
	// so far, in order: request i waits for completion i-users.
	arrive []time.Duration
	users  int
	freed  []time.Duration
	queue  int
}

func newDatasetFeed(reqs []datasets.Request, record bool, base time.Duration, l Load) *datasetFeed {
	return &datasetFeed{reqs: reqs, record: record, base: base, arrive: l.Arrivals(len(reqs)), users: l.Concurrency}
}

func (f *datasetFeed) pending() bool { return f.queue < len(f.reqs) }

// due is when request i may be submitted: its arrival, and a free user;
// ok is false while it waits for a user.
func (f *datasetFeed) due(i int) (time.Duration, bool) {
	t := f.base
	if f.arrive != nil {
		t += f.arrive[i]
	}
	if f.users > 0 && i >= f.users {
		k := i - f.users
		if k >= len(f.freed) {
			return 0, false
		}
		t = max(t, f.freed[k])
	}
	return t, true
}

func (f *datasetFeed) next(now time.Duration) (*datasets.Request, int, time.Duration, bool) {
	if f.queue >= len(f.reqs) {
		return nil, 0, 0, false
	}
	t, ok := f.due(f.queue)
	if !ok || t > now {
		return nil, 0, 0, false
	}
	i := f.queue
	f.queue++
	index := -1
	if f.record {
		index = i
	}
	return &f.reqs[i], index, t, true
}

func (f *datasetFeed) wait(ctx context.Context, now time.Duration) error {
	t, ok := f.due(f.queue)
	if !ok {
		// Nothing is in flight, so every earlier request has completed
		// and freed its user: this cannot happen.
		return fmt.Errorf("request %d waits for a user with none busy", f.queue)
	}
	return sleepCtx(ctx, t-now)
}

func (f *datasetFeed) token(a *inflight, now time.Duration) {
	if f.users > 0 && len(a.out) == a.req.OutputTokens {
		f.freed = append(f.freed, now)
	}
}

// sleepCtx sleeps for d, or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
