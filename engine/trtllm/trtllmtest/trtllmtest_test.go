//go:build unix

package trtllmtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s--- stderr\n%s", r.code, r.stdout, r.stderr)
}

// run runs one of the fakes in wd with the environment kv.
func run(t *testing.T, wd string, kv []string, name string, args ...string) result {
	t.Helper()
	dir := Install(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(dir, name), args...)
	cmd.Dir = wd
	cmd.Env = Environ(dir, kv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("%s %v: %v", name, args, err)
		}
		r.code = ee.ExitCode()
	}
	return r
}

func mustRun(t *testing.T, wd string, kv []string, name string, args ...string) result {
	t.Helper()
	r := run(t, wd, kv, name, args...)
	if r.code != 0 {
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), r)
	}
	return r
}

func lastLine(s string) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return l[len(l)-1]
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// workdir is a directory with a Hugging Face model (hf, 2 layers), a
// conversion script and datasets: small.jsonl (20 requests of various
// lengths) and 128.jsonl (n requests of 128/128).
func workdir(t *testing.T, n int) string {
	t.Helper()
	wd := t.TempDir()
	writeFile(t, filepath.Join(wd, "hf", "config.json"), `{"architectures": ["LlamaForCausalLM"], "dtype": "bfloat16", "hidden_size": 64,
 "intermediate_size": 160, "max_position_embeddings": 4096, "num_attention_heads": 4, "num_hidden_layers": 2,
 "num_key_value_heads": 2, "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "vocab_size": 512}`)
	writeFile(t, filepath.Join(wd, "convert_checkpoint.py"), "# stands in for TensorRT-LLM's examples/models/core/llama/convert_checkpoint.py\n")
	var b strings.Builder
	for i := 0; i < 20; i++ {
		ids := make([]string, 10+i)
		for j := range ids {
			ids[j] = strconv.Itoa((i*31 + j*7) % 512)
		}
		fmt.Fprintf(&b, `{"task_id":%d,"input_ids":[%s],"output_tokens":%d}`+"\n", i, strings.Join(ids, ","), 5+i%3)
	}
	writeFile(t, filepath.Join(wd, "small.jsonl"), b.String())
	b.Reset()
	ids := make([]string, 128)
	for j := range ids {
		ids[j] = strconv.Itoa(j * 3)
	}
	row := strings.Join(ids, ",")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, `{"task_id":%d,"input_ids":[%s],"output_tokens":128}`+"\n", i, row)
	}
	writeFile(t, filepath.Join(wd, "128.jsonl"), b.String())
	return wd
}

// engine converts hf and builds an engine with gemm_plugin gemm in wd/name.
func engine(t *testing.T, wd string, kv []string, name, gemm string) {
	t.Helper()
	ck := "ck-" + name
	mustRun(t, wd, kv, "python3", "convert_checkpoint.py", "--model", "hf", "--output_dir", ck, "--dtype", "float16", "--tp_size", "1", "--pp_size", "1")
	mustRun(t, wd, kv, "trtllm-build", "--checkpoint_dir", ck, "--output_dir", name, "--gemm_plugin", gemm,
		"--max_batch_size", "256", "--max_num_tokens", "8192", "--max_input_len", "1024", "--max_seq_len", "2048", "--workers", "1")
}

// ordered decodes a JSON object's top-level keys in order.
func keysOf(t *testing.T, data []byte) []string {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(data))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not a JSON object: %.200s", data)
	}
	var keys []string
	for d.More() {
		k, err := d.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
		var skip json.RawMessage
		if err := d.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

func readJSON(t *testing.T, path string, v any) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return data
}

func TestPython(t *testing.T) {
	wd := workdir(t, 0)
	code := "import importlib.metadata as m; print(m.version('tensorrt_llm'))"
	if r := mustRun(t, wd, []string{EnvVersion + "=0.21.0"}, "python3", "-c", code); r.stdout != "0.21.0\n" {
		t.Errorf("version: %q", r.stdout)
	}
	if r := mustRun(t, wd, nil, "python3", "-c", code); r.stdout != "1.0.0\n" {
		t.Errorf("default version: %q", r.stdout)
	}
	r := run(t, wd, []string{EnvMissing + "=1"}, "python3", "-c", code)
	if want := "importlib.metadata.PackageNotFoundError: No package metadata was found for tensorrt_llm"; r.code != 1 || lastLine(r.stderr) != want || !strings.HasPrefix(r.stderr, "Traceback (most recent call last):\n") {
		t.Errorf("missing package: %v", r)
	}
	r = mustRun(t, wd, []string{EnvVersion + "=1.2.0rc2"}, "python3", "-c", "import tensorrt_llm; print(tensorrt_llm.__version__)")
	if r.stdout != "[TensorRT-LLM] TensorRT LLM version: 1.2.0rc2\n1.2.0rc2\n" {
		t.Errorf("import tensorrt_llm: %q", r.stdout)
	}
	if r := run(t, wd, nil, "python3", "-c", "print(1)"); r.code != 2 {
		t.Errorf("other programs: %v", r)
	}
	if r := run(t, wd, nil, "python3", "nothere.py"); r.code != 2 || !strings.Contains(r.stderr, "can't open file") {
		t.Errorf("missing script: %v", r)
	}
}

