package openai

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xrun-dev/xrun/datasets"
	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/driver"
	"github.com/xrun-dev/xrun/engine/openai/openaitest"
)

func requests(n, in, out int) []datasets.Request {
	reqs := make([]datasets.Request, n)
	for i := range reqs {
		ids := make([]int32, in)
		for j := range ids {
			ids[j] = int32(3 + (i*7+j*11)%400)
		}
		reqs[i] = datasets.Request{TaskID: 10 + i, InputIDs: ids, OutputTokens: out}
	}
	return reqs
}

func cell(t *testing.T, l engine.Load, warmup int) *driver.Cell {
	return &driver.Cell{ID: "c", Dir: t.TempDir(), Params: driver.Params{"model": "tiny-llama"},
		Engine: engine.Config{Model: "tiny-llama", Warmup: warmup, BatchSize: 8, Load: l}, Env: os.Environ()}
}

func open(t *testing.T, o Options, c *driver.Cell) *Engine {
	t.Helper()
	e, err := Open(context.Background(), o, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// gaps returns the mean and coefficient of variation of the gaps between
// consecutive sorted times.
func gaps(ts []time.Duration) (mean, cv float64) {
	ts = slices.Sorted(slices.Values(ts))
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

// gammaBounds are z standard errors, relative, of the mean and of the
// coefficient of variation of m gaps drawn from a gamma distribution of
// the given shape k (the delta method on the sample moments: the mean's
// relative variance is 1/(k m); with the gamma's skewness 2/sqrt(k) and
// excess kurtosis 6/k, log CV = log s - log mean has variance
// (1 + 1/k) / (2m)). At k = 0.25 and m = 299 they are 46 % and 37 %: a
// bursty schedule of a few hundred requests is that far from its targets
// about once in 16000 draws.
func gammaBounds(k float64, m int, z float64) (mean, cv float64) {
	return z / math.Sqrt(k*float64(m)), z * math.Sqrt((1+1/k)/(2*float64(m)))
}

func TestClientAgainstServeArrivals(t *testing.T) {
	base, _, _ := serveTiny(t)
	const n = 300
	reqs := requests(n, 4, 2)
	for _, l := range []engine.Load{{RequestRate: 200, Burstiness: 1, Seed: 3}, {RequestRate: 200, Burstiness: 0.25, Seed: 5}} {
		e := open(t, Options{URL: base}, cell(t, l, 2))
		res, err := e.Run(context.Background(), reqs, engine.RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// The schedule itself is near its targets, within 4 standard
		// errors of a sample of n-1 gamma gaps (gammaBounds); the engine's
		// own tests check the targets closely on 20000 gaps.
		sched, schedCV := gaps(l.Arrivals(n))
		wantCV := 1 / math.Sqrt(l.Burstiness)
		meanTol, cvTol := gammaBounds(l.Burstiness, n-1, 4)
		if math.Abs(sched*l.RequestRate-1) > meanTol || math.Abs(schedCV/wantCV-1) > cvTol {
			t.Fatalf("%+v: the schedule's mean gap %.4fs and CV %.2f are beyond 4 standard errors (%.0f%%, %.0f%%) of the targets %.4fs and %.2f",
				l, sched, schedCV, 100*meanTol, 100*cvTol, 1/l.RequestRate, wantCV)
		}
		// Each request's clock starts at its scheduled arrival; its send
		// follows the schedule's gaps.
		var sends []time.Duration
		for i, r := range res.Requests {
			if r.Start != sched0(l, n)[i] || r.Sent < r.Start || r.FirstToken < r.Sent {
				t.Fatalf("%+v: request %d: start %v, sent %v, first token %v; scheduled at %v", l, i, r.Start, r.Sent, r.FirstToken, sched0(l, n)[i])
			}
			sends = append(sends, r.Sent)
		}
		// A send may wake late (a loaded machine delays it a few ms), and
		// that lateness alone moves the gaps: their spread may differ from
		// the schedule's by the spread of the lateness's own changes from
		// one request to the next (the triangle inequality), besides 20 %.
		var jitter float64
		for i := 1; i < len(res.Requests); i++ {
			a, b := res.Requests[i-1], res.Requests[i]
			e := ((b.Sent - b.Start) - (a.Sent - a.Start)).Seconds()
			jitter += e * e
		}
		jitter = math.Sqrt(jitter / float64(len(res.Requests)-1))
		mean, cv := gaps(sends)
		if math.Abs(mean-sched) > 0.1*sched || math.Abs(cv*mean-schedCV*sched) > 0.2*schedCV*sched+jitter {
			t.Errorf("%+v: sent with mean gap %.4fs and CV %.2f; the schedule has %.4fs and %.2f (sends' lateness varies by %.4fs)",
				l, mean, cv, sched, schedCV, jitter)
		}
		if rate := res.Metrics["request_throughput_req_s"]; rate <= 0 {
			t.Errorf("metrics %v", res.Metrics)
		}
		if m := engine.ServingMetrics(res.Requests, nil); math.Abs(m[engine.AchievedRateKey]-1/mean) > 0.01/mean {
			t.Errorf("achieved rate %v, sent at %v/s", m[engine.AchievedRateKey], 1/mean)
		}
		for i, r := range res.Requests {
			if r.OutputTokens != 2 || r.InputTokens != 4 || r.TaskID != reqs[i].TaskID {
				t.Fatalf("record %d: %+v", i, r)
			}
		}
	}
}

// sched0 is l's schedule of n requests moved to start at 0, as the
// checked records are.
func sched0(l engine.Load, n int) []time.Duration {
	a := l.Arrivals(n)
	out := make([]time.Duration, n)
	for i := range a {
		out[i] = a[i] - a[0]
	}
	return out
}

// TestOpenLoopCountsTheClientsWait: a server slower than the offered
// rate, behind max_in_flight 2, makes requests wait in the client. Their
// clocks still start at their scheduled arrivals, so TTFT counts the
// wait; the sends come later and slower than the offer, and the pass
// says how many waited, for how long at most, and the bound. Timed from
// the sends instead, TTFT would stay near the fake's 2 x 20 ms whatever
// the offered rate (coordinated omission).
func TestOpenLoopCountsTheClientsWait(t *testing.T) {
	const n, rate, ttft = 16, 200.0, 20 * time.Millisecond
	url := fake(t, &openaitest.Server{TTFT: ttft, TPOT: time.Millisecond})
	l := engine.Load{RequestRate: rate, Burstiness: 1, Seed: 7}
	c := cell(t, l, 1)
	e := open(t, Options{URL: url, MaxInFlight: 2}, c)
	res, err := e.Run(context.Background(), requests(n, 3, 2), engine.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sched := sched0(l, n)
	var waited, longest time.Duration
	late := 0
	for i, r := range res.Requests {
		if d := r.Start - sched[i]; d < -time.Microsecond || d > time.Microsecond {
			t.Errorf("request %d starts at %v, scheduled at %v", i, r.Start, sched[i])
		}
		wait := r.Sent - r.Start
		if wait < 0 || r.FirstToken-r.Start < wait+ttft {
			t.Errorf("request %d: start %v, sent %v, first token %v: TTFT must count the %v wait and the server's %v", i, r.Start, r.Sent, r.FirstToken, wait, ttft)
		}
		if wait > 10*time.Millisecond {
			late++
		}
		waited += wait
		longest = max(longest, wait)
	}
	// 16 requests in about 80 ms against at most 2 x (1 / 40 ms) served:
	// the last ones wait some 200 ms.
	if late < n/2 || longest < 100*time.Millisecond {
		t.Errorf("%d of %d requests sent more than 10 ms after their arrival, the longest %v after; want most of them, by 100 ms or more", late, n, longest)
	}
	m := engine.ServingMetrics(res.Requests, &engine.SLO{TTFTms: 60, Percentile: 99})
	if got := m[engine.AchievedRateKey]; got <= 0 || got > rate/2 {
		t.Errorf("achieved rate %v req/s for an offered %v: the sends must show the client falling behind", got, rate)
	}
	if got := m[engine.SLOAttainmentKey]; got > 0.5 {
		t.Errorf("SLO attainment %v at TTFT <= 60 ms, although most requests waited their turn for 40 ms or more", got)
	}
	if res.Metrics[engine.HeldRequestsKey] < float64(late) || res.Metrics[engine.HeldRequestsKey] > n-1 || res.Metrics[engine.HeldBoundKey] != 2 ||
		math.Abs(res.Metrics[engine.HeldMaxMsKey]-float64(longest)/1e6) > 1e-6 {
		t.Errorf("held metrics %v; want at least %d held, the longest %v, bound 2", res.Metrics, late, longest)
	}
	// The pass's records.jsonl keeps the sends.
	raw, err := os.ReadFile(filepath.Join(driver.PassDir(c, 0), "records.jsonl"))
	if err != nil || strings.Count(string(raw), `"sent_ns":`) != n {
		t.Errorf("records.jsonl: %v\n%s", err, raw)
	}
}

func TestClientStreamingTimes(t *testing.T) {
	base, _, _ := serveTiny(t)
	reqs := requests(12, 6, 7)
	for _, api := range []string{APICompletions, APIChat} {
		e := open(t, Options{URL: base + "/v1", API: api}, cell(t, engine.Load{Concurrency: 3}, 0))
		res, err := e.Run(context.Background(), reqs, engine.RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res.Requests {
			if r.Sent != 0 {
				t.Errorf("%s: request %d of a closed loop: sent %v, want it at its start %v", api, i, r.Sent, r.Start)
			}
			// xrun serve streams a chunk per token.
			if len(r.TokenTimes) != 7 || !slices.IsSorted(r.TokenTimes) || r.TokenTimes[0] != r.FirstToken || r.Start > r.FirstToken || r.TokenTimes[6] > r.End {
				t.Errorf("%s: request %d: start %v first %v end %v tokens %v", api, i, r.Start, r.FirstToken, r.End, r.TokenTimes)
			}
		}
		m := engine.ServingMetrics(res.Requests, &engine.SLO{TTFTms: 60000, Percentile: 99})
		if m["itl_p50_ms"] <= 0 || m[engine.SLOAttainmentKey] != 1 || m[engine.GoodputKey] <= 0 {
			t.Errorf("%s: serving metrics %v", api, m)
		}
		for _, k := range []string{"ttft_p99_ms", "tpot_p99_ms"} {
			if _, ok := res.Metrics[k]; !ok {
				t.Errorf("%s: no %s in %v", api, k, res.Metrics)
			}
		}
	}
}

func fake(t *testing.T, s *openaitest.Server) string {
	t.Helper()
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	return hs.URL
}

func TestClientSendsTheBenchmarkRequest(t *testing.T) {
	s := &openaitest.Server{}
	url := fake(t, s)
	e := open(t, Options{URL: url, Model: "served-name"}, cell(t, engine.Load{}, 0))
	reqs := requests(2, 3, 4)
	res, err := e.Run(context.Background(), reqs, engine.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Requests) != 2 || len(s.Seen) != 2 {
		t.Fatalf("%d records, %d requests seen", len(res.Requests), len(s.Seen))
	}
	b := s.Seen[0]
	for k, want := range map[string]any{"model": "served-name", "max_tokens": 4.0, "min_tokens": 4.0, "ignore_eos": true, "stream": true} {
		if b[k] != want {
			t.Errorf("%s = %v, want %v (body %v)", k, b[k], want, b)
		}
	}
	if p, ok := b["prompt"].([]any); !ok || len(p) != 3 {
		t.Errorf("prompt %v, want the 3 token ids", b["prompt"])
	}
}

func TestRunFailures(t *testing.T) {
	reqs := requests(6, 3, 3)
	for _, tc := range []struct {
		name string
		s    *openaitest.Server
		o    Options
		want []string
	}{
		{"error status", &openaitest.Server{Fail: 500, FailMessage: "CUDA out of memory. Tried to allocate 2.00 GiB"}, Options{},
			[]string{"500 Internal Server Error", "CUDA out of memory. Tried to allocate 2.00 GiB", "task_id"}},
		{"slow server", &openaitest.Server{Stall: 5 * time.Second}, Options{RequestTimeout: 100 * time.Millisecond},
			[]string{"no complete response within 100ms (openai.request_timeout)"}},
	} {
		url := fake(t, tc.s)
		tc.o.URL = url
		e := open(t, tc.o, cell(t, engine.Load{Concurrency: 2}, 0))
		_, err := e.Run(context.Background(), reqs, engine.RunOptions{})
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v, want %q", tc.name, err, w)
			}
		}
	}
	// Nothing listens there.
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	e := open(t, Options{URL: "http://127.0.0.1:" + port}, cell(t, engine.Load{}, 0))
	if _, err := e.Run(context.Background(), reqs, engine.RunOptions{}); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("no server: %v", err)
	}
	// A stream cut short.
	cut := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte("data: {\"choices\":[{\"index\":0,\"text\":\" 1\",\"finish_reason\":null}]}\n\n"))
	}))
	defer cut.Close()
	e = open(t, Options{URL: cut.URL}, cell(t, engine.Load{}, 0))
	if _, err := e.Run(context.Background(), reqs, engine.RunOptions{}); err == nil || !strings.Contains(err.Error(), "without finishing") {
		t.Errorf("stream cut short: %v", err)
	}
}

