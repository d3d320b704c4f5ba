package trtllm

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"time"

	"github.com/xrun-dev/xrun/datasets"
	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/driver"
)

// Report is trtllm-bench's --report_json.
type Report struct {
	path string
	doc  map[string]any
}

// ReadReport reads a --report_json file.
func ReadReport(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, &driver.FormatError{File: path, Msg: "trtllm-bench wrote no report: " + err.Error()}
	}
	return ParseReport(b, path)
}

// ParseReport reads --report_json bytes; path names them in errors.
func ParseReport(b []byte, path string) (*Report, error) {
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, &driver.FormatError{File: path, Msg: "not trtllm-bench's report JSON: " + err.Error()}
	}
	if _, ok := doc["performance"].(map[string]any); !ok {
		return nil, &driver.FormatError{File: path, Msg: "no performance section; expected trtllm-bench's --report_json (engine, world_info, request_info, performance, ...)"}
	}
	return &Report{path: path, doc: doc}, nil
}

// reportMetrics map xrun's metric names to the report's paths.
var reportMetrics = []struct{ metric, path string }{
	{"request_throughput_req_s", "performance.request_throughput_req_s"},
	{"system_output_throughput_tok_s", "performance.system_output_throughput_tok_s"},
	{"system_total_throughput_tok_s", "performance.system_total_throughput_tok_s"},
	{"output_throughput_per_user_tok_s", "performance.output_throughput_per_user_tok_s"},
	{"output_throughput_per_gpu_tok_s", "performance.output_throughput_per_gpu_tok_s"},
	{"total_latency_ms", "performance.total_latency_ms"},
	{"avg_request_latency_ms", "performance.avg_request_latency_ms"},
	{"request_latency_p50_ms", "performance.request_latency_percentiles_ms.p50"},
	{"request_latency_p90_ms", "performance.request_latency_percentiles_ms.p90"},
	{"request_latency_p95_ms", "performance.request_latency_percentiles_ms.p95"},
	{"request_latency_p99_ms", "performance.request_latency_percentiles_ms.p99"},
	{"request_latency_min_ms", "performance.request_latency_percentiles_ms.minimum"},
	{"request_latency_max_ms", "performance.request_latency_percentiles_ms.maximum"},
	{"avg_concurrent_requests", "request_info.avg_num_concurrent_requests"},
	{"num_requests", "request_info.num_requests"},
	{"per_user_output_speed_tok_s", "streaming_metrics.token_output_speed_tok_s"},
	{"ttft_avg_ms", "streaming_metrics.avg_ttft_ms"},
	{"ttft_p50_ms", "streaming_metrics.ttft_percentiles.p50"},
	{"ttft_p90_ms", "streaming_metrics.ttft_percentiles.p90"},
	{"ttft_p95_ms", "streaming_metrics.ttft_percentiles.p95"},
	{"ttft_p99_ms", "streaming_metrics.ttft_percentiles.p99"},
	{"ttft_min_ms", "streaming_metrics.ttft_percentiles.minimum"},
	{"ttft_max_ms", "streaming_metrics.ttft_percentiles.maximum"},
	{"tpot_avg_ms", "streaming_metrics.avg_tpot_ms"},
	{"tpot_p50_ms", "streaming_metrics.tpot_percentiles.p50"},
	{"tpot_p90_ms", "streaming_metrics.tpot_percentiles.p90"},
	{"tpot_p95_ms", "streaming_metrics.tpot_percentiles.p95"},
	{"tpot_p99_ms", "streaming_metrics.tpot_percentiles.p99"},
	{"tpot_min_ms", "streaming_metrics.tpot_percentiles.minimum"},
	{"tpot_max_ms", "streaming_metrics.tpot_percentiles.maximum"},
}

// Metrics are the report's metrics under xrun's names: those the report
// has (older releases lack some; streaming ones come only with
// --streaming), and the token totals from its averages.
func (r *Report) Metrics() map[string]float64 {
	m := map[string]float64{}
	for _, rm := range reportMetrics {
		if v, err := driver.LookupNumber(r.doc, rm.path); err == nil {
			m[rm.metric] = v
		}
	}
	n, err1 := driver.LookupNumber(r.doc, "request_info.num_requests")
	in, err2 := driver.LookupNumber(r.doc, "request_info.avg_input_length")
	out, err3 := driver.LookupNumber(r.doc, "request_info.avg_output_length")
	if err1 == nil && err2 == nil && err3 == nil {
		m["total_input_tokens"] = math.Round(n * in)
		m["total_output_tokens"] = math.Round(n * out)
	}
	return m
}

// NumRequests is how many requests the report counted (0 if it says
// not).
func (r *Report) NumRequests() int {
	v, err := driver.LookupNumber(r.doc, "request_info.num_requests")
	if err != nil {
		return 0
	}
	return int(v)
}

// requestRecord is one element of --request_json (TensorRT-LLM's
// RequestRecord): times are time.perf_counter_ns() values,
// first_token_timestamp -1 without --streaming. Releases name the output
// count num_total_output_tokens, num_output_tokens or output_tokens.
type requestRecord struct {
	ID                   *int64 `json:"id"`
	NumInputTokens       *int   `json:"num_input_tokens"`
	StartTimestamp       *int64 `json:"start_timestamp"`
	FirstTokenTimestamp  *int64 `json:"first_token_timestamp"`
	EndTimestamp         *int64 `json:"end_timestamp"`
	NumTotalOutputTokens *int   `json:"num_total_output_tokens"`
	NumOutputTokens      *int   `json:"num_output_tokens"`
	OutputTokens         *int   `json:"output_tokens"`
	ErrorTokens          *int   `json:"error_tokens"`
}

