package engine

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"
)

// gapStats are the mean and coefficient of variation of the gaps between
// consecutive times.
func gapStats(ts []time.Duration) (mean, cv float64) {
	n := float64(len(ts) - 1)
	for i := 1; i < len(ts); i++ {
		mean += (ts[i] - ts[i-1]).Seconds()
	}
	mean /= n
	var ss float64
	for i := 1; i < len(ts); i++ {
		d := (ts[i] - ts[i-1]).Seconds() - mean
		ss += d * d
	}
	return mean, math.Sqrt(ss/(n-1)) / mean
}

func TestArrivalsMatchRateAndBurstiness(t *testing.T) {
	// 20000 gaps put the sample mean within about 1 % (3 standard errors
	// at CV 2) and the CV within a few percent of the targets.
	for _, tc := range []struct {
		rate, burst float64
	}{{10, 1}, {10, 0.25}, {3.5, 0.5}, {200, 4}, {1, 0}} {
		l := Load{RequestRate: tc.rate, Burstiness: tc.burst, Seed: 42}
		ts := l.Arrivals(20001)
		if ts[0] != 0 || !slices.IsSorted(ts) {
			t.Fatalf("%+v: arrivals start at %v, sorted %v", tc, ts[0], slices.IsSorted(ts))
		}
		b := tc.burst
		if b == 0 {
			b = 1
		}
		mean, cv := gapStats(ts)
		if want := 1 / tc.rate; math.Abs(mean-want) > 0.05*want {
			t.Errorf("%+v: mean gap %.5fs, want %.5fs", tc, mean, want)
		}
		if want := 1 / math.Sqrt(b); math.Abs(cv-want) > 0.06*want {
			t.Errorf("%+v: gaps' coefficient of variation %.3f, want %.3f", tc, cv, want)
		}
	}
}

func TestArrivalsSeeded(t *testing.T) {
	a := Load{RequestRate: 5, Seed: 1}.Arrivals(50)
	if b := (Load{RequestRate: 5, Seed: 1}).Arrivals(50); !slices.Equal(a, b) {
		t.Error("the same seed gave another schedule")
	}
	if c := (Load{RequestRate: 5, Seed: 2}).Arrivals(50); slices.Equal(a, c) {
		t.Error("another seed gave the same schedule")
	}
	if got := (Load{Concurrency: 4}).Arrivals(50); got != nil {
		t.Errorf("no rate: arrivals %v, want nil (all at once)", got[:3])
	}
	if (Load{}).Online() || !(Load{RequestRate: 1}).Online() || !(Load{Concurrency: 1}).Online() {
		t.Error("Online: only a rate or users make a load online")
	}
}

func TestLoadValidate(t *testing.T) {
	for _, l := range []Load{{RequestRate: -1}, {RequestRate: math.Inf(1)}, {RequestRate: math.NaN()}, {Burstiness: -1}, {Concurrency: -2}} {
		if err := (Config{Model: "tiny-llama", Load: l}).withDefaults().validate(); err == nil {
			t.Errorf("%+v: no error", l)
		}
	}
	if err := (Config{Model: "tiny-llama", Load: Load{RequestRate: 3, Burstiness: 0.5, Concurrency: 2}}).withDefaults().validate(); err != nil {
		t.Error(err)
	}
}

