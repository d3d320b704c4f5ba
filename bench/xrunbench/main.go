// Command xrunbench serves generated datasets through engine.New and
// Engine.Run (the path `xrun run` takes for a cell) on a backend, for a grid
// of batch sizes and gemm_plugin values, and prints trtllm-bench's
// throughput metrics with the share of the gpu.md roofline they reach. It
// stands in for `xrun run experiments/gemm.yaml` on the GPU machine until
// the runner exists.
//
//	xrunbench -model tinyllama-1.1b -batch 1,64,256 -gemm auto,disable \
//	    -requests 3000 -requests-at 1=64 -repeats 1 -json out.jsonl
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/xrun-dev/xrun/datasets"
	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/cuda"
	_ "github.com/xrun-dev/xrun/engine/cuda/backend" // registers "cuda"
)

// roofline is gpu.md's output tok/s bound for TinyLlama-1.1B fp16,
// 128 in / 128 out at constant batch B.
var roofline = map[string]map[int]float64{
	"H200": {1: 2300, 64: 105000, 256: 220000},
	"H100": {1: 1600, 64: 78000, 256: 177000},
}

type cell struct {
	Backend   string             `json:"backend"`
	GPU       string             `json:"gpu"`
	Model     string             `json:"model"`
	Batch     int                `json:"batch_size"`
	Gemm      string             `json:"gemm_plugin"`
	Requests  int                `json:"num_requests"`
	Repeats   []float64          `json:"output_tok_s_repeats"`
	Median    float64            `json:"output_tok_s_median"`
	Roofline  float64            `json:"roofline_output_tok_s,omitempty"`
	Metrics   map[string]float64 `json:"metrics"`
	SetupSecs float64            `json:"setup_s"`
	Err       string             `json:"error,omitempty"`
}

func main() {
	modelName := flag.String("model", "tinyllama-1.1b", "zoo model or checkpoint directory")
	backend := flag.String("backend", "cuda", "engine backend")
	dtype := flag.String("dtype", "float16", "compute dtype")
	batches := flag.String("batch", "1,64,256", "batch sizes")
	gemms := flag.String("gemm", "auto,disable", "gemm_plugin values")
	requests := flag.Int("requests", 3000, "requests per cell")
	reqAt := flag.String("requests-at", "", "per-batch overrides, e.g. 1=64,64=1000")
	in := flag.Int("in", 128, "input tokens")
	out := flag.Int("out", 128, "output tokens")
	repeats := flag.Int("repeats", 1, "timed passes per cell (the median is reported)")
	warmup := flag.Int("warmup", 2, "warm-up requests")
	maxTokens := flag.Int("max-num-tokens", 8192, "max_num_tokens")
	jsonOut := flag.String("json", "", "append one JSON line per cell to this file")
	window := flag.String("profile-window", "", "after the timed passes, one profiled pass over these iterations (engine.Config.ProfileWindow syntax), for ncu --profile-from-start off")
	flag.Parse()

	gpu := gpuKind()
	over := map[int]int{}
	for _, kv := range splitNonEmpty(*reqAt) {
		b, n, ok := strings.Cut(kv, "=")
		bi, e1 := strconv.Atoi(b)
		ni, e2 := strconv.Atoi(n)
		if !ok || e1 != nil || e2 != nil {
			fail("-requests-at %q: want batch=requests", kv)
		}
		over[bi] = ni
	}
	var jf *os.File
	if *jsonOut != "" {
		f, err := os.OpenFile(*jsonOut, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			fail("%v", err)
		}
		jf = f
		defer f.Close()
	}
	var cells []cell
	for _, bs := range splitNonEmpty(*batches) {
		B, err := strconv.Atoi(bs)
		if err != nil {
			fail("-batch %q", bs)
		}
		for _, gemm := range splitNonEmpty(*gemms) {
			n := *requests
			if v, ok := over[B]; ok {
				n = v
			}
			c := cell{Backend: *backend, GPU: gpu, Model: *modelName, Batch: B, Gemm: gemm, Requests: n, Roofline: roofline[gpu][B]}
			if err := runCell(&c, *dtype, *in, *out, *repeats, *warmup, *maxTokens, *window); err != nil {
				c.Err = err.Error()
				fmt.Fprintf(os.Stderr, "cell batch=%d gemm=%s: %v\n", B, gemm, err)
			}
			cells = append(cells, c)
			if jf != nil {
				b, _ := json.Marshal(c)
				jf.Write(append(b, '\n'))
			}
			fmt.Fprintf(os.Stderr, "batch=%d gemm=%s: %.0f output tok/s %v\n", B, gemm, c.Median, c.Repeats)
		}
	}
	fmt.Printf("%-5s %-8s %6s %12s %12s %9s %10s %10s  %s\n", "batch", "gemm", "reqs", "out_tok/s", "total_tok/s", "%roof", "tpot_ms", "ttft_ms", "gpu")
	for _, c := range cells {
		roof := "-"
		if c.Roofline > 0 {
			roof = fmt.Sprintf("%.1f%%", 100*c.Median/c.Roofline)
		}
		if c.Err != "" {
			fmt.Printf("%-5d %-8s %6d FAILED: %s\n", c.Batch, c.Gemm, c.Requests, c.Err)
			continue
		}
		fmt.Printf("%-5d %-8s %6d %12.0f %12.0f %9s %10.3f %10.1f  %s\n", c.Batch, c.Gemm, c.Requests, c.Median,
			c.Metrics["system_total_throughput_tok_s"], roof, c.Metrics["tpot_avg_ms"], c.Metrics["ttft_avg_ms"], c.GPU)
	}
}

func runCell(c *cell, dtype string, in, out, repeats, warmup, maxTokens int, window string) error {
	t0 := time.Now()
	e, err := engine.New(context.Background(), engine.Config{Model: c.Model, Backend: c.Backend, Dtype: dtype,
		BatchSize: c.Batch, MaxNumTokens: maxTokens, GemmPlugin: c.Gemm, Warmup: warmup, Seed: 1, ProfileWindow: window})
	if err != nil {
		return err
	}
	defer e.Close()
	mc := e.Model()
	reqs, err := datasets.GenerateAll(datasets.Params{Dist: datasets.NormDist, NumRequests: c.Requests,
		InputMean: in, OutputMean: out, Seed: datasets.DefaultSeed, VocabSize: mc.DatasetVocab, EOSID: mc.EOS})
	if err != nil {
		return err
	}
	c.SetupSecs = time.Since(t0).Seconds()
	c.Backend = e.Backend()
	for range repeats {
		res, err := e.Run(context.Background(), reqs, engine.RunOptions{})
		if err != nil {
			return err
		}
		c.Repeats = append(c.Repeats, res.Metrics["system_output_throughput_tok_s"])
		c.Metrics = res.Metrics
	}
	if window != "" {
		if _, err := e.Run(context.Background(), reqs, engine.RunOptions{Profile: true}); err != nil {
			return fmt.Errorf("profiled pass: %w", err)
		}
	}
	if len(c.Repeats) == 0 {
		return nil
	}
	s := slices.Clone(c.Repeats)
	slices.Sort(s)
	c.Median = s[len(s)/2]
	return nil
}

// gpuKind is "H200", "H100" or the device's name.
func gpuKind() string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := cuda.Probe(ctx)
	if err != nil || len(d.GPUs) == 0 {
		return "none"
	}
	name := d.GPUs[0].Name
	for _, k := range []string{"H200", "H100"} {
		if strings.Contains(name, k) {
			return k
		}
	}
	return name
}

func splitNonEmpty(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "xrunbench: "+format+"\n", a...)
	os.Exit(2)
}
