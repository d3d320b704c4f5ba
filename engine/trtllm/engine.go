package trtllm

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/xrun-dev/xrun/datasets"
	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/driver"
	"github.com/xrun-dev/xrun/engine/driver/nsys"
	"github.com/xrun-dev/xrun/results/layout"
)

// Engine runs one cell's passes on TensorRT-LLM.
type Engine struct {
	*driver.Session
	opt       Options
	cell      *driver.Cell
	version   Version
	features  Features
	tool      driver.Tool
	engineDir string
	build     map[string]string
}

// Open asks the installed TensorRT-LLM its version, refuses what that
// release cannot run, and for the TensorRT backend builds (or finds in
// the cache) the cell's engine.
func Open(ctx context.Context, opt Options, c *driver.Cell) (*Engine, error) {
	s, err := driver.NewSession(c)
	if err != nil {
		return nil, err
	}
	e := &Engine{Session: s, opt: opt.WithDefaults(), cell: c}
	vc := e.versionCommand()
	var out bytes.Buffer
	if err := driver.Exec(ctx, vc, driver.ExecOptions{Env: c.Env, Stdout: &out, Audit: e.Audit, Pass: -1}); err != nil {
		return nil, fmt.Errorf("is TensorRT-LLM installed for %s? %w", e.opt.Python, err)
	}
	e.Remember(vc)
	raw := driver.LastLine(out.String())
	e.version = ParseVersion(raw)
	e.features = FeaturesOf(e.version)
	e.tool = driver.Tool{Name: "TensorRT-LLM", Version: raw, Path: e.opt.Bench}
	if msg := unsupported(e.version, e.backend()); msg != "" {
		return nil, fmt.Errorf("engine trtllm: %s", msg)
	}
	if e.backend() == BackendTensorRT {
		if err := e.ensureEngine(ctx); err != nil {
			return nil, err
		}
	}
	return e, nil
}

func (e *Engine) backend() string {
	if b := e.cell.Params.String("trtllm_backend"); b != "" {
		return b
	}
	return BackendPyTorch
}

func (e *Engine) profiled() bool {
	spans, _ := engine.ParseProfileWindow(e.cell.Engine.ProfileWindow)
	return len(spans) > 0
}

func (e *Engine) versionCommand() driver.Command { return VersionCommand(e.opt) }

// VersionCommand asks the TensorRT-LLM that o's Python has for its
// version; the last line it prints is the version.
func VersionCommand(o Options) driver.Command {
	o = o.WithDefaults()
	return driver.Command{Stage: driver.StageVersion, Argv: []string{o.Python, "-c", versionCode}, Env: o.Env}
}

// modelRef is the model as TensorRT-LLM takes it: a Hugging Face name,
// or the model's directory.
func (e *Engine) modelRef() string {
	if e.cell.ModelName != "" {
		return e.cell.ModelName
	}
	return e.cell.Engine.Model
}

// modelArgs are trtllm-bench's global model options: --model is the
// Hugging Face name (for a directory, its base name) and --model_path the
// directory the checkpoint and tokenizer are read from.
func (e *Engine) modelArgs() []string {
	if e.cell.ModelName != "" {
		return []string{"--model", e.cell.ModelName}
	}
	dir := e.cell.Engine.Model
	return []string{"--model", filepath.Base(dir), "--model_path", dir}
}

// benchCommand is one pass's trtllm-bench throughput, writing its
// reports into dir; the profiled pass runs under nsys with the window in
// TLLM_PROFILE_START_STOP.
func (e *Engine) benchCommand(dir string, profiled bool) driver.Command {
	p := e.cell.Params
	argv := []string{e.opt.Bench}
	argv = append(argv, e.modelArgs()...)
	argv = append(argv, "--workspace", dir, "throughput", "--dataset", e.cell.Dataset)
	switch {
	case e.backend() == BackendPyTorch:
		argv = append(argv, "--backend", BackendPyTorch)
	case e.features.BackendFlagForEngine:
		argv = append(argv, "--backend", BackendTensorRT, "--engine_dir", e.engineDir)
	default:
		argv = append(argv, "--engine_dir", e.engineDir)
	}
	argv = append(argv, "--max_batch_size", p.String("batch_size"), "--max_num_tokens", p.String("max_num_tokens"),
		"--kv_cache_free_gpu_mem_fraction", p.String("kv_cache_free_gpu_mem_fraction"),
		"--warmup", strconv.Itoa(e.cell.Engine.Warmup))
	if e.backend() == BackendPyTorch {
		// A TensorRT engine carries its own mapping.
		argv = append(argv, "--tp", strconv.Itoa(max(1, p.Int("tp"))), "--pp", strconv.Itoa(max(1, p.Int("pp"))))
		if ep := p.Int("ep"); ep > 1 {
			argv = append(argv, "--ep", strconv.Itoa(ep))
		}
	}
	if x := p.String("extra_llm_api_options"); x != "" && x != "none" {
		argv = append(argv, "--extra_llm_api_options", x)
	}
	if e.opt.Streaming {
		argv = append(argv, "--streaming")
	}
	argv = append(argv, "--report_json", filepath.Join(dir, "report.json"), "--iteration_log", filepath.Join(dir, "iterations.log"))
	if e.features.RequestJSON {
		argv = append(argv, "--request_json", filepath.Join(dir, "requests.json"))
	}
	env := slices.Clone(e.opt.Env)
	if p.String("routing_mode") == "perfect" {
		env = append(env, PerfectRouterEnv+"=1")
	}
	cmd := driver.Command{Stage: driver.StageBench, Argv: argv, Env: env}
	if !profiled {
		return cmd
	}
	cmd.Stage = driver.StageProfile
	cmd.Env = append(cmd.Env, ProfileStartStopEnv+"="+e.cell.Engine.ProfileWindow)
	if e.backend() == BackendPyTorch {
		cmd.Env = append(cmd.Env, TorchTraceEnv+"="+filepath.Join(dir, "torch-trace.json"))
	}
	cmd.Argv = append(nsys.ProfileArgs(e.opt.Nsys, filepath.Join(dir, "profile")), cmd.Argv...)
	return cmd
}

