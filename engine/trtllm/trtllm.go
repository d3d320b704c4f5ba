package trtllm

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/driver"
	"github.com/xrun-dev/xrun/engine/driver/nsys"
	"github.com/xrun-dev/xrun/results/layout"
)

// Name is the engine's name in a spec.
const Name = "trtllm"

// trtllm_backend values.
const (
	BackendPyTorch  = "pytorch"
	BackendTensorRT = "tensorrt"
)

// Environment variables TensorRT-LLM reads.
const (
	ProfileStartStopEnv = "TLLM_PROFILE_START_STOP"
	TorchTraceEnv       = "TLLM_TORCH_PROFILE_TRACE"
	PerfectRouterEnv    = "ENABLE_PERFECT_ROUTER"
)

// versionCode asks the installed package its version without importing
// it (importing prints a banner and takes seconds); it is what
// trtllm-bench reports as the engine's version.
const versionCode = "import importlib.metadata as m; print(m.version('tensorrt_llm'))"

// Options are the spec's trtllm block: where the tools are and what
// every TensorRT-LLM command gets.
type Options struct {
	Bench  string // trtllm-bench
	Build  string // trtllm-build
	Python string // the Python that has tensorrt_llm installed
	Nsys   string // nsys
	// Convert, when set, replaces xrun's checkpoint conversion: an argv
	// template with {model}, {checkpoint_dir}, {dtype}, {tp}, {pp}, {ep}.
	Convert []driver.Template
	// Env are KEY=VALUE variables set for every command.
	Env []string
	// Streaming passes --streaming, so that TTFT and TPOT are measured.
	Streaming bool
}

// ConvertNames are the placeholders a convert template may use.
var ConvertNames = []string{"model", "checkpoint_dir", "dtype", "tp", "pp", "ep"}

// WithDefaults fills the executables' default names.
func (o Options) WithDefaults() Options {
	if o.Bench == "" {
		o.Bench = "trtllm-bench"
	}
	if o.Build == "" {
		o.Build = "trtllm-build"
	}
	if o.Python == "" {
		o.Python = "python3"
	}
	if o.Nsys == "" {
		o.Nsys = "nsys"
	}
	return o
}

// perfectRouterFamilies are the model families TensorRT-LLM's perfect
// router (ENABLE_PERFECT_ROUTER) exists for: GPT-OSS and DeepSeek-V3/R1.
var perfectRouterFamilies = []string{"gpt-oss", "deepseek-v3"}

// Planner answers the plan for trtllm cells.
type Planner struct{ Opt Options }

func (Planner) Name() string { return Name }

// Ignored names what TensorRT-LLM does not take from xrun's parameters.
func (Planner) Ignored(p driver.Params, m *engine.ModelConfig) map[string]string {
	out := map[string]string{
		"seed": "seed has no effect on engine trtllm: it runs the checkpoint's own weights (seed only seeds the built-in engine's random weights)",
	}
	if p.String("trtllm_backend") == BackendPyTorch {
		out["gemm_plugin"] = "gemm_plugin has no effect on trtllm_backend pytorch: it is a trtllm-build option, and the PyTorch backend builds no engine (TensorRT-LLM offers no equivalent switch)"
		out["dtype"] = "dtype has no effect on trtllm_backend pytorch: it runs the checkpoint's dtype (set dtype in extra_llm_api_options to change it)"
	}
	if m != nil && !m.MoE() {
		out["ep"] = fmt.Sprintf("ep has no effect on dense model %s", p.String("model"))
	}
	return out
}

// Check names what TensorRT-LLM cannot run.
func (Planner) Check(p driver.Params, m *engine.ModelConfig) *driver.Problem {
	tp, pp, ep := p.Int("tp"), p.Int("pp"), p.Int("ep")
	if m != nil && m.MoE() {
		switch mode := p.String("routing_mode"); mode {
		case "learned":
		case "perfect":
			if !slices.Contains(perfectRouterFamilies, m.Family) {
				return &driver.Problem{Param: "routing_mode", Msg: fmt.Sprintf("TensorRT-LLM's perfect router (ENABLE_PERFECT_ROUTER=1) exists for GPT-OSS and DeepSeek-V3/R1, not for %s (family %s); engine trtllm supports learned here", p.String("model"), m.Family)}
			}
		default:
			return &driver.Problem{Param: "routing_mode", Msg: fmt.Sprintf("%q: engine trtllm runs learned routing, or perfect (ENABLE_PERFECT_ROUTER=1) on GPT-OSS and DeepSeek-V3/R1; uniform and zipf routing exist only in xrun's own engine", mode)}
		}
	}
	if g := p.Int("gpus_per_cell"); tp*pp > g {
		return &driver.Problem{Param: "gpus_per_cell", Msg: fmt.Sprintf("%d, but tp %d x pp %d needs %d GPUs on engine trtllm", g, tp, pp, tp*pp)}
	}
	if m != nil && m.MoE() && ep > 1 && tp%ep != 0 {
		return &driver.Problem{Param: "ep", Msg: fmt.Sprintf("%d must divide tp %d (TensorRT-LLM splits each MoE layer's tp ranks into ep expert groups)", ep, tp)}
	}
	return nil
}

// Commands lists what a cell runs. The version decides some flags; the
// plan shows the commands of TensorRT-LLM 1.0 and later.
func (pl Planner) Commands(c *driver.Cell) ([]driver.Command, error) {
	e := &Engine{opt: pl.Opt.WithDefaults(), cell: c, version: ParseVersion(""), features: FeaturesOf(ParseVersion(""))}
	var out []driver.Command
	out = append(out, e.versionCommand())
	if e.backend() == BackendTensorRT {
		b := e.buildPlan(filepath.Join(c.CacheDir, engineCacheDir, "<build key>"))
		out = append(out, b.convert, b.build)
		e.engineDir = b.engineDir
	}
	pass0 := driver.PassDir(c, 0)
	out = append(out, e.benchCommand(pass0, false))
	if e.profiled() {
		dir := driver.PassDir(c, -1)
		out = append(out, e.benchCommand(dir, true))
		out = append(out, nsys.StatsCommand(e.opt.Nsys, filepath.Join(c.Dir, layout.NsysReportFile), filepath.Join(dir, "stats")))
	}
	return out, nil
}