func TestRunAdmitsAtArrival(t *testing.T) {
	reqs := mixedRequests(12)
	l := Load{RequestRate: 400, Burstiness: 0.5, Seed: 9}
	e := newEngine(t, Config{Model: "tiny-llama", BatchSize: 4, MaxNumTokens: 16, Warmup: 2, Load: l})
	res, err := e.Run(context.Background(), reqs, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	arr := l.Arrivals(len(reqs))
	t0 := res.Requests[0].Start
	for i, r := range res.Requests {
		// Start is the arrival, exactly: the schedule, not when the
		// engine got to it.
		if got := r.Start - t0; got != arr[i] {
			t.Errorf("request %d submitted at +%v, arrival at +%v", i, got, arr[i])
		}
		if r.FirstToken <= r.Start || r.End < r.FirstToken {
			t.Errorf("request %d: start %v first %v end %v", i, r.Start, r.FirstToken, r.End)
		}
		if len(r.TokenTimes) != r.OutputTokens || r.TokenTimes[0] != r.FirstToken || r.TokenTimes[len(r.TokenTimes)-1] != r.End || !slices.IsSorted(r.TokenTimes) {
			t.Errorf("request %d: token times %v (first %v, end %v)", i, r.TokenTimes, r.FirstToken, r.End)
		}
	}
	// No iteration prefills a request before it arrived: the prompt
	// tokens processed by the end of each iteration never exceed those of
	// the requests arrived when it started.
	var arrivedTok []int
	for i := range reqs {
		arrivedTok = append(arrivedTok, len(reqs[i].InputIDs))
	}
	done := 0
	for _, it := range res.Iterations {
		if it.Warmup {
			continue
		}
		done += it.CtxTokens
		avail := 0
		for i, r := range res.Requests {
			if r.Start <= it.Start {
				avail += arrivedTok[i]
			}
		}
		if done > avail {
			t.Fatalf("iteration %d (at %v) has prefilled %d prompt tokens, but the requests arrived by then have %d", it.Index, it.Start, done, avail)
		}
	}
}

func TestRunClosedLoop(t *testing.T) {
	reqs := mixedRequests(11)
	for _, l := range []Load{{Concurrency: 3}, {Concurrency: 2, RequestRate: 300, Seed: 4}} {
		e := newEngine(t, Config{Model: "tiny-llama", BatchSize: 8, MaxNumTokens: 32, Load: l})
		res, err := e.Run(context.Background(), reqs, RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ends := map[time.Duration]bool{}
		for _, r := range res.Requests {
			ends[r.End] = true
		}
		arr := l.Arrivals(len(reqs))
		t0 := res.Requests[0].Start
		for i, r := range res.Requests {
			inSystem := 0
			for _, o := range res.Requests {
				if o.Start <= r.Start && r.Start < o.End {
					inSystem++
				}
			}
			if inSystem > l.Concurrency {
				t.Errorf("%+v: %d requests in the system when request %d was submitted", l, inSystem, i)
			}
			// Past the first users, a request is submitted when one
			// completes, or at its arrival if that is later.
			if i >= l.Concurrency && !ends[r.Start] && (arr == nil || r.Start-t0 != arr[i]) {
				t.Errorf("%+v: request %d submitted at %v: neither a completion nor its arrival", l, i, r.Start)
			}
		}
		m := ServingMetrics(res.Requests, nil)
		if _, ok := m[AchievedRateKey]; !ok {
			t.Errorf("%+v: no achieved rate in %v", l, m)
		}
	}
}

func TestRunOfflineUnchanged(t *testing.T) {
	e := newEngine(t, Config{Model: "tiny-llama", BatchSize: 4})
	res, err := e.Run(context.Background(), mixedRequests(5), RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res.Requests {
		if r.TokenTimes != nil || r.Start != res.Requests[0].Start {
			t.Errorf("offline request %d: start %v, token times %v", i, r.Start, r.TokenTimes)
		}
	}
}

func TestRunUnderLoadStops(t *testing.T) {
	// A schedule far slower than the test: cancelling wakes the idle
	// engine at once.
	e := newEngine(t, Config{Model: "tiny-llama", BatchSize: 4, Load: Load{RequestRate: 0.001, Seed: 1}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := e.Run(ctx, mixedRequests(3), RunOptions{})
		done <- err
	}()
	cancel()
	if err := <-done; err == nil || !errorsIsCanceled(err) {
		t.Fatalf("err %v, want one wrapping context.Canceled", err)
	}
}