// Run runs one pass of trtllm-bench throughput and reads its reports.
func (e *Engine) Run(ctx context.Context, reqs []datasets.Request, opts engine.RunOptions) (*engine.Result, error) {
	return e.RunPass(ctx, opts.Profile, driver.PassSteps{
		Backend: e.Backend(),
		Command: func(p driver.Pass) driver.Command { return e.benchCommand(p.Dir, p.Profiled) },
		Read:    func(res *engine.Result, p driver.Pass) error { return e.readPass(res, reqs, p.Dir) },
		Collect: func(ctx context.Context, res *engine.Result, p driver.Pass) error {
			return e.collectProfile(ctx, res, p.Dir)
		},
	})
}

// readPass reads a pass's reports: the per-request records (xrun then
// computes the metrics as for its own engine) or, before TensorRT-LLM
// 1.0, the report's metrics; and the iteration log.
func (e *Engine) readPass(res *engine.Result, reqs []datasets.Request, dir string) error {
	rep, err := ReadReport(filepath.Join(dir, "report.json"))
	if err != nil {
		return err
	}
	numGPUs := max(1, e.cell.Engine.NumGPUs)
	if e.features.RequestJSON {
		recs, err := ReadRequestJSON(filepath.Join(dir, "requests.json"), reqs)
		if err != nil {
			return err
		}
		res.Requests = recs.Requests
		res.Metrics = recs.Metrics(numGPUs)
		if !recs.FirstToken {
			res.Notes = append(res.Notes, "trtllm-bench ran without --streaming: TTFT, TPOT and output speed are not measured")
		}
	} else {
		res.Metrics = rep.Metrics()
	}
	if n := rep.NumRequests(); n > 0 && n != len(reqs) {
		return fmt.Errorf("%s: trtllm-bench served %d requests; the dataset has %d", filepath.Join(dir, "report.json"), n, len(reqs))
	}
	iters, err := ReadIterationLog(filepath.Join(dir, "iterations.log"), e.cell.Engine.Warmup)
	if err != nil {
		return err
	}
	res.Iterations = iters
	return nil
}

// collectProfile turns the profiled pass's Nsight Systems report into
// the cell's kernels.csv and keeps the report; on the PyTorch backend
// TensorRT-LLM's own torch trace becomes trace.json.
func (e *Engine) collectProfile(ctx context.Context, res *engine.Result, dir string) error {
	st := nsys.StatsCommand(e.opt.Nsys, filepath.Join(dir, "profile.nsys-rep"), filepath.Join(dir, "stats"))
	e.Remember(st)
	p, err := nsys.Collect(ctx, nsys.CollectOptions{Report: filepath.Join(dir, "profile.nsys-rep"), CellDir: e.cell.Dir,
		Stats: st, Env: e.cell.Env, Audit: e.Audit})
	if err != nil {
		return err
	}
	res.KernelSummary, res.Files, res.Notes = p.KernelSummary, append(res.Files, p.Files...), append(res.Notes, p.Notes...)
	if e.backend() == BackendPyTorch {
		// Newer releases add the rank to the file name.
		for _, name := range []string{"torch-trace.json", "torch-trace-rank-0.json"} {
			src := filepath.Join(dir, name)
			if _, err := os.Stat(src); err == nil {
				if err := os.Rename(src, filepath.Join(e.cell.Dir, layout.TraceFile)); err != nil {
					return err
				}
				res.Files = append(res.Files, layout.TraceFile)
				break
			}
		}
	}
	return nil
}

// Backend names the engine as results show it: "trtllm/pytorch" or
// "trtllm/tensorrt gemm_plugin=auto".
func (e *Engine) Backend() string {
	if e.backend() == BackendTensorRT {
		return Name + "/" + BackendTensorRT + " gemm_plugin=" + e.cell.Params.String("gemm_plugin")
	}
	return Name + "/" + e.backend()
}

func (e *Engine) Model() engine.ModelConfig { return e.cell.Model }
func (e *Engine) Close() error              { return nil }
func (e *Engine) Tool() driver.Tool         { return e.tool }
func (e *Engine) Build() map[string]string  { return e.build }
