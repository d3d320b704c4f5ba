package command

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/xrun-dev/xrun/datasets"
	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/driver"
	"github.com/xrun-dev/xrun/engine/driver/nsys"
	"github.com/xrun-dev/xrun/results/layout"
)

// Name is the engine's name in a spec.
const Name = "command"

// What a program's output is.
const (
	OutputRecords = "records" // per-request records, xrun's requests.jsonl format
	OutputReport  = "report"  // a JSON report, read through Definition.Metrics
)

// Profilers a definition may name.
const (
	ProfilerNone = ""
	ProfilerNsys = "nsys" // Nsight Systems, driven by xrun
	ProfilerWrap = "wrap" // an argv prefix of the user's
)

// ProfileWindowEnv tells the program, in the profiled pass, which
// iterations to profile (TLLM_PROFILE_START_STOP's syntax).
const ProfileWindowEnv = "XRUN_PROFILE_WINDOW"

// Placeholders xrun fills besides the parameters.
var Specials = map[string]string{
	"dataset":       "the cell's dataset file (TensorRT-LLM's JSONL: task_id, input_ids, output_tokens)",
	"cell_dir":      "the cell's directory",
	"out_dir":       "a fresh directory for this pass's output",
	"records":       "where the program writes this pass's per-request records ({out_dir}/records.jsonl)",
	"report":        "where the program writes this pass's JSON report ({out_dir}/report.json)",
	"kernels":       "where the program may write the profile window's kernel summary ({out_dir}/kernels.csv, Nsight's cuda_gpu_kern_sum columns)",
	"pass":          "the pass number: timed repeats from 0, the profiled pass last",
	"gpus":          "how many GPUs the cell holds",
	"hf_model":      "the model's Hugging Face name (a zoo model) or its directory",
	"max_input_len": "the longest prompt of the cell's dataset, in tokens",
	"max_seq_len":   "the longest prompt plus output of the cell's dataset, in tokens (an engine build's max_seq_len)",
}

// EnvVar is one environment variable of the program.
type EnvVar struct {
	Name  string
	Value driver.Template
}

// Definition is the spec's command block, decoded.
type Definition struct {
	Argv []driver.Template
	Env  []EnvVar
	// Dir is the working directory (absolute): the spec's directory
	// unless the block says otherwise.
	Dir    string
	Output string
	// Metrics maps xrun metric names to JSON paths in the report.
	Metrics map[string]string
	// Profiler is ProfilerNone, ProfilerNsys or ProfilerWrap (Wrap is
	// then the argv prefix).
	Profiler string
	Wrap     []driver.Template
	// Version, when set, is a command printing the program's version
	// (its last line of output is recorded). It takes no placeholders:
	// it is asked once per study.
	Version []driver.Template
	// NsysPath is the nsys executable (default "nsys").
	NsysPath string
}

// always are the parameters a command cell uses whatever its templates
// say: xrun generates the dataset, holds the GPUs, runs the profiled pass
// and takes the model's shape for the roofline.
var always = []string{"engine", "model", "gpus_per_cell", "timeout", "profile_window"}

// Used reports whether the templates use parameter path.
func (d *Definition) Used(path string) bool {
	if slices.Contains(always, path) || strings.HasPrefix(path, "dataset.") {
		return true
	}
	for _, ts := range [][]driver.Template{d.Argv, d.Wrap} {
		for _, t := range ts {
			if slices.Contains(t.Names(), path) {
				return true
			}
		}
	}
	for _, e := range d.Env {
		if slices.Contains(e.Value.Names(), path) {
			return true
		}
	}
	return false
}

// Reads reports whether the templates hand the program its dataset.
func (d *Definition) Reads() bool { return d.uses("dataset") }

func (d *Definition) uses(name string) bool {
	for _, t := range d.Argv {
		if slices.Contains(t.Names(), name) {
			return true
		}
	}
	for _, e := range d.Env {
		if slices.Contains(e.Value.Names(), name) {
			return true
		}
	}
	return false
}

// Planner answers the plan for command cells.
type Planner struct{ Def *Definition }

func (Planner) Name() string { return Name }

// Ignored lists the parameters no template uses.
func (pl Planner) Ignored(p driver.Params, _ *engine.ModelConfig) map[string]string {
	out := map[string]string{}
	for k := range p {
		if !pl.Def.Used(k) {
			out[k] = fmt.Sprintf("%s has no effect on engine command: the command block's argv and env do not use {%s}", k, k)
		}
	}
	return out
}

func (Planner) Check(driver.Params, *engine.ModelConfig) *driver.Problem { return nil }

