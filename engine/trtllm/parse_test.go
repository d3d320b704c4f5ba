package trtllm

import (
	"math"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/datasets"
)

func TestParsePyLiteral(t *testing.T) {
	v, err := parsePyLiteral(`{'a': 1, "b": [1.5, -2e3, (3, 4)], 'c': {'d': None, 'e': True, 'f': False}, 'g': 'it\'s', 'h': inf, 'i': 0x10, 'j': 1_000}`)
	if err != nil {
		t.Fatal(err)
	}
	m := v.(map[string]any)
	if m["a"] != 1.0 || m["g"] != "it's" || m["c"].(map[string]any)["e"] != true || m["c"].(map[string]any)["d"] != nil ||
		!math.IsInf(m["h"].(float64), 1) || m["i"] != 16.0 || m["j"] != 1000.0 {
		t.Errorf("got %#v", m)
	}
	b := m["b"].([]any)
	if b[0] != 1.5 || b[1] != -2000.0 || len(b[2].([]any)) != 2 {
		t.Errorf("list %#v", b)
	}
	for _, bad := range []string{`{'a' 1}`, `{1: 2}`, `{'a': }`, `['a'`, `'x`, `Nonsense`, `{'a': 1} extra`, strings.Repeat("[", 100)} {
		if _, err := parsePyLiteral(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func FuzzParsePyLiteral(f *testing.F) {
	f.Add(`{'iter': 3, 'iterLatencyMS': 21.7, 'inflightBatchingStats': {'numContextRequests': 0}, 'x': [None, True, 'a\'b']}`)
	f.Add(`{"iter": 1, "timestamp": "11-25-2026 16:00:00.123456"}`)
	f.Fuzz(func(t *testing.T, s string) {
		parsePyLiteral(s)
	})
}

// An iteration log as the PyTorch executor writes it: warm-up
// iterations first (two warm-up requests complete at iterations 1 and
// 2), keys in nlohmann's alphabetical order.
const iterationLog = `{'cpuMemUsage': 0, 'gpuMemUsage': 100, 'inflightBatchingStats': {'avgNumDecodedTokensPerIter': 0, 'microBatchId': 0, 'numContextRequests': 2, 'numCtxTokens': 256, 'numGenRequests': 0, 'numPausedRequests': 0, 'numScheduledRequests': 2}, 'iter': 0, 'iterLatencyMS': 10.0, 'numActiveRequests': 2, 'numCompletedRequests': 0, 'numQueuedRequests': 0, 'timestamp': '11-25-2026 16:00:00.010000'}
{'inflightBatchingStats': {'numContextRequests': 0, 'numCtxTokens': 0, 'numGenRequests': 2}, 'iter': 1, 'iterLatencyMS': 5.0, 'numCompletedRequests': 1, 'timestamp': '11-25-2026 16:00:00.015000'}
{'inflightBatchingStats': {'numContextRequests': 0, 'numCtxTokens': 0, 'numGenRequests': 1}, 'iter': 2, 'iterLatencyMS': 5.0, 'numCompletedRequests': 1, 'timestamp': '11-25-2026 16:00:00.020000'}
{'inflightBatchingStats': {'numContextRequests': 3, 'numCtxTokens': 384, 'numGenRequests': 0}, 'iter': 3, 'iterLatencyMS': 12.0, 'numCompletedRequests': 0, 'timestamp': '11-25-2026 16:00:00.040000'}
`

func TestParseIterationLog(t *testing.T) {
	iters, err := ParseIterationLog(strings.NewReader(iterationLog), "iterations.log", 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(iters) != 4 {
		t.Fatalf("%d iterations", len(iters))
	}
	want := []struct {
		ctx, tok, gen int
		startMs       float64
		warm          bool
	}{{2, 256, 0, 0, true}, {0, 0, 2, 10, true}, {0, 0, 1, 15, true}, {3, 384, 0, 28, false}}
	for i, w := range want {
		it := iters[i]
		if it.Index != i || it.CtxRequests != w.ctx || it.CtxTokens != w.tok || it.GenRequests != w.gen || it.Warmup != w.warm ||
			math.Abs(float64(it.Start)/1e6-w.startMs) > 1e-6 {
			t.Errorf("iteration %d: %+v, want %+v", i, it, w)
		}
	}
	// A log that begins after the warm-up marks none of it.
	late := strings.ReplaceAll(iterationLog, "'iter': ", "'iter': 10")
	iters, err = ParseIterationLog(strings.NewReader(late), "iterations.log", 2)
	if err != nil || iters[0].Index != 100 || iters[0].Warmup || iters[1].Warmup {
		t.Errorf("late log: %v %+v", err, iters)
	}
	if _, err := ParseIterationLog(strings.NewReader("{'iter': 1}\n"), "iterations.log", 0); err == nil || !strings.Contains(err.Error(), "iterations.log:1: iterLatencyMS") {
		t.Errorf("got %v", err)
	}
	if _, err := ParseIterationLog(strings.NewReader("[1, 2]\n"), "iterations.log", 0); err == nil || !strings.Contains(err.Error(), "expected a dict") {
		t.Errorf("got %v", err)
	}
}

const reportJSON = `{
    "engine": {"model": "TinyLlama/TinyLlama-1.1B-Chat-v1.0", "model_path": "None", "engine_dir": "/e", "version": "0.21.0", "backend": "TRT", "dtype": "float16"},
    "world_info": {"tp_size": 1, "pp_size": 1, "ep_size": null, "world_size": 1, "max_batch_size": 64, "max_num_tokens": 8192},
    "request_info": {"num_requests": 3, "avg_num_concurrent_requests": 2.5, "avg_input_length": 2.0, "avg_output_length": 3.0},
    "performance": {"total_latency_ms": 10.0, "avg_request_latency_ms": 8.0, "request_throughput_req_s": 300.0,
        "system_output_throughput_tok_s": 900.0, "output_throughput_per_user_tok_s": 400.0, "output_throughput_per_gpu_tok_s": 900.0,
        "request_latency_percentiles_ms": {"p50": 8.0, "p90": 9.0, "p95": 9.5, "p99": 9.9, "minimum": 6.0, "maximum": 10.0, "average": 8.0}},
    "dataset": {"num_requests": 3}
}`

func TestReportMetrics(t *testing.T) {
	r, err := ParseReport([]byte(reportJSON), "report.json")
	if err != nil {
		t.Fatal(err)
	}
	m := r.Metrics()
	for k, want := range map[string]float64{"request_throughput_req_s": 300, "system_output_throughput_tok_s": 900, "request_latency_p90_ms": 9,
		"request_latency_min_ms": 6, "avg_concurrent_requests": 2.5, "num_requests": 3, "total_input_tokens": 6, "total_output_tokens": 9} {
		if m[k] != want {
			t.Errorf("%s = %v, want %v", k, m[k], want)
		}
	}
	// Not in this release's report (system_total_throughput_tok_s came
	// with PR 3212) and only with --streaming: absent, never 0.
	for _, k := range []string{"system_total_throughput_tok_s", "ttft_avg_ms"} {
		if _, ok := m[k]; ok {
			t.Errorf("%s reported", k)
		}
	}
	if r.NumRequests() != 3 {
		t.Errorf("num requests %d", r.NumRequests())
	}
	if _, err := ParseReport([]byte(`{"engine": {}}`), "report.json"); err == nil || !strings.Contains(err.Error(), "no performance section") {
		t.Errorf("got %v", err)
	}
}

func TestParseRequestJSON(t *testing.T) {
	reqs := []datasets.Request{
		{TaskID: 0, InputIDs: []int32{1, 2}, OutputTokens: 3},
		{TaskID: 1, InputIDs: []int32{3, 4}, OutputTokens: 3},
	}
	// Ids 2 and 3: warm-up requests took 0 and 1. Out of order on disk.
	in := `[{"id": 3, "num_input_tokens": 2, "error_tokens": 0, "start_timestamp": 8000000001000, "first_token_timestamp": -1, "end_timestamp": 8000000009000, "num_total_output_tokens": 3, "num_generated_tokens": 3, "output": "a b c", "output_tokens": 3},
 {"id": 2, "num_input_tokens": 2, "error_tokens": 0, "start_timestamp": 8000000000000, "first_token_timestamp": -1, "end_timestamp": 8000000006000, "num_total_output_tokens": 3, "num_generated_tokens": 3, "output": "d e f", "output_tokens": 3}]`
	r, err := ParseRequestJSON(strings.NewReader(in), "requests.json", reqs)
	if err != nil {
		t.Fatal(err)
	}
	if r.FirstToken || r.Requests[0].End != 6000 || r.Requests[1].Start != 1000 || r.Requests[1].TaskID != 1 {
		t.Errorf("got %+v", r)
	}
	bad := strings.Replace(in, `"error_tokens": 0, "start_timestamp": 8000000001000`, `"error_tokens": 2, "start_timestamp": 8000000001000`, 1)
	if _, err := ParseRequestJSON(strings.NewReader(bad), "requests.json", reqs); err == nil || !strings.Contains(err.Error(), "request id 3 failed (2 error tokens)") {
		t.Errorf("got %v", err)
	}
}

func TestFeatures(t *testing.T) {
	for _, tc := range []struct {
		v                               string
		pytorch, flag, tensorrt, perReq bool
		refuse                          string // backend refused
	}{
		{"0.16.0", false, false, true, false, "tensorrt"},
		{"0.17.0", true, false, true, false, ""},
		{"0.21.0", true, false, true, false, ""},
		{"1.0.0rc4", true, true, true, true, ""},
		{"1.2.0", true, true, true, true, ""},
		{"1.3.0rc26", true, true, false, true, "tensorrt"},
	} {
		v := ParseVersion(tc.v)
		f := FeaturesOf(v)
		if f.PyTorch != tc.pytorch || f.BackendFlagForEngine != tc.flag || f.TensorRT != tc.tensorrt || f.RequestJSON != tc.perReq {
			t.Errorf("%s: %+v", tc.v, f)
		}
		if tc.refuse != "" && unsupported(v, tc.refuse) == "" {
			t.Errorf("%s: %s backend not refused", tc.v, tc.refuse)
		}
	}
	if v := ParseVersion("main"); v.Known || !FeaturesOf(v).RequestJSON {
		t.Errorf("an unparsable version is not taken as the newest: %+v", v)
	}
}