// serverCell is a cell whose server is the test binary as the fake.
func serverCell(t *testing.T, args ...string) (Options, *driver.Cell) {
	argv := []driver.Template{tmpl(t, os.Args[0]), tmpl(t, "--port"), tmpl(t, "{port}")}
	for _, a := range args {
		argv = append(argv, tmpl(t, a))
	}
	o := Options{Server: &ServerCommand{Argv: argv, Env: []EnvVar{{Name: fakeEnv, Value: tmpl(t, "1")}}, ReadyTimeout: 20 * time.Second}}
	return o, cell(t, engine.Load{Concurrency: 2}, 0)
}

func tmpl(t *testing.T, s string) driver.Template {
	tp, err := driver.ParseTemplate(s, func(string) bool { return true }, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tp
}

func TestServerCommand(t *testing.T) {
	o, c := serverCell(t, "--ready-after", "300ms")
	e := open(t, o, c)
	res, err := e.Run(context.Background(), requests(5, 3, 4), engine.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Requests) != 5 || !strings.HasPrefix(e.Backend(), "openai/") {
		t.Errorf("%d records, backend %s", len(res.Requests), e.Backend())
	}
	cmds := e.Commands()
	if len(cmds) != 1 || cmds[0].Stage != StageServer || slices.Contains(cmds[0].Argv, "{port}") {
		t.Errorf("commands %+v", cmds)
	}
	e.Close()
	log, err := os.ReadFile(c.Dir + "/tool/" + ServerLog)
	if err != nil || !strings.Contains(string(log), "fake server listening") {
		t.Errorf("server log: %q %v", log, err)
	}
}

func TestServerDiesMidCell(t *testing.T) {
	o, c := serverCell(t, "--die-after", "4")
	e := open(t, o, c)
	_, err := e.Run(context.Background(), requests(10, 3, 4), engine.RunOptions{})
	for _, w := range []string{"the server exited during the pass", "exit status 1", "RuntimeError: CUDA error: an illegal memory access was encountered", ServerLog} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("%v, want %q", err, w)
		}
	}
}