// Commands lists what a cell runs: the version probe, a timed pass (each
// repeat runs it again in a fresh output directory) and, for a profiled
// cell, the profiled pass and the profiler's post-processing.
func (pl Planner) Commands(c *driver.Cell) ([]driver.Command, error) {
	e := &Engine{def: pl.Def, cell: c}
	var out []driver.Command
	if len(pl.Def.Version) > 0 {
		out = append(out, e.versionCommand())
	}
	out = append(out, e.passCommand(0, false, driver.PassDir(c, 0)))
	if spans, _ := engine.ParseProfileWindow(c.Engine.ProfileWindow); len(spans) > 0 {
		dir := driver.PassDir(c, -1)
		out = append(out, e.passCommand(-1, true, dir))
		if pl.Def.Profiler == ProfilerNsys {
			out = append(out, nsys.StatsCommand(pl.Def.nsysPath(), filepath.Join(dir, "profile.nsys-rep"), filepath.Join(dir, "stats")))
		}
	}
	return out, nil
}

func (d *Definition) nsysPath() string {
	if d.NsysPath != "" {
		return d.NsysPath
	}
	return "nsys"
}

// Engine runs one cell's passes.
type Engine struct {
	*driver.Session
	def  *Definition
	cell *driver.Cell
	tool driver.Tool
}

// Open prepares a cell's passes: the tool's directory, and the program's
// version when the block says how to ask for it.
func Open(ctx context.Context, def *Definition, c *driver.Cell) (*Engine, error) {
	if len(def.Argv) == 0 {
		return nil, errors.New("engine command: the command block has no argv")
	}
	s, err := driver.NewSession(c)
	if err != nil {
		return nil, err
	}
	e := &Engine{Session: s, def: def, cell: c, tool: driver.Tool{Name: Name, Path: def.Argv[0].Raw}}
	if len(def.Version) > 0 {
		cmd := e.versionCommand()
		var out bytes.Buffer
		err := driver.Exec(ctx, cmd, driver.ExecOptions{Env: c.Env, Stdout: &out, Audit: e.Audit, Pass: -1})
		if err != nil {
			return nil, fmt.Errorf("asking the program's version: %w", err)
		}
		e.Remember(cmd)
		e.tool.Version = driver.LastLine(out.String())
	}
	return e, nil
}

func (e *Engine) versionCommand() driver.Command {
	vars := e.vars(-1, driver.PassDir(e.cell, -1), false)
	return driver.Command{Stage: driver.StageVersion, Argv: expandAll(e.def.Version, vars), Dir: e.def.Dir}
}

func (e *Engine) vars(pass int, outDir string, profiled bool) map[string]string {
	v := make(map[string]string, len(e.cell.Params)+len(Specials))
	for k, x := range e.cell.Params {
		v[k] = driver.FormatValue(x)
	}
	if !profiled {
		v["profile_window"] = "none"
	}
	hf := e.cell.ModelName
	if hf == "" {
		hf = e.cell.Engine.Model
	}
	v["dataset"] = e.cell.Dataset
	v["cell_dir"] = e.cell.Dir
	v["out_dir"] = outDir
	v["records"] = filepath.Join(outDir, "records.jsonl")
	v["report"] = filepath.Join(outDir, "report.json")
	v["kernels"] = filepath.Join(outDir, "kernels.csv")
	v["pass"] = strconv.Itoa(pass)
	v["gpus"] = strconv.Itoa(e.cell.GPUs)
	v["hf_model"] = hf
	v["max_input_len"] = strconv.Itoa(e.cell.MaxInputLen)
	v["max_seq_len"] = strconv.Itoa(e.cell.MaxSeqLen)
	return v
}

func expandAll(ts []driver.Template, vars map[string]string) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Expand(vars)
	}
	return out
}

// passCommand is the command of a pass; pass -1 with profiled is the
// profiled pass.
func (e *Engine) passCommand(pass int, profiled bool, outDir string) driver.Command {
	vars := e.vars(pass, outDir, profiled)
	cmd := driver.Command{Stage: driver.StageBench, Argv: expandAll(e.def.Argv, vars), Dir: e.def.Dir}
	for _, ev := range e.def.Env {
		cmd.Env = append(cmd.Env, ev.Name+"="+ev.Value.Expand(vars))
	}
	if !profiled {
		return cmd
	}
	cmd.Stage = driver.StageProfile
	cmd.Env = append(cmd.Env, ProfileWindowEnv+"="+e.cell.Engine.ProfileWindow)
	switch e.def.Profiler {
	case ProfilerNsys:
		cmd.Argv = append(nsys.ProfileArgs(e.def.nsysPath(), filepath.Join(outDir, "profile")), cmd.Argv...)
	case ProfilerWrap:
		cmd.Argv = append(expandAll(e.def.Wrap, vars), cmd.Argv...)
	}
	return cmd
}

