package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/results"
)

// asOpenAIFakeEnv makes the test binary the fake OpenAI-compatible server
// of engine/openai/openaitest, whose latencies are set rather than
// measured: a request's TTFT is --ttft times the requests in flight.
const asOpenAIFakeEnv = "XRUN_TEST_OPENAI_FAKE"

func writeSpec(t *testing.T, name, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name+".yaml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// fakeServer is an openai block starting the fake with extra flags.
func fakeServer(extra string) string {
	return fmt.Sprintf(`openai:
  server:
    argv: [%q, --port, "{port}"%s]
    env: {%s: "1"}
    ready_timeout: 30s
`, os.Args[0], extra, asOpenAIFakeEnv)
}

// TestRunSLOSearch searches the highest concurrency meeting a TTFT target
// on a server whose TTFT is 60 ms per request in flight: with 4 users
// (240 ms) most requests meet 270 ms; with 5 only the first 4 do (60 to
// 240 ms, then 300 ms), a third of them. A busy machine adds to some
// requests' latency, so the point needs half of its requests, not all,
// and the margins are 30 ms either side.
func TestRunSLOSearch(t *testing.T) {
	spec := writeSpec(t, "search", `name: slo-search
params:
  engine: openai
  model: tiny-llama
  warmup: 0
  dataset: {num_requests: 12, input_mean: 4, output_mean: 3}
matrix:
  concurrency: [1, 16]
`+fakeServer(`, --ttft, 60ms, --tpot, 1ms`)+`  request_timeout: 30s
slo: {ttft_ms: 270, percentile: 50}
search: {axis: concurrency, low: 1, high: 16, tolerance: 0}
repeats: 1
`)
	out := filepath.Join(t.TempDir(), "out")
	r := runStudy(t, studyEnv(t), "run", "--out", out, spec)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	res, _ := loadResults(t, out)
	if res.Search == nil || len(res.Search.Frontier) != 1 {
		t.Fatalf("search %+v", res.Search)
	}
	f := res.Search.Frontier[0]
	if f.Status != results.FrontierFound || f.Best == nil || *f.Best != 4 || f.FailAbove == nil || *f.FailAbove != 5 {
		t.Fatalf("frontier %+v; want 4 users meeting the SLO and 5 not (points %+v)", f, f.Points)
	}
	// Bisection: 1 and 16 from the matrix, then 4, 8, 6 (or so) and 5;
	// never every value.
	if n := len(f.Points); n < 4 || n > 7 {
		t.Errorf("%d points measured: %+v", n, f.Points)
	}
	if f.Goodput == nil || *f.Goodput <= 0 || f.Attainment == nil || *f.Attainment < 0.5 {
		t.Errorf("the best point's goodput %v and attainment %v", f.Goodput, f.Attainment)
	}
	md, err := os.ReadFile(filepath.Join(out, "results.md"))
	if err != nil || !strings.Contains(string(md), "SLO frontier") {
		t.Errorf("results.md has no frontier: %v\n%s", err, md)
	}
	if !strings.Contains(r.stderr, "SLO search: measuring the next points") {
		t.Errorf("no search rounds logged:\n%s", r.stderr)
	}
}

// TestRunOpenAIHeldNote: a server slower than the offered rate, behind
// openai.max_in_flight 2, makes requests wait in xrun; their latencies
// count from their arrivals, the pass's metrics say how many waited, and
// results.md notes it under the cell.
func TestRunOpenAIHeldNote(t *testing.T) {
	spec := writeSpec(t, "held", `name: held
params:
  engine: openai
  model: tiny-llama
  warmup: 0
  request_rate: 200
  dataset: {num_requests: 12, input_mean: 4, output_mean: 3}
`+fakeServer(`, --ttft, 20ms, --tpot, 1ms`)+`  max_in_flight: 2
repeats: 1
`)
	out := filepath.Join(t.TempDir(), "out")
	r := runStudy(t, studyEnv(t), "run", "--out", out, spec)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	res, _ := loadResults(t, out)
	if len(res.Cells) != 1 || res.Cells[0].Status != results.StatusOK || len(res.Cells[0].Repeats) != 1 {
		t.Fatalf("cells %+v", res.Cells)
	}
	m := res.Cells[0].Repeats[0]
	if m["client_held_requests"] < 1 || m["client_max_in_flight"] != 2 || m["client_held_max_ms"] <= 0 || m["ttft_max_ms"] < m["client_held_max_ms"] {
		t.Errorf("metrics %v: want requests held for max_in_flight 2, their waits in TTFT", m)
	}
	md, err := os.ReadFile(filepath.Join(out, "results.md"))
	if err != nil || !strings.Contains(string(md), "waited in the load generator for a free slot of openai.max_in_flight (2)") {
		t.Errorf("results.md has no note of the held requests: %v\n%s", err, md)
	}
}

// TestRunOpenAIAgainstServe loads xrun serve (the test binary as xrun,
// started per cell as {xrun} serve) beside the cpu engine under the same
// request rate: both measure the same requests, the HTTP path's cells
// with streamed token times.
func TestRunOpenAIAgainstServe(t *testing.T) {
	spec := writeSpec(t, "serve", fmt.Sprintf(`name: serve-vs-direct
params:
  model: tiny-llama
  warmup: 2
  batch_size: 8
  dataset: {num_requests: 24, input_mean: 8, output_mean: 4}
matrix:
  engine: [cpu, openai]
  request_rate: [100, inf]
openai:
  server:
    argv: ["{xrun}", serve, --model, "{model}", --engine, cpu, --batch-size, "{batch_size}", --served-model-name, "{hf_model}", --listen, "127.0.0.1:{port}"]
    env: {%s: "1"}
    ready_timeout: 60s
  request_timeout: 60s
slo: {ttft_ms: 60000, tpot_ms: 60000}
compare:
  - {axis: engine, baseline: cpu}
repeats: 2
`, asXrunEnv))
	out := filepath.Join(t.TempDir(), "out")
	r := runStudy(t, studyEnv(t), "run", "--out", out, spec)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	res, cells := loadResults(t, out)
	if len(cells) != 4 {
		t.Fatalf("%d cells", len(cells))
	}
	for _, c := range res.Cells {
		if c.Status != results.StatusOK {
			t.Fatalf("%s: %s %s", c.ID, c.Status, c.Error)
		}
		for _, k := range []string{"ttft_p99_ms", "tpot_p99_ms", "goodput_req_s", "slo_attainment"} {
			if s, ok := c.Summary[k]; !ok || s.N != 2 {
				t.Errorf("%s: no %s", c.ID, k)
			}
		}
		online := fmt.Sprint(c.Params["request_rate"]) != "0" // 0: inf
		if _, ok := c.Summary["achieved_request_rate_req_s"]; ok != online {
			t.Errorf("%s: achieved rate present %v, under load %v", c.ID, ok, online)
		}
		if c.Summary["slo_attainment"].Median != 1 {
			t.Errorf("%s: attainment %v under a 60 s SLO", c.ID, c.Summary["slo_attainment"].Median)
		}
		if c.Params["engine"] == "openai" {
			if _, ok := c.Summary["itl_p99_ms"]; !ok {
				t.Errorf("%s: no inter-token latency from the streamed chunks", c.ID)
			}
			log, err := os.ReadFile(filepath.Join(out, "cells", c.ID, "tool", "server.log"))
			if err != nil || !strings.Contains(string(log), "xrun serve: ready") {
				t.Errorf("%s: server log %v\n%s", c.ID, err, log)
			}
		}
	}
}

// TestRunOpenAIServerFailures: a server that dies mid-cell and one too
// slow for the request timeout fail their cells with the server's own
// message, and the study exits 1.
func TestRunOpenAIServerFailures(t *testing.T) {
	for _, tc := range []struct {
		name, flags, timeout string
		want                 []string
	}{
		{"dies", `, --die-after, "5"`, "30s", []string{"the server exited during the pass", "exit status 1",
			"RuntimeError: CUDA error: an illegal memory access was encountered", "server.log"}},
		{"slow", `, --ttft, 5s`, "300ms", []string{"no complete response within 300ms (openai.request_timeout)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := writeSpec(t, tc.name, `name: broken-server
params:
  engine: openai
  model: tiny-llama
  warmup: 0
  concurrency: 2
  dataset: {num_requests: 8, input_mean: 4, output_mean: 3}
`+fakeServer(tc.flags)+`  request_timeout: `+tc.timeout+`
repeats: 1
`)
			out := filepath.Join(t.TempDir(), "out")
			r := runStudy(t, studyEnv(t), "run", "--out", out, spec)
			if r.code != exitCellsFailed {
				t.Fatalf("exit %d, want 1\n%s", r.code, r.stderr)
			}
			res, _ := loadResults(t, out)
			if len(res.Cells) != 1 || res.Cells[0].Status != results.StatusFailed {
				t.Fatalf("cells %+v", res.Cells)
			}
			for _, w := range tc.want {
				if !strings.Contains(res.Cells[0].Error, w) {
					t.Errorf("cell error %q lacks %q", res.Cells[0].Error, w)
				}
			}
		})
	}
}

// TestServingExperimentOnCPU runs experiments/serving.yaml as shipped but
// for its size: tiny-llama on the cpu engine (engine auto finds no GPU
// here), a few requests, one repeat, a narrower search. Both the direct
// engine and xrun serve are measured at every point, and the search ends.
func TestServingExperimentOnCPU(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	r := runStudy(t, studyEnv(t, "CUDA_VISIBLE_DEVICES=-1"), "run", "--out", out, "../../experiments/serving.yaml",
		"--set", "params.model=tiny-llama", "--set", "params.dataset.num_requests=24", "--set", "params.load_duration=none", "--set", "repeats=1",
		"--set", "params.dataset.input_mean=16", "--set", "params.dataset.output_mean=8", "--set", "params.warmup=2",
		"--set", "params.batch_size=16", "--set", "matrix.request_rate=[100, 400]",
		"--set", "search={axis: request_rate, low: 100, high: 400, tolerance: 0.5, max_points: 4}")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	res, _ := loadResults(t, out)
	engines := map[any]int{}
	for _, c := range res.Cells {
		if c.Status != results.StatusOK {
			t.Fatalf("%s: %s %s", c.ID, c.Status, c.Error)
		}
		engines[c.Params["engine"]]++
	}
	if engines["auto"] < 2 || engines["auto"] != engines["openai"] {
		t.Errorf("cells per engine %v: want every point on both", engines)
	}
	if res.Search == nil || len(res.Search.Frontier) != 2 {
		t.Fatalf("frontier %+v", res.Search)
	}
	for _, f := range res.Search.Frontier {
		if f.Status == results.FrontierSearching {
			t.Errorf("%s: the search did not end: %+v", f.Label, f)
		}
	}
}