func TestServerNeverReady(t *testing.T) {
	o, c := serverCell(t, "--ready-after", "1h")
	o.Server.ReadyTimeout = 500 * time.Millisecond
	_, err := Open(context.Background(), o, c)
	if err == nil || !strings.Contains(err.Error(), "not ready within 500ms") || !strings.Contains(err.Error(), "503") {
		t.Errorf("%v", err)
	}
	o, c = serverCell(t, "--bad-flag")
	_, err = Open(context.Background(), o, c)
	if err == nil || !strings.Contains(err.Error(), "exited before it was ready") {
		t.Errorf("%v", err)
	}
}

func TestPlannerIgnored(t *testing.T) {
	p := driver.Params{"engine": "openai", "model": "m", "batch_size": 8, "dtype": "float16", "request_rate": 4.0, "concurrency": 0, "dataset.input_mean": 128, "warmup": 2}
	byURL := Planner{Opt: Options{URL: "http://h:1"}}.Ignored(p, nil)
	if !slices.Equal(driver.SortedKeys(byURL), []string{"batch_size", "dtype"}) || !strings.Contains(byURL["dtype"], "configured outside xrun") {
		t.Errorf("url: %v", byURL)
	}
	o, _ := serverCell(t, "--batch", "{batch_size}")
	byCmd := Planner{Opt: o}.Ignored(p, nil)
	if !slices.Equal(driver.SortedKeys(byCmd), []string{"dtype"}) || !strings.Contains(byCmd["dtype"], "do not use {dtype}") {
		t.Errorf("server: %v", byCmd)
	}
}

// TestServerCommandLengths: {max_seq_len} and {max_input_len} are the
// cell dataset's, so a server's KV cache is sized for the requests it
// will get rather than the model's positions.
func TestServerCommandLengths(t *testing.T) {
	o := Options{Server: &ServerCommand{Argv: []driver.Template{tmpl(t, "serve"), tmpl(t, "--max-seq-len"), tmpl(t, "{max_seq_len}"),
		tmpl(t, "--max-input-len={max_input_len}"), tmpl(t, "{port}")}}}
	e := &Engine{opt: o, cell: &driver.Cell{MaxInputLen: 300, MaxSeqLen: 428}}
	got := e.serverCommand("8123").Argv
	if want := []string{"serve", "--max-seq-len", "428", "--max-input-len=300", "8123"}; !slices.Equal(got, want) {
		t.Errorf("argv %q, want %q", got, want)
	}
}