// Run runs one pass: a timed one, or with opts.Profile the profiled one.
func (e *Engine) Run(ctx context.Context, reqs []datasets.Request, opts engine.RunOptions) (*engine.Result, error) {
	return e.RunPass(ctx, opts.Profile, driver.PassSteps{
		Backend: e.Backend(),
		Command: func(p driver.Pass) driver.Command { return e.passCommand(p.N, p.Profiled, p.Dir) },
		Read:    func(res *engine.Result, p driver.Pass) error { return e.readOutput(res, reqs, p.Dir) },
		Collect: func(ctx context.Context, res *engine.Result, p driver.Pass) error {
			return e.collectProfile(ctx, res, p.Dir)
		},
	})
}

func (e *Engine) readOutput(res *engine.Result, reqs []datasets.Request, outDir string) error {
	switch e.def.Output {
	case OutputReport:
		path := filepath.Join(outDir, "report.json")
		m, err := ReadReport(path, e.def.Metrics)
		if err != nil {
			return err
		}
		res.Metrics = m
	default:
		recs, err := driver.ReadRecords(filepath.Join(outDir, "records.jsonl"), reqs)
		if err != nil {
			return err
		}
		res.Requests = recs.Requests
		res.Metrics = recs.Metrics(max(1, e.cell.Engine.NumGPUs))
		if !recs.FirstToken {
			res.Notes = append(res.Notes, "the program's records have no first-token times: TTFT, TPOT and output speed are not reported")
		}
	}
	return nil
}

// collectProfile turns what the profiled pass left into the cell's
// profile files: the Nsight Systems report and its kernel summary, or a
// kernel summary the program wrote itself.
func (e *Engine) collectProfile(ctx context.Context, res *engine.Result, outDir string) error {
	kernels := filepath.Join(outDir, "kernels.csv")
	if e.def.Profiler == ProfilerNsys {
		rep := filepath.Join(outDir, "profile.nsys-rep")
		st := nsys.StatsCommand(e.def.nsysPath(), rep, filepath.Join(outDir, "stats"))
		e.Remember(st)
		p, err := nsys.Collect(ctx, nsys.CollectOptions{Report: rep, CellDir: e.cell.Dir, Stats: st, Env: e.cell.Env, Audit: e.Audit})
		if err != nil {
			return err
		}
		res.KernelSummary, res.Files = p.KernelSummary, append(res.Files, p.Files...)
		res.Notes = append(res.Notes, p.Notes...)
		return nil
	}
	if _, err := os.Stat(kernels); err == nil {
		dst := filepath.Join(e.cell.Dir, layout.KernelsFile)
		if err := nsys.ConvertKernelSummary(kernels, dst); err != nil {
			return err
		}
		res.KernelSummary = dst
		return nil
	}
	res.Notes = append(res.Notes, "no kernel summary: the command block names no profiler and the program wrote none to {kernels}")
	return nil
}

// Backend names the program: "command/<argv[0]'s base name>".
func (e *Engine) Backend() string {
	name := filepath.Base(e.def.Argv[0].Raw)
	if len(e.def.Argv) > 1 && isInterpreter(name) {
		name += " " + filepath.Base(e.def.Argv[1].Raw)
	}
	return Name + "/" + name
}

// isInterpreter reports whether a program runs the script named after it.
func isInterpreter(name string) bool {
	return strings.HasPrefix(name, "python") || slices.Contains([]string{"bash", "sh", "node", "ruby", "perl", "env", "uv", "torchrun"}, name)
}

func (e *Engine) Model() engine.ModelConfig { return e.cell.Model }
func (e *Engine) Close() error              { return nil }
func (e *Engine) Tool() driver.Tool         { return e.tool }
func (e *Engine) Build() map[string]string  { return nil }

// ReadReport reads a JSON report and takes each metric from its path.
func ReadReport(path string, metrics map[string]string) (map[string]float64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, &driver.FormatError{File: path, Msg: "no report: " + err.Error()}
	}
	var doc any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, &driver.FormatError{File: path, Msg: "not JSON: " + err.Error()}
	}
	out := make(map[string]float64, len(metrics))
	for _, k := range driver.SortedKeys(metrics) {
		v, err := driver.LookupNumber(doc, metrics[k])
		if err != nil {
			return nil, &driver.FormatError{File: path, Msg: fmt.Sprintf("metric %s: %v", k, err)}
		}
		out[k] = v
	}
	return out, nil
}
