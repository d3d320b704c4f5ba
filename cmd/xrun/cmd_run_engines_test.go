package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xrun-dev/xrun/engine/trtllm/trtllmtest"
	"github.com/xrun-dev/xrun/results"
)

// asBenchEnv makes the test binary a third-party benchmark program for
// engine: command: it reads xrun's dataset and writes per-request records
// (fakeBench).
const asBenchEnv = "XRUN_TEST_AS_BENCH"

// fakeBench serves a dataset "at" 1000 tokens per second per batch of
// --batch-size requests, writing xrun's records; --fail and --hang
// misbehave as broken programs do.
func fakeBench(args []string) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	dataset := fs.String("dataset", "", "")
	records := fs.String("records", "", "")
	batch := fs.Int("batch-size", 1, "")
	fail := fs.Bool("fail", false, "")
	hang := fs.Bool("hang", false, "")
	sleep := fs.Bool("sleep", false, "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	switch {
	case *sleep:
		time.Sleep(time.Hour)
		return 0
	case *fail:
		fmt.Fprintln(os.Stderr, "loading the model\nTraceback (most recent call last):\nValueError: bench: unsupported model")
		return 1
	case *hang:
		// A child of its own too, as engines with worker processes have.
		child := exec.Command(os.Args[0], "--sleep")
		if err := child.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		os.WriteFile(*records+".pids", []byte(fmt.Sprintf("%d %d", os.Getpid(), child.Process.Pid)), 0o644)
		time.Sleep(time.Hour)
	}
	f, err := os.Open(*dataset)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer f.Close()
	out, err := os.Create(*records)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer out.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	var t int64 = 5e12
	n := 0
	var starts int64
	for sc.Scan() {
		var r struct {
			TaskID       int     `json:"task_id"`
			InputIDs     []int32 `json:"input_ids"`
			OutputTokens int     `json:"output_tokens"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if n%*batch == 0 {
			starts = t
			t += int64(r.OutputTokens) * 1e6
		}
		fmt.Fprintf(out, `{"task_id":%d,"start_ns":%d,"first_token_ns":%d,"end_ns":%d,"input_tokens":%d,"output_tokens":%d}`+"\n",
			r.TaskID, starts, starts+1e6, t, len(r.InputIDs), r.OutputTokens)
		n++
	}
	return 0
}

// commandSpec writes a study putting xrun's cpu engine beside the test
// binary as a command engine; extra are more argv words.
func commandSpec(t *testing.T, repeats int, extra string) string {
	t.Helper()
	dir := t.TempDir()
	spec := fmt.Sprintf(`name: engines
params:
  model: tiny-llama
  dataset: {num_requests: 6, input_mean: 8, output_mean: 4}
matrix:
  engine: [cpu, command]
  batch_size: [1, 3]
repeats: %d
command:
  argv: [%q, --dataset, "{dataset}", --records, "{records}", --batch-size, "{batch_size}"%s]
  env: {%s: "1"}
compare:
  - {axis: engine, baseline: cpu}
`, repeats, os.Args[0], extra, asBenchEnv)
	path := filepath.Join(dir, "engines.yaml")
	if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRunCommandEngine(t *testing.T) {
	spec := commandSpec(t, 4, "")
	out := filepath.Join(t.TempDir(), "out")
	r := runStudy(t, studyEnv(t), "run", "--out", out, spec)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	res, cells := loadResults(t, out)
	var command results.Cell
	for id, c := range cells {
		if c.Status != results.StatusOK {
			t.Errorf("%s: %s %s", id, c.Status, c.Error)
		}
		if strings.HasPrefix(id, "command_bs3") {
			command = c
		}
	}
	// 6 requests in 2 batches of 3, 4 tokens at 1 ms each: 8 ms.
	var lat []float64
	for _, m := range command.Repeats {
		lat = append(lat, m["total_latency_ms"])
	}
	if got := results.Summarize(lat).Median; got != 8 {
		t.Errorf("command bs3: total latency %v ms, want 8", got)
	}
	if len(res.Environment.Engines) != 1 || res.Environment.Engines[0].Engine != "command" {
		t.Errorf("environment engines %+v", res.Environment.Engines)
	}
	md, _ := os.ReadFile(filepath.Join(out, "results.md"))
	for _, want := range []string{"## engine: command vs cpu (baseline)", "| 3 |", "verdict"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("results.md lacks %q", want)
		}
	}
	id := command.ID
	var rec struct {
		Backend  string `json:"backend"`
		Commands []struct {
			Stage string   `json:"stage"`
			Argv  []string `json:"argv"`
		} `json:"commands"`
	}
	b, err := os.ReadFile(cellFile(out, id, "cell.json"))
	if err != nil {
		t.Fatal(err)
	}
	json.Unmarshal(b, &rec)
	if !strings.HasPrefix(rec.Backend, "command/") || len(rec.Commands) != 1 || rec.Commands[0].Stage != "bench" {
		t.Errorf("cell.json backend %q commands %+v", rec.Backend, rec.Commands)
	}
	for _, f := range []string{"requests.jsonl", "commands.jsonl", "tool/pass-3/records.jsonl", "tool/pass-3/output.log"} {
		if _, err := os.Stat(cellFile(out, id, f)); err != nil {
			t.Error(err)
		}
	}
	audit, _ := os.ReadFile(cellFile(out, id, "commands.jsonl"))
	if n := strings.Count(string(audit), `"stage":"bench"`); n != 4 {
		t.Errorf("commands.jsonl has %d bench lines, want one per repeat (4)", n)
	}
}

func TestRunCommandEngineFailures(t *testing.T) {
	t.Run("the program fails", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "out")
		r := runStudy(t, studyEnv(t), "run", "--only", "engine=command", "--out", out, commandSpec(t, 1, ", --fail"))
		if r.code != exitCellsFailed {
			t.Fatalf("exit %d, want 1\n%s", r.code, r.stderr)
		}
		_, cells := loadResults(t, out)
		for id, c := range cells {
			if strings.HasPrefix(id, "command") && (c.Status != results.StatusFailed || !strings.Contains(c.Error, "ValueError: bench: unsupported model")) {
				t.Errorf("%s: %s %q", id, c.Status, c.Error)
			}
		}
	})
	t.Run("a hung program reaches the cell's timeout", func(t *testing.T) {
		if runtime.GOOS != "linux" {
			t.Skip("process groups")
		}
		spec := commandSpec(t, 1, ", --hang")
		b, _ := os.ReadFile(spec)
		os.WriteFile(spec, []byte(strings.Replace(string(b), "  dataset: {", "  timeout: 2s\n  dataset: {", 1)), 0o644)
		out := filepath.Join(t.TempDir(), "out")
		t0 := time.Now()
		r := runStudy(t, studyEnv(t), "run", "--only", "engine=command", "--only", "batch_size=1", "--kill-grace", "3s", "--out", out, spec)
		if r.code != exitCellsFailed {
			t.Fatalf("exit %d, want 1\n%s", r.code, r.stderr)
		}
		if d := time.Since(t0); d > 30*time.Second {
			t.Errorf("took %v", d)
		}
		_, cells := loadResults(t, out)
		for id, c := range cells {
			if !strings.HasPrefix(id, "command_bs1") {
				continue
			}
			if c.Status != results.StatusFailed || !strings.Contains(c.Error, "timeout") {
				t.Errorf("%s: %s %q", id, c.Status, c.Error)
			}
			// The program and its child went with the cell.
			b, err := os.ReadFile(cellFile(out, id, "tool/pass-0/records.jsonl.pids"))
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range strings.Fields(string(b)) {
				pid, _ := strconv.Atoi(f)
				gone := false
				for i := 0; i < 100 && !gone; i++ {
					gone = syscall.Kill(pid, 0) == syscall.ESRCH
					time.Sleep(20 * time.Millisecond)
				}
				if !gone {
					t.Errorf("process %d outlived the cell's timeout", pid)
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
	})
}

// TestRunTrtllmWithFakes runs the motivating study's shape on the fake
// TensorRT-LLM: two plugins, two batch sizes and profiled twins.
func TestRunTrtllmWithFakes(t *testing.T) {
	fakes := trtllmtest.Install(t)
	dir := t.TempDir()
	spec := filepath.Join(dir, "trtllm.yaml")
	os.WriteFile(spec, []byte(`name: trtllm
params:
  engine: trtllm
  trtllm_backend: tensorrt
  model: tinyllama-1.1b
  dataset: {num_requests: 24, input_mean: 16, output_mean: 8}
matrix:
  batch_size: [1, 4]
  gemm_plugin: [auto, disable]
  profile_window: [none]
  include:
    - {batch_size: 4, gemm_plugin: auto, profile_window: "20-25"}
    - {batch_size: 4, gemm_plugin: disable, profile_window: "20-25"}
repeats: 4
compare:
  - {axis: gemm_plugin, baseline: disable}
`), 0o644)
	out := filepath.Join(dir, "out")
	env := append(trtllmtest.Environ(fakes), studyEnv(t)...)
	r := runStudy(t, env, "run", "--out", out, spec)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	res, cells := loadResults(t, out)
	if len(cells) != 6 {
		t.Fatalf("%d cells", len(cells))
	}
	if e := res.Environment.Engines; len(e) != 1 || e[0].Tool != "TensorRT-LLM" || e[0].Version != "1.0.0" {
		t.Errorf("environment engines %+v", e)
	}
	var profiled []string
	for id, c := range cells {
		if c.Status != results.StatusOK || len(c.Repeats) != 4 {
			t.Errorf("%s: %s %q, %d repeats", id, c.Status, c.Error, len(c.Repeats))
		}
		if c.Profile != nil {
			profiled = append(profiled, id)
			if len(c.Profile.Kernels) == 0 || c.Profile.Iterations == 0 {
				t.Errorf("%s: profile %+v", id, c.Profile)
			}
			for _, f := range []string{"kernels.csv", "profile.nsys-rep", "iterations.csv"} {
				if _, err := os.Stat(cellFile(out, id, f)); err != nil {
					t.Error(err)
				}
			}
		}
	}
	if len(profiled) != 2 {
		t.Fatalf("profiled cells %v", profiled)
	}
	// The fake's disable engine is 15 % slower: the verdict says so.
	md, _ := os.ReadFile(filepath.Join(out, "results.md"))
	if !strings.Contains(string(md), "## gemm_plugin: auto vs disable (baseline)") || !strings.Contains(string(md), "faster (p=") {
		t.Errorf("results.md lacks the gemm_plugin comparison with a verdict:\n%s", md)
	}
	k := runCLI(t, nil, "kernels", out, profiled[0], profiled[1])
	if k.code != 0 || !strings.Contains(k.stdout, "sm90_xmma_gemm") {
		t.Errorf("xrun kernels: exit %d\n%s%s", k.code, k.stdout, k.stderr)
	}
	// One engine per batch size and plugin, built once: the profiled
	// twins reuse their unprofiled cells' engines.
	builds := 0
	for id := range cells {
		b, _ := os.ReadFile(cellFile(out, id, "commands.jsonl"))
		builds += strings.Count(string(b), `"stage":"build"`)
	}
	if builds != 4 {
		t.Errorf("%d engine builds, want 4 (batch 1 and 4, auto and disable)", builds)
	}
}