// ReadRequestJSON reads --request_json and checks its records against
// the dataset (driver.CheckRecords): trtllm-bench submits the requests in
// dataset order and numbers them as it submits (warm-up requests first),
// so records in id order are the dataset's requests in order.
func ReadRequestJSON(path string, reqs []datasets.Request) (*driver.Records, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &driver.FormatError{File: path, Msg: "trtllm-bench wrote no per-request records: " + err.Error()}
	}
	defer f.Close()
	return ParseRequestJSON(f, path, reqs)
}

// ParseRequestJSON is ReadRequestJSON on a reader.
func ParseRequestJSON(r io.Reader, path string, reqs []datasets.Request) (*driver.Records, error) {
	var recs []requestRecord
	dec := json.NewDecoder(io.LimitReader(r, 1<<31))
	if err := dec.Decode(&recs); err != nil {
		return nil, &driver.FormatError{File: path, Msg: "expected a JSON array of request records: " + err.Error()}
	}
	for i, rr := range recs {
		if rr.ID == nil {
			return nil, &driver.FormatError{File: fmt.Sprintf("%s: record [%d]", path, i), Msg: "id: missing"}
		}
	}
	order := make([]int, len(recs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(*recs[a].ID, *recs[b].ID) })
	raws := make([]driver.RawRecord, 0, len(recs))
	for _, i := range order {
		rr := recs[i]
		if rr.ErrorTokens != nil && *rr.ErrorTokens > 0 {
			return nil, &driver.FormatError{File: fmt.Sprintf("%s: record [%d]", path, i), Msg: fmt.Sprintf("request id %d failed (%d error tokens)", *rr.ID, *rr.ErrorTokens)}
		}
		out := rr.NumTotalOutputTokens
		if out == nil {
			out = rr.NumOutputTokens
		}
		if out == nil {
			out = rr.OutputTokens
		}
		raws = append(raws, driver.RawRecord{Index: i, Start: rr.StartTimestamp, FirstToken: rr.FirstTokenTimestamp, End: rr.EndTimestamp,
			InputTokens: rr.NumInputTokens, OutputTokens: out})
	}
	return driver.CheckRecords(path, raws, reqs, true)
}

// iterationTimeLayout is the PyTorch executor's IterationStats timestamp
// ("%m-%d-%Y %H:%M:%S.%f").
const iterationTimeLayout = "01-02-2006 15:04:05.999999"

// ReadIterationLog reads --iteration_log: one iteration's statistics per
// line, as Python's str(dict) writes them (or JSON). The iterations become
// xrun's iteration records: context requests and tokens and generation
// requests from inflightBatchingStats, the duration from iterLatencyMS,
// the start from the timestamp (or the durations summed). When the log
// starts at the executor's first iteration (iter 0), the leading
// iterations until the warmup-th request completed are the warm-up's;
// a log that starts later began after the warm-up. A missing file gives
// no iterations.
func ReadIterationLog(path string, warmup int) ([]engine.IterationRecord, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseIterationLog(f, path, warmup)
}

// ParseIterationLog is ReadIterationLog on a reader.
func ParseIterationLog(r io.Reader, path string, warmup int) ([]engine.IterationRecord, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<16), 16<<20)
	var out []engine.IterationRecord
	var t0 time.Time
	var clock time.Duration
	completed, line := 0, 0
	warmDone := warmup <= 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		bad := func(format string, args ...any) error {
			return &driver.FormatError{File: path, Line: line, Msg: fmt.Sprintf(format, args...)}
		}
		v, err := parsePyLiteral(string(b))
		if err != nil {
			return nil, bad("not an iteration's statistics: %v", err)
		}
		st, ok := v.(map[string]any)
		if !ok {
			return nil, bad("expected a dict of an iteration's statistics")
		}
		num := func(path string) (float64, bool) {
			x, err := driver.LookupNumber(st, path)
			return x, err == nil
		}
		idx, ok := num("iter")
		if !ok {
			return nil, bad("iter: missing or not a number")
		}
		lat, ok := num("iterLatencyMS")
		if !ok {
			return nil, bad("iterLatencyMS: missing or not a number")
		}
		ctxReq, _ := num("inflightBatchingStats.numContextRequests")
		ctxTok, _ := num("inflightBatchingStats.numCtxTokens")
		gen, _ := num("inflightBatchingStats.numGenRequests")
		rec := engine.IterationRecord{Index: int(idx), CtxRequests: int(ctxReq), CtxTokens: int(ctxTok), GenRequests: int(gen),
			Duration: time.Duration(lat * float64(time.Millisecond))}
		if ts, ok := st["timestamp"].(string); ok {
			if t, err := time.Parse(iterationTimeLayout, ts); err == nil {
				if t0.IsZero() {
					t0 = t.Add(-rec.Duration)
				}
				// The stats are taken when an iteration ends.
				rec.Start = t.Sub(t0) - rec.Duration
			} else {
				rec.Start = clock
			}
		} else {
			rec.Start = clock
		}
		clock = rec.Start + rec.Duration
		if len(out) == 0 && rec.Index > 0 {
			warmDone = true // the log began after the warm-up
		}
		if !warmDone {
			rec.Warmup = true
			if n, ok := num("numCompletedRequests"); ok {
				completed += int(n)
				warmDone = completed >= warmup
			} else {
				// Without completion counts the warm-up cannot be told
				// apart; nothing is marked.
				rec.Warmup, warmDone = false, true
			}
		}
		out = append(out, rec)
	}
	if err := sc.Err(); err != nil {
		return nil, &driver.FormatError{File: path, Line: line + 1, Msg: err.Error()}
	}
	return out, nil
}