func TestConvertCheckpoint(t *testing.T) {
	wd := workdir(t, 0)
	r := mustRun(t, wd, nil, "python3", "convert_checkpoint.py", "--model", "hf", "--output_dir", "ck", "--dtype", "bfloat16",
		"--tp_size", "4", "--pp_size", "2", "--moe_ep_size", "2")
	if !strings.HasPrefix(r.stdout, "[TensorRT-LLM] TensorRT-LLM version: 1.0.0\n") {
		t.Errorf("stdout: %q", r.stdout)
	}
	var cfg struct {
		Architecture    string `json:"architecture"`
		Dtype           string `json:"dtype"`
		NumHiddenLayers int    `json:"num_hidden_layers"`
		Mapping         struct {
			WorldSize int `json:"world_size"`
			TPSize    int `json:"tp_size"`
			PPSize    int `json:"pp_size"`
			MoeEPSize int `json:"moe_ep_size"`
			MoeTPSize int `json:"moe_tp_size"`
		} `json:"mapping"`
		Quantization map[string]any `json:"quantization"`
	}
	readJSON(t, filepath.Join(wd, "ck", "config.json"), &cfg)
	if cfg.Architecture != "LlamaForCausalLM" || cfg.Dtype != "bfloat16" || cfg.NumHiddenLayers != 2 || cfg.Mapping.WorldSize != 8 ||
		cfg.Mapping.TPSize != 4 || cfg.Mapping.PPSize != 2 || cfg.Mapping.MoeEPSize != 2 || cfg.Mapping.MoeTPSize != 2 {
		t.Errorf("config: %+v", cfg)
	}
	if _, ok := cfg.Quantization["quant_algo"]; !ok {
		t.Errorf("no quantization.quant_algo: %+v", cfg.Quantization)
	}
	for i := 0; i < 8; i++ {
		if _, err := os.Stat(filepath.Join(wd, "ck", fmt.Sprintf("rank%d.safetensors", i))); err != nil {
			t.Error(err)
		}
	}
	if _, err := os.Stat(filepath.Join(wd, "ck", "rank8.safetensors")); err == nil {
		t.Error("rank8.safetensors for a world of 8")
	}
	for _, args := range [][]string{
		{"--output_dir", "x"},                   // no model
		{"--model_dir", "hf", "--dtype", "fp9"}, // bad choice
		{"--model_dir", "hf", "--foo", "1"},     // unknown
	} {
		if r := run(t, wd, nil, "python3", append([]string{"convert_checkpoint.py"}, args...)...); r.code != 2 || !strings.Contains(r.stderr, "convert_checkpoint.py: error: ") {
			t.Errorf("%v: %v", args, r)
		}
	}
	if r := run(t, wd, nil, "python3", "convert_checkpoint.py", "--model_dir", "nothere"); r.code != 1 || !strings.HasPrefix(lastLine(r.stderr), "OSError: ") {
		t.Errorf("missing model: %v", r)
	}
}

