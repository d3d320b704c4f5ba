package driver

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/xrun-dev/xrun/engine"
)

// Params are a cell's resolved parameters by their spec paths
// ("batch_size", "dataset.input_mean"), with canonical values: int,
// float64 or string.
type Params map[string]any

// Int returns an integer parameter (0 when absent).
func (p Params) Int(path string) int {
	switch v := p[path].(type) {
	case int:
		return v
	case int64:
		return int(v)
	case float64:
		return int(v)
	}
	return 0
}

// String returns a parameter as text ("" when absent).
func (p Params) String(path string) string {
	v, ok := p[path]
	if !ok {
		return ""
	}
	return FormatValue(v)
}

// FormatValue writes a parameter value as a user writes it.
func FormatValue(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	return fmt.Sprint(v)
}

// Problem is a parameter value a driver cannot run: the plan reports it
// as a spec error at the value.
type Problem struct {
	Param string // the parameter's path
	Msg   string // what was expected
}

// Planner is what the plan asks of a driver about each cell.
type Planner interface {
	// Name is the engine's name as the spec writes it (engine: NAME).
	Name() string
	// Ignored names the parameters that cannot matter for a cell with
	// parameters p, each with the reason; the plan leaves them out of the
	// cell's identity and collapses cells that differ only in them.
	Ignored(p Params, m *engine.ModelConfig) map[string]string
	// Check returns the first value of p the driver cannot run, or nil.
	Check(p Params, m *engine.ModelConfig) *Problem
	// Commands lists the commands the cell's worker will run, in order,
	// with placeholder paths where they are only known at run time.
	Commands(c *Cell) ([]Command, error)
}

// Cell is one cell as a driver runs it.
type Cell struct {
	ID string
	// Dir is the cell's directory (absolute); tools write under
	// Dir/tool/.
	Dir string
	// Params are the parameters that identify the cell (results.json's).
	Params Params
	// Engine is the cell's engine configuration as the built-in engine
	// takes it (batch size, warm-up, profile window, ...).
	Engine engine.Config
	// Model is the model's shape; ModelName its Hugging Face name where
	// the zoo knows one ("" for a model directory).
	Model     engine.ModelConfig
	ModelName string
	// Dataset is the absolute path of the cell's requests, in
	// TensorRT-LLM's JSONL format; MaxInputLen and MaxSeqLen are its
	// longest prompt and longest prompt plus output (0 until the worker
	// has read it).
	Dataset                string
	MaxInputLen, MaxSeqLen int
	// ModelConfigHash identifies a model directory's config.json (""
	// for zoo models), so that what is built from it is rebuilt when it
	// changes.
	ModelConfigHash string
	// CacheDir is xrun's cache for things a driver builds once and reuses
	// across cells (TensorRT engines).
	CacheDir string
	// GPUs is how many GPUs the cell holds (CUDA_VISIBLE_DEVICES names
	// them in Env); 0 when it runs without one.
	GPUs int
	// Env is the environment tools inherit.
	Env []string
}

// Tool is an external engine's program as the cell's host has it.
type Tool struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	// Path is the executable that was found on PATH (or given).
	Path string `json:"path,omitempty"`
}

// External is implemented by engines that run a program of their own:
// the worker records the tool, the build parameters and the commands in
// the cell's record.
type External interface {
	engine.Engine
	Tool() Tool
	// Build holds the parameters a built artifact (a TensorRT engine) was
	// built with; nil when nothing is built.
	Build() map[string]string
	// Commands are the distinct commands run so far: the build, the first
	// timed pass, the profiled pass and its post-processing.
	Commands() []Command
}

// LastLine is a tool's last line of output, trimmed: where a version
// probe's answer is (banners and warnings come first).
func LastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return strings.TrimSpace(s)
}

// SortedKeys lists a map's keys in order.
func SortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// MarkWindow flags the iterations a profiled pass's window spans
// (TLLM_PROFILE_START_STOP's syntax, iterations counted from the first
// warm-up one) and returns the window's spans.
func MarkWindow(iters []engine.IterationRecord, window string) []engine.Span {
	spans, err := engine.ParseProfileWindow(window)
	if err != nil {
		return nil
	}
	for i := range iters {
		for _, s := range spans {
			if iters[i].Index >= s.First && iters[i].Index <= s.Last {
				iters[i].Profiled = true
			}
		}
	}
	return spans
}