func TestBuild(t *testing.T) {
	wd := workdir(t, 0)
	mustRun(t, wd, nil, "python3", "convert_checkpoint.py", "--model_dir", "hf", "--output_dir", "ck", "--tp_size", "2")
	r := mustRun(t, wd, nil, "trtllm-build", "--checkpoint_dir", "ck", "--output_dir", "eng", "--gemm_plugin", "auto",
		"--max_batch_size", "64", "--max_num_tokens", "4096", "--max_input_len", "512", "--max_seq_len", "1024", "--workers", "2")
	if r.stdout != "[TensorRT-LLM] TensorRT-LLM version: 1.0.0\n" {
		t.Errorf("stdout: %q", r.stdout)
	}
	if !strings.HasSuffix(lastLine(r.stderr), "[TRT-LLM] [I] Total time of building all engines: 00:00:01") {
		t.Errorf("stderr: %s", r.stderr)
	}
	data, err := os.ReadFile(filepath.Join(wd, "eng", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got := keysOf(t, data); !slices.Equal(got, []string{"version", "pretrained_config", "build_config"}) {
		t.Errorf("keys %v", got)
	}
	var cfg struct {
		Version    string `json:"version"`
		Pretrained struct {
			Mapping struct {
				TPSize int `json:"tp_size"`
			} `json:"mapping"`
		} `json:"pretrained_config"`
		BuildConfig struct {
			MaxBatchSize int `json:"max_batch_size"`
			MaxNumTokens int `json:"max_num_tokens"`
			MaxInputLen  int `json:"max_input_len"`
			MaxSeqLen    int `json:"max_seq_len"`
			Plugin       struct {
				Gemm *string `json:"gemm_plugin"`
			} `json:"plugin_config"`
		} `json:"build_config"`
	}
	readJSON(t, filepath.Join(wd, "eng", "config.json"), &cfg)
	bc := cfg.BuildConfig
	if cfg.Version != "1.0.0" || cfg.Pretrained.Mapping.TPSize != 2 || bc.MaxBatchSize != 64 || bc.MaxNumTokens != 4096 ||
		bc.MaxInputLen != 512 || bc.MaxSeqLen != 1024 || bc.Plugin.Gemm == nil || *bc.Plugin.Gemm != "auto" {
		t.Errorf("config: %+v", cfg)
	}
	for _, f := range []string{"rank0.engine", "rank1.engine"} {
		if _, err := os.Stat(filepath.Join(wd, "eng", f)); err != nil {
			t.Error(err)
		}
	}
	// Without --gemm_plugin the plugin is unset (null).
	mustRun(t, wd, nil, "trtllm-build", "--checkpoint_dir", "ck", "--output_dir", "eng2")
	cfg.BuildConfig.Plugin.Gemm = nil
	readJSON(t, filepath.Join(wd, "eng2", "config.json"), &cfg)
	if cfg.BuildConfig.Plugin.Gemm != nil {
		t.Errorf("default gemm_plugin %q", *cfg.BuildConfig.Plugin.Gemm)
	}
	for _, args := range [][]string{
		{"--checkpoint_dir", "ck", "--foo", "1"},
		{"--checkpoint_dir", "ck", "--gemm_plugin", "fast"},
		{"--checkpoint_dir", "ck", "--max_batch_size", "many"},
		{"--checkpoint_dir"},
	} {
		if r := run(t, wd, nil, "trtllm-build", args...); r.code != 2 || !strings.Contains(r.stderr, "trtllm-build: error: ") || !strings.HasPrefix(r.stderr, "usage: trtllm-build ") {
			t.Errorf("%v: %v", args, r)
		}
	}
	if r := run(t, wd, nil, "trtllm-build", "--checkpoint_dir", "hf-none"); r.code != 1 || !strings.HasPrefix(lastLine(r.stderr), "FileNotFoundError: ") {
		t.Errorf("no checkpoint: %v", r)
	}
	if r := run(t, wd, []string{EnvVersion + "=1.3.0rc26"}, "trtllm-build", "--checkpoint_dir", "ck"); r.code != 1 || r.stderr != "trtllm-build: command removed in TensorRT-LLM 1.3\n" {
		t.Errorf("1.3: %v", r)
	}
}

type benchReport struct {
	Engine      map[string]any `json:"engine"`
	Machine     map[string]any `json:"machine"`
	WorldInfo   map[string]any `json:"world_info"`
	RequestInfo struct {
		NumRequests int     `json:"num_requests"`
		Concurrent  float64 `json:"avg_num_concurrent_requests"`
		AvgInput    float64 `json:"avg_input_length"`
		AvgOutput   float64 `json:"avg_output_length"`
	} `json:"request_info"`
	Performance struct {
		TotalLatencyMs float64            `json:"total_latency_ms"`
		AvgLatencyMs   float64            `json:"avg_request_latency_ms"`
		ReqPerS        float64            `json:"request_throughput_req_s"`
		OutTokPerS     float64            `json:"system_output_throughput_tok_s"`
		TotTokPerS     float64            `json:"system_total_throughput_tok_s"`
		PerUser        float64            `json:"output_throughput_per_user_tok_s"`
		PerGPU         float64            `json:"output_throughput_per_gpu_tok_s"`
		Latency        map[string]float64 `json:"request_latency_percentiles_ms"`
	} `json:"performance"`
	Streaming map[string]any `json:"streaming_metrics"`
	Dataset   map[string]any `json:"dataset"`
}

type requestRecord struct {
	ID             int     `json:"id"`
	NumInputTokens int     `json:"num_input_tokens"`
	Start          int64   `json:"start_timestamp"`
	First          int64   `json:"first_token_timestamp"`
	End            int64   `json:"end_timestamp"`
	TotalOutput    int     `json:"num_total_output_tokens"`
	Generated      int     `json:"num_generated_tokens"`
	TTFT           float64 `json:"time_to_first_token"`
	E2E            int64   `json:"end_to_end_latency"`
	Output         string  `json:"output"`
	OutputTokens   int     `json:"output_tokens"`
}

var recordKeys10 = []string{"id", "num_input_tokens", "error_tokens", "start_timestamp", "first_token_timestamp", "end_timestamp",
	"decode_iteration", "num_total_output_tokens", "num_generated_tokens", "generation_time", "time_to_first_token",
	"intertoken_latency", "end_to_end_latency", "total_token_throughput", "generation_token_throughput", "output", "output_tokens"}

func near(a, b, rel float64) bool { return math.Abs(a-b) <= rel*math.Max(math.Abs(a), math.Abs(b)) }

// iterLine is the subset of an --iteration_log line the tests read.
var iterLineRE = regexp.MustCompile(`^\{'cpuMemUsage': 0, 'gpuMemUsage': \d+, 'inflightBatchingStats': \{'avgNumDecodedTokensPerIter': 0\.0, 'microBatchId': 0, 'numContextRequests': (\d+), 'numCtxTokens': (\d+), 'numGenRequests': (\d+), 'numPausedRequests': 0, 'numScheduledRequests': (\d+)\}, 'iter': (\d+), 'iterLatencyMS': ([0-9.e+-]+), 'kvCacheStats': \{'allocNewBlocks': \d+, 'allocTotalBlocks': \d+, 'cacheHitRate': 0\.0, 'freeNumBlocks': \d+, 'maxNumBlocks': \d+, 'missedBlocks': \d+, 'reusedBlocks': 0, 'tokensPerBlock': 32, 'usedNumBlocks': \d+\}, 'maxBatchSizeRuntime': \d+, 'maxBatchSizeStatic': \d+, 'maxBatchSizeTunerRecommended': 0, 'maxNumActiveRequests': \d+, 'maxNumTokensRuntime': \d+, 'maxNumTokensStatic': \d+, 'maxNumTokensTunerRecommended': 0, 'newActiveRequestsQueueLatencyMS': [0-9.e+-]+, 'numActiveRequests': (\d+), 'numCompletedRequests': (\d+), 'numNewActiveRequests': \d+, 'numQueuedRequests': (\d+), 'pinnedMemUsage': 0, 'specDecodingStats': None, 'staticBatchingStats': None, 'timestamp': '\d\d-\d\d-\d{4} \d\d:\d\d:\d\d\.\d{6}'\}$`)

func TestBenchPyTorch(t *testing.T) {
	wd := workdir(t, 300)
	r := mustRun(t, wd, nil, "trtllm-bench", "--model", "meta-llama/Llama-3.1-8B", "--model_path", "hf", "throughput",
		"--dataset", "128.jsonl", "--report_json", "report.json", "--request_json", "requests.json",
		"--iteration_log", "iterations.log", "--output_json", "output.json", "--max_batch_size", "64")
	if first, _, _ := strings.Cut(r.stdout, "\n"); first != "[TensorRT-LLM] TensorRT-LLM version: 1.0.0" {
		t.Errorf("first stdout line %q", first)
	}
	data, err := os.ReadFile(filepath.Join(wd, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got := keysOf(t, data); !slices.Equal(got, []string{"engine", "world_info", "request_info", "performance", "dataset"}) {
		t.Errorf("report keys %v", got)
	}
	if !bytes.HasPrefix(data, []byte("{\n    \"engine\": {\n        \"model\": \"meta-llama/Llama-3.1-8B\",\n        \"model_path\": \"hf\",\n        \"engine_dir\": \"None\",")) {
		t.Errorf("report is not json.dumps(indent=4): %.300s", data)
	}
	var rep benchReport
	readJSON(t, filepath.Join(wd, "report.json"), &rep)
	perf := rep.Performance
	if rep.Engine["backend"] != "Pytorch" || rep.Engine["dtype"] != "bfloat16" || rep.Engine["version"] != "1.0.0" {
		t.Errorf("engine %v", rep.Engine)
	}
	if rep.WorldInfo["max_batch_size"] != 64.0 || rep.WorldInfo["max_num_tokens"] != 8192.0 || rep.WorldInfo["ep_size"] != nil || rep.WorldInfo["scheduling_policy"] != "GUARANTEED_NO_EVICT" {
		t.Errorf("world_info %v", rep.WorldInfo)
	}
	if rep.RequestInfo.NumRequests != 300 || rep.RequestInfo.AvgInput != 128 || rep.RequestInfo.AvgOutput != 128 {
		t.Errorf("request_info %+v", rep.RequestInfo)
	}
	if !near(perf.OutTokPerS, 300*128/(perf.TotalLatencyMs/1000), 1e-9) || !near(perf.TotTokPerS, 2*perf.OutTokPerS, 1e-9) ||
		!near(perf.ReqPerS, 300/(perf.TotalLatencyMs/1000), 1e-9) || perf.PerGPU != perf.OutTokPerS || perf.AvgLatencyMs != perf.Latency["average"] {
		t.Errorf("performance %+v", perf)
	}
	var latKeys []string
	for k := range perf.Latency {
		latKeys = append(latKeys, k)
	}
	sort.Strings(latKeys)
	if !slices.Equal(latKeys, []string{"average", "maximum", "minimum", "p50", "p90", "p95", "p99"}) {
		t.Errorf("latency percentiles %v", perf.Latency)
	}
	if !near(rep.RequestInfo.Concurrent, 300*perf.AvgLatencyMs/perf.TotalLatencyMs, 1e-9) {
		t.Errorf("concurrency %v", rep.RequestInfo.Concurrent)
	}
	if rep.Streaming != nil || rep.Machine != nil {
		t.Error("streaming_metrics or machine in a 1.0 non-streaming report")
	}
	if rep.Dataset["dataset_path"] != "128.jsonl" || rep.Dataset["max_sequence_length"] != 256.0 || rep.Dataset["num_requests"] != 300.0 {
		t.Errorf("dataset %v", rep.Dataset)
	}

	// --request_json: one line (no indent), timed requests in id order,
	// the warm-up's 2 ids first.
	raw, err := os.ReadFile(filepath.Join(wd, "requests.json"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Count(raw, []byte("\n")) != 0 || !bytes.HasPrefix(raw, []byte(`[{"id": 2, "num_input_tokens": 128, "error_tokens": 0, `)) {
		t.Errorf("request_json is not json.dumps(list): %.200s", raw)
	}
	var msgs []json.RawMessage
	if err := json.Unmarshal(raw, &msgs); err != nil || len(msgs) != 300 {
		t.Fatalf("%d records: %v", len(msgs), err)
	}
	if got := keysOf(t, msgs[0]); !slices.Equal(got, recordKeys10) {
		t.Errorf("record keys %v", got)
	}
	var recs []requestRecord
	readJSON(t, filepath.Join(wd, "requests.json"), &recs)
	var sumE2E float64
	for i, q := range recs {
		if q.ID != i+2 || q.First != -1 || q.TTFT != 0 || q.TotalOutput != 128 || q.Generated != 127 || q.OutputTokens != 128 ||
			q.E2E != q.End-q.Start || q.Start < 8_000_000_000_000 || len(strings.Fields(q.Output)) != 128 {
			t.Fatalf("record %d: %+v", i, q)
		}
		sumE2E += float64(q.E2E)
	}
	if !near(sumE2E/300*1e-6, perf.AvgLatencyMs, 1e-9) {
		t.Errorf("mean of records' end_to_end_latency %v ms, report %v ms", sumE2E/300*1e-6, perf.AvgLatencyMs)
	}

	// --output_json: {"<id>": text}, indent 4.
	var outputs map[string]string
	readJSON(t, filepath.Join(wd, "output.json"), &outputs)
	if len(outputs) != 300 || outputs["2"] != recs[0].Output || outputs["301"] == "" {
		t.Errorf("output_json: %d entries", len(outputs))
	}

	// --iteration_log: Python dict reprs, keys in order, the benchmark's
	// iterations only (after the warm-up's), completions adding up.
	logData, err := os.ReadFile(filepath.Join(wd, "iterations.log"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(logData), "\n"), "\n")
	completed, prevIter := 0, -1
	for i, l := range lines {
		m := iterLineRE.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("iteration log line %d: %s", i+1, l)
		}
		it, _ := strconv.Atoi(m[5])
		if i == 0 && it < 128 {
			t.Errorf("first logged iteration %d; the warm-up (2 requests of 128 tokens) takes 128", it)
		}
		if prevIter >= 0 && it != prevIter+1 {
			t.Errorf("iteration %d after %d", it, prevIter)
		}
		prevIter = it
		ctx, _ := strconv.Atoi(m[1])
		gen, _ := strconv.Atoi(m[3])
		sched, _ := strconv.Atoi(m[4])
		active, _ := strconv.Atoi(m[7])
		done, _ := strconv.Atoi(m[8])
		if ctx+gen != sched || active > 64 {
			t.Errorf("line %d: %s", i+1, l)
		}
		completed += done
	}
	if completed != 300 {
		t.Errorf("%d completions in the iteration log", completed)
	}

	// The text report: one log record on stderr, labels of 1.0.
	for _, want := range []string{
		"[TRT-LLM] [I] \n\n===========================================================\n= PYTORCH BACKEND\n",
		"TensorRT-LLM Version:\t1.0.0\n",
		"= WORLD + RUNTIME INFORMATION \n",
		fmt.Sprintf("Request Throughput (req/sec):                     %.4f\n", perf.ReqPerS),
		fmt.Sprintf("Total Output Throughput (tokens/sec):             %.4f\n", perf.OutTokPerS),
		"Per User Output Throughput (tokens/sec/user):     ",
		fmt.Sprintf("[Latency] P50    : %.4f\n", perf.Latency["p50"]),
		"= DATASET DETAILS\n",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("text report lacks %q:\n%s", want, r.stderr)
		}
	}
	if !regexp.MustCompile(`(?m)^\[\d\d/\d\d/\d{4}-\d\d:\d\d:\d\d\] \[TRT-LLM\] \[I\] Benchmark done\. Reporting results\.\.\.$`).MatchString(r.stderr) {
		t.Errorf("log records: %s", r.stderr)
	}
}

func TestBenchStreaming(t *testing.T) {
	wd := workdir(t, 0)
	mustRun(t, wd, []string{EnvVersion + "=1.2.0"}, "trtllm-bench", "--model", "m", "--model_path", "hf", "throughput",
		"--dataset", "small.jsonl", "--streaming", "--concurrency", "4", "--report_json", "r.json", "--request_json", "q.json")
	data, _ := os.ReadFile(filepath.Join(wd, "r.json"))
	if got := keysOf(t, data); !slices.Equal(got, []string{"engine", "machine", "world_info", "request_info", "performance", "streaming_metrics", "dataset"}) {
		t.Errorf("keys %v", got)
	}
	var rep benchReport
	readJSON(t, filepath.Join(wd, "r.json"), &rep)
	for _, k := range []string{"token_output_speed_tok_s", "avg_ttft_ms", "avg_tpot_ms", "tpot_percentiles", "ttft_percentiles", "gen_tps_percentiles"} {
		if _, ok := rep.Streaming[k]; !ok {
			t.Errorf("streaming_metrics lacks %s", k)
		}
	}
	if rep.Machine["name"] != "NVIDIA H100 80GB HBM3" {
		t.Errorf("machine %v", rep.Machine)
	}
	raw, _ := os.ReadFile(filepath.Join(wd, "q.json"))
	if !bytes.HasPrefix(raw, []byte("[\n    {\n        \"id\": 2,\n")) {
		t.Errorf("1.2's request_json is indented: %.100s", raw)
	}
	var recs []requestRecord
	readJSON(t, filepath.Join(wd, "q.json"), &recs)
	var msgs []json.RawMessage
	json.Unmarshal(raw, &msgs)
	if keys := keysOf(t, msgs[0]); !slices.Contains(keys, "output_token_throughput") {
		t.Errorf("1.2 record keys %v", keys)
	}
	active := 0
	for _, q := range recs {
		if q.First <= q.Start || q.First > q.End || q.TTFT != float64(q.First-q.Start) {
			t.Errorf("streaming record %+v", q)
		}
	}
	// At most 4 requests in flight.
	for _, q := range recs {
		n := 0
		for _, o := range recs {
			if o.Start <= q.Start && o.End > q.Start {
				n++
			}
		}
		active = max(active, n)
	}
	if active > 4 {
		t.Errorf("%d requests in flight with --concurrency 4", active)
	}
}

func TestBenchVersions(t *testing.T) {
	wd := workdir(t, 0)
	engine(t, wd, []string{EnvVersion + "=0.18.0"}, "e18", "auto")
	bench := []string{"--model", "m", "throughput", "--dataset", "small.jsonl"}
	for _, c := range []struct {
		version  string
		args     []string
		code     int
		contains []string
	}{
		{"0.21.0", []string{"--request_json", "x.json"}, 2, []string{"Usage: trtllm-bench throughput [OPTIONS]\n", "Error: No such option: --request_json\n"}},
		{"0.21.0", []string{"--eos_id", "2"}, 2, []string{"Error: No such option: --eos_id\n"}},
		{"0.21.0", nil, 2, []string{"--engine_dir is required"}},
		{"0.21.0", []string{"--backend", "tensorrt"}, 2, []string{"Error: Invalid value for '--backend': 'tensorrt' is not one of 'pytorch', 'autodeploy'.\n"}},
		{"1.3.0rc26", []string{"--backend", "tensorrt"}, 2, []string{"is not one of 'pytorch', '_autodeploy'."}},
		{"1.0.0", []string{"--engine_dir", "e18"}, 2, []string{"--engine_dir is only read by the TensorRT engine backend"}},
		{"0.21.0", []string{"--backend", "pytorch", "--report_json", "r21.json"}, 0, []string{"[TensorRT-LLM] TensorRT-LLM version: 0.21.0\n", "= PYTORCH BACKEND\n", "TensorRT-LLM Version:\t0.21.0\n", "Per User Output Throughput (tokens/sec/user):"}},
		{"0.20.0", []string{"--backend", "pytorch"}, 0, []string{"= PyTorch backend\n"}},
		{"1.1.0", nil, 0, []string{"[TensorRT-LLM] TensorRT LLM version: 1.1.0\n", "TensorRT LLM Version:\t1.1.0\n", "Per User Output Throughput [w/ ctx] (tps/user):"}},
		{"1.2.0", nil, 0, []string{"= MACHINE DETAILS \n", "NVIDIA H100 80GB HBM3, memory 79.18 GB, 2.62 GHz\n"}},
		{"0.18.0", []string{"--engine_dir", "e18", "--report_json", "r18.json"}, 0, []string{"= ENGINE DETAILS\n", "Token Throughput (tokens/sec):\t", "Scheduling Policy:\tGuaranteed No Evict\n"}},
		{"1.0.0", []string{"--engine_dir", "e18", "--backend", "tensorrt"}, 1, []string{"Failed to deserialize cuda engine"}},
	} {
		r := run(t, wd, []string{EnvVersion + "=" + c.version}, "trtllm-bench", append(bench, c.args...)...)
		all := r.stdout + r.stderr
		if r.code != c.code {
			t.Errorf("%s %v: %v", c.version, c.args, r)
			continue
		}
		for _, s := range c.contains {
			if !strings.Contains(all, s) {
				t.Errorf("%s %v: no %q in\n%s", c.version, c.args, s, all)
			}
		}
	}
	var r21, r18 benchReport
	readJSON(t, filepath.Join(wd, "r21.json"), &r21)
	readJSON(t, filepath.Join(wd, "r18.json"), &r18)
	if r21.Machine != nil || r21.Performance.TotTokPerS == 0 || r21.Performance.Latency["p90"] == 0 {
		t.Errorf("0.21 report %+v", r21)
	}
	if _, ok := r18.Performance.Latency["p90"]; ok || r18.Engine["backend"] != "TRT" || r18.Engine["max_sequence_length"] != 2048.0 {
		t.Errorf("0.18 report %+v", r18)
	}
}

func TestBenchClickErrors(t *testing.T) {
	wd := workdir(t, 0)
	for _, c := range []struct {
		args []string
		err  string
	}{
		{[]string{"--model", "m", "throughput", "--dataset", "small.jsonl", "--foo"}, "Error: No such option: --foo\n"},
		{[]string{"--foo", "throughput"}, "Error: No such option: --foo\n"},
		{[]string{"throughput", "--dataset", "small.jsonl"}, "Error: Missing option '--model' / '-m'.\n"},
		{[]string{"--model", "m", "throughput", "--dataset", "none.jsonl"}, "Error: Invalid value for '--dataset': Path 'none.jsonl' does not exist.\n"},
		{[]string{"--model", "m", "throughput", "--dataset", "small.jsonl", "--max_batch_size", "x"}, "Error: Invalid value for '--max_batch_size': 'x' is not a valid integer.\n"},
		{[]string{"--model", "m", "throughput", "--dataset"}, "Error: Option '--dataset' requires an argument.\n"},
		{[]string{"--model", "m"}, "Error: Missing command.\n"},
		{[]string{"--model", "m", "serve"}, "Error: No such command 'serve'.\n"},
	} {
		r := run(t, wd, nil, "trtllm-bench", c.args...)
		if r.code != 2 || !strings.HasSuffix(r.stderr, "\n\n"+c.err) || !strings.HasPrefix(r.stderr, "Usage: trtllm-bench ") {
			t.Errorf("%v: %v", c.args, r)
		}
	}
	r := run(t, wd, nil, "trtllm-bench", "--model", "m", "throughput", "--dataset", "small.jsonl", "--extra_llm_api_options", "none.yaml")
	if r.code != 1 || lastLine(r.stderr) != "FileNotFoundError: [Errno 2] No such file or directory: 'none.yaml'" {
		t.Errorf("extra options: %v", r)
	}
	r = run(t, wd, nil, "trtllm-bench", "--model", "hf", "throughput", "--dataset", "small.jsonl")
	if r.code != 1 || !strings.Contains(r.stderr, "Model is a file or directory, please provide a model name.") {
		t.Errorf("a path as --model: %v", r)
	}
	writeFile(t, filepath.Join(wd, "bad.jsonl"), "{\"task_id\": 0, \"input_ids\": [1], \"output_tokens\": 2}\nnot json\n")
	r = run(t, wd, nil, "trtllm-bench", "--model", "m", "throughput", "--dataset", "bad.jsonl")
	if r.code != 1 || !strings.HasPrefix(lastLine(r.stderr), "json.decoder.JSONDecodeError: ") {
		t.Errorf("bad dataset: %v", r)
	}
}

// throughput runs a TensorRT engine benchmark and returns its output
// throughput.
func throughput(t *testing.T, wd string, kv []string, eng string) float64 {
	t.Helper()
	mustRun(t, wd, kv, "trtllm-bench", "--model", "m", "throughput", "--backend", "tensorrt", "--engine_dir", eng,
		"--dataset", "128.jsonl", "--report_json", "tp.json")
	var rep benchReport
	readJSON(t, filepath.Join(wd, "tp.json"), &rep)
	return rep.Performance.OutTokPerS
}

func TestBenchGemmPluginAndSeed(t *testing.T) {
	wd := workdir(t, 200)
	engine(t, wd, nil, "auto", "auto")
	engine(t, wd, nil, "disable", "disable")
	auto, disable := throughput(t, wd, nil, "auto"), throughput(t, wd, nil, "disable")
	if ratio := auto / disable; ratio < 1.12 || ratio > 1.18 {
		t.Errorf("auto %.1f tok/s, disable %.1f tok/s: ratio %.3f, want about 1.15", auto, disable, ratio)
	}
	again := throughput(t, wd, nil, "auto")
	seed2 := throughput(t, wd, []string{EnvSeed + "=2"}, "auto")
	seed3 := throughput(t, wd, []string{EnvSeed + "=3"}, "auto")
	if again != auto {
		t.Errorf("same seed: %v then %v", auto, again)
	}
	for _, s := range []float64{seed2, seed3} {
		if s == auto || !near(s, auto, 0.01) {
			t.Errorf("seeds 1, 2, 3: %v %v %v; want different by under 1 %%", auto, seed2, seed3)
		}
	}
}

func TestBenchFaults(t *testing.T) {
	wd := workdir(t, 0)
	args := []string{"--model", "m", "throughput", "--dataset", "small.jsonl", "--report_json", "f.json"}
	for _, c := range []struct{ fault, last string }{
		{FaultOOM, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.06 GiB is free."},
		{FaultError, "RuntimeError: Executor failed: [TensorRT-LLM][ERROR] Assertion failed: mMaxNumTokens > 0"},
	} {
		r := run(t, wd, []string{EnvFault + "=" + c.fault}, "trtllm-bench", args...)
		if r.code != 1 || lastLine(r.stderr) != c.last || !strings.Contains(r.stderr, "Traceback (most recent call last):\n") {
			t.Errorf("%s: %v", c.fault, r)
		}
	}
	if r := run(t, wd, []string{EnvFault + "=" + FaultNoReport}, "trtllm-bench", args...); r.code != 0 || strings.Contains(r.stderr, "PERFORMANCE OVERVIEW") {
		t.Errorf("noreport: %v", r)
	}
	if _, err := os.Stat(filepath.Join(wd, "f.json")); err == nil {
		t.Error("a fault wrote the report")
	}

	// hang: kill the process group, the worker goes with it.
	dir := Install(t)
	cmd := exec.Command(filepath.Join(dir, "trtllm-bench"), args...)
	cmd.Dir = wd
	cmd.Env = Environ(dir, EnvFault+"="+FaultHang)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pidc := make(chan int, 1)
	go func() {
		re := regexp.MustCompile(`Started executor worker process \(pid (\d+)\)`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				pid, _ := strconv.Atoi(m[1])
				pidc <- pid
			}
		}
		close(pidc)
	}()
	var worker int
	select {
	case worker = <-pidc:
	case <-time.After(10 * time.Second):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		t.Fatal("no worker started")
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		t.Fatalf("the hanging benchmark exited: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	deadline := time.Now().Add(5 * time.Second)
	for alive(worker) {
		if time.Now().After(deadline) {
			syscall.Kill(worker, syscall.SIGKILL)
			t.Fatalf("worker %d outlived its process group", worker)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	if data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
		return len(f) > 0 && f[0] != "Z" && f[0] != "X"
	}
	return syscall.Kill(pid, 0) == nil
}

func TestNsys(t *testing.T) {
	wd := workdir(t, 0)
	engine(t, wd, nil, "auto", "auto")
	engine(t, wd, nil, "disable", "disable")
	if r := mustRun(t, wd, nil, "nsys", "--version"); r.stdout != "NVIDIA Nsight Systems version 2024.5.1.113-245134619542v0\n" {
		t.Errorf("version %q", r.stdout)
	}
	profile := func(kv []string, out, eng string, extra ...string) result {
		args := append([]string{"profile", "-o", out, "-f", "true", "-t", "cuda,nvtx", "-c", "cudaProfilerApi"}, extra...)
		args = append(args, "--cuda-graph-trace", "node", "--trace-fork-before-exec", "true",
			"trtllm-bench", "--model", "m", "throughput", "--backend", "tensorrt", "--engine_dir", eng,
			"--dataset", "small.jsonl", "--warmup", "0", "--report_json", out+".json")
		return run(t, wd, kv, "nsys", args...)
	}
	window := []string{"TLLM_PROFILE_START_STOP=1-3"}
	if r := profile(window, "auto", "auto", "--capture-range-end", "stop"); r.code != 0 || !strings.Contains(r.stdout, "Generated:\n    "+filepath.Join(wd, "auto.nsys-rep")+"\n") {
		t.Fatalf("profile: %v", r)
	}
	if _, err := os.Stat(filepath.Join(wd, "auto.json")); err != nil {
		t.Errorf("--capture-range-end stop: the benchmark did not finish: %v", err)
	}
	r := mustRun(t, wd, nil, "nsys", "stats", "--report", "cuda_gpu_kern_sum", "--format", "csv", "--force-export", "true", "--output", "auto", "auto.nsys-rep")
	if !strings.HasPrefix(r.stdout, "Generating SQLite file auto.sqlite from auto.nsys-rep\nProcessing [auto.sqlite] with [") {
		t.Errorf("stats stdout %q", r.stdout)
	}
	if _, err := os.Stat(filepath.Join(wd, "auto.sqlite")); err != nil {
		t.Error(err)
	}
	data, err := os.ReadFile(filepath.Join(wd, "auto_cuda_gpu_kern_sum.csv"))
	if err != nil {
		t.Fatal(err)
	}
	header := `"Time (%)","Total Time (ns)","Instances","Avg (ns)","Med (ns)","Min (ns)","Max (ns)","StdDev (ns)","Name"` + "\n"
	if !strings.HasPrefix(string(data), header) {
		t.Errorf("csv: %s", data)
	}
	rows, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string][]string{}
	prev := int64(math.MaxInt64)
	pct := 0.0
	for _, row := range rows[1:] {
		total, _ := strconv.ParseInt(row[1], 10, 64)
		if total > prev {
			t.Errorf("not sorted by total time: %v", row)
		}
		prev = total
		p, _ := strconv.ParseFloat(row[0], 64)
		pct += p
		names[row[8]] = row
	}
	if math.Abs(pct-100) > 0.5 {
		t.Errorf("shares add up to %v", pct)
	}
	fmha := names["fmha_v2_flash_attention_fp16_64_128_S_q_paged_kv_64_causal_sm90_kernel"]
	if fmha == nil || fmha[2] != "6" { // 3 iterations x 2 layers
		t.Errorf("fmha row %v in %v", fmha, names)
	}
	for _, k := range []string{"sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
		"void cutlass::Kernel2<cutlass_80_wmma_tensorop_f16_s161616gemm_f16_32x32_128x2_tn_align8>(cutlass_80_wmma_tensorop_f16_s161616gemm_f16_32x32_128x2_tn_align8::Params)"} {
		if names[k] == nil {
			t.Errorf("no %s", k)
		}
	}
	for name := range names {
		if strings.HasPrefix(name, "nccl") || strings.Contains(name, "tilesize64x64x64_stage4") {
			t.Errorf("kernel %s with gemm_plugin auto on one GPU", name)
		}
	}
	// disable: TensorRT's own GEMM.
	mustRun(t, wd, window, "nsys", "profile", "-o", "dis", "-c", "cudaProfilerApi", "--capture-range-end", "stop",
		"trtllm-bench", "--model", "m", "throughput", "--backend", "tensorrt", "--engine_dir", "disable", "--dataset", "small.jsonl", "--warmup", "0")
	r = mustRun(t, wd, nil, "nsys", "stats", "--report", "cuda_gpu_kern_sum", "--format", "csv", "--output", "-", "dis.nsys-rep")
	if !strings.Contains(r.stdout, "\n\n"+header) || !strings.Contains(r.stdout, `"sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize64x64x64_stage4_warpsize2x2x1_tensor16x8x16_kernel"`) || strings.Contains(r.stdout, "cublas") {
		t.Errorf("stats of disable: %s", r.stdout)
	}
	// Old nsys: gpukernsum only, old header.
	old := []string{EnvNsysOld + "=1"}
	mustRun(t, wd, old, "nsys", "stats", "--report", "gpukernsum", "--format", "csv", "--output", "old", "auto.nsys-rep")
	data, _ = os.ReadFile(filepath.Join(wd, "old_gpukernsum.csv"))
	if !strings.HasPrefix(string(data), `"Time(%)","Total Time (ns)","Instances","Average","Minimum","Maximum","Name"`+"\n") {
		t.Errorf("old csv %s", data)
	}
	for _, c := range []struct {
		kv     []string
		report string
	}{{old, "cuda_gpu_kern_sum"}, {nil, "gpukernsum"}, {nil, "foo"}} {
		r := run(t, wd, c.kv, "nsys", "stats", "--report", c.report, "--format", "csv", "--output", "x", "auto.nsys-rep")
		if r.code != 1 || r.stderr != "ERROR: Report '"+c.report+"' could not be found.\n" {
			t.Errorf("%v %s: %v", c.kv, c.report, r)
		}
	}
	// A window beyond the run: no kernels.
	beyond := []string{"TLLM_PROFILE_START_STOP=500-510"}
	if r := profile(beyond, "empty", "auto", "--capture-range-end", "stop"); r.code != 0 || !strings.Contains(r.stdout, "No CUDA events collected") {
		t.Errorf("empty: %v", r)
	}
	r = mustRun(t, wd, nil, "nsys", "stats", "--report", "cuda_gpu_kern_sum", "--format", "csv", "--output", "empty", "empty.nsys-rep")
	if !strings.HasSuffix(r.stdout, "SKIPPED: empty.sqlite does not contain CUDA kernel data.\n") {
		t.Errorf("stats of an empty capture: %q", r.stdout)
	}
	if _, err := os.Stat(filepath.Join(wd, "empty_cuda_gpu_kern_sum.csv")); err == nil {
		t.Error("a CSV for an empty capture")
	}
	r = profile(append(beyond, EnvNsysStrict+"=1"), "strict", "auto", "--capture-range-end", "stop")
	if _, err := os.Stat(filepath.Join(wd, "strict.nsys-rep")); err == nil || !strings.Contains(r.stdout, "No reports were generated.") {
		t.Errorf("strict: %v", r)
	}
	// The default --capture-range-end (stop-shutdown) ends the program
	// with the window.
	if r := profile(window, "shutdown", "auto"); r.code != 0 {
		t.Errorf("stop-shutdown: %v", r)
	}
	if _, err := os.Stat(filepath.Join(wd, "shutdown.json")); err == nil {
		t.Error("the benchmark ran on after a stop-shutdown capture range")
	}
	// Without a capture range, everything is captured.
	mustRun(t, wd, nil, "nsys", "profile", "-o", "all", "trtllm-bench", "--model", "m", "throughput", "--backend", "tensorrt", "--engine_dir", "auto", "--dataset", "small.jsonl", "--warmup", "0")
	r = mustRun(t, wd, nil, "nsys", "stats", "-r", "cuda_gpu_kern_sum", "--format", "csv", "-o", "-", "all.nsys-rep")
	if !strings.Contains(r.stdout, "fmha_v2") {
		t.Errorf("capture of the whole run: %s", r.stdout)
	}
	// Errors and exit statuses pass through.
	if r := run(t, wd, nil, "nsys", "profile", "--foo", "x", "trtllm-bench"); r.code != 1 || !strings.Contains(r.stderr, "'--foo'") {
		t.Errorf("unknown option: %v", r)
	}
	if r := run(t, wd, nil, "nsys", "profile", "-o", "auto", "trtllm-bench"); r.code != 1 || !strings.Contains(r.stderr, "File exists") {
		t.Errorf("existing report without -f true: %v", r)
	}
	if r := run(t, wd, []string{EnvFault + "=" + FaultOOM}, "nsys", "profile", "-o", "oom", "trtllm-bench", "--model", "m", "throughput", "--dataset", "small.jsonl"); r.code != 1 {
		t.Errorf("exit status through nsys: %v", r)
	}
}

func TestTorchTrace(t *testing.T) {
	wd := workdir(t, 0)
	for _, c := range []struct{ version, file string }{{"1.0.0", "trace.json"}, {"1.2.0", "trace-rank-0.json"}} {
		dir := filepath.Join(wd, c.version)
		os.Mkdir(dir, 0o755)
		r := mustRun(t, wd, []string{EnvVersion + "=" + c.version, "TLLM_PROFILE_START_STOP=2-3", "TLLM_TORCH_PROFILE_TRACE=" + filepath.Join(dir, "trace.json")},
			"trtllm-bench", "--model", "m", "throughput", "--dataset", "small.jsonl", "--warmup", "0")
		entries, _ := os.ReadDir(dir)
		if len(entries) != 1 || entries[0].Name() != c.file {
			t.Errorf("%s: %v\n%s", c.version, entries, r.stderr)
			continue
		}
		var trace struct {
			TraceEvents []map[string]any `json:"traceEvents"`
		}
		readJSON(t, filepath.Join(dir, c.file), &trace)
		if len(trace.TraceEvents) == 0 {
			t.Errorf("%s: no events", c.version)
		}
		if !strings.Contains(r.stderr, "Profiling started at iteration 2.") {
			t.Errorf("%s: %s", c.version, r.stderr)
		}
	}
	r := mustRun(t, wd, []string{"TLLM_TORCH_PROFILE_TRACE=t.json", "ENABLE_PERFECT_ROUTER=1"}, "trtllm-bench", "--model", "m", "throughput", "--dataset", "small.jsonl")
	if !strings.Contains(r.stderr, "TLLM_PROFILE_START_STOP environment variable needs to be set to enable the torch trace") || !strings.Contains(r.stderr, "perfect router") {
		t.Errorf("stderr: %s", r.stderr)
	}
	if r := run(t, wd, []string{"TLLM_PROFILE_START_STOP=a-b"}, "trtllm-bench", "--model", "m", "throughput", "--dataset", "small.jsonl"); r.code != 1 || !strings.HasPrefix(lastLine(r.stderr), "ValueError: ") {
		t.Errorf("bad TLLM_PROFILE_START_STOP: %v", r)
	}
}

func TestBenchLarge(t *testing.T) {
	wd := workdir(t, 3000)
	start := time.Now()
	mustRun(t, wd, nil, "trtllm-bench", "--model", "m", "throughput", "--dataset", "128.jsonl", "--report_json", "r.json",
		"--request_json", "q.json", "--iteration_log", "i.log")
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("3000 requests took %v", d)
	}
	var rep benchReport
	readJSON(t, filepath.Join(wd, "r.json"), &rep)
	if rep.RequestInfo.NumRequests != 3000 || rep.Performance.OutTokPerS <= 0 {
		t.Errorf("report %+v", rep)
	}
}
