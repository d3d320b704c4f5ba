package runner

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/command"
	"github.com/xrun-dev/xrun/engine/driver"
	"github.com/xrun-dev/xrun/engine/trtllm"
)

// The spec's blocks for external engines: command (engine: command) and
// trtllm (engine: trtllm). They are decoded here, into the drivers' own
// types, so that nothing below the runner reads YAML.

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func checkJSONPath(p string) error { return driver.CheckPath(p) }

var commandKeys = []string{"argv", "env", "dir", "output", "metrics", "profiler", "version", "nsys"}

// placeholderNames are the names a command template may use: every
// parameter and the placeholders xrun fills (command.Specials).
func placeholderNames() []string {
	names := paramPaths(false)
	for k := range command.Specials {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// template decodes one template string.
func (d *decoder) template(n *yaml.Node, field string) (driver.Template, error) {
	n = resolve(n)
	s, ok := scalarString(n)
	if !ok {
		if n != nil && n.Kind == yaml.ScalarNode && n.ShortTag() != "!!null" {
			s = n.Value // numbers and booleans are words of an argv too
		} else {
			return driver.Template{}, d.errAt(n, field, "expected a string, got %s", describe(n))
		}
	}
	names := placeholderNames()
	t, err := driver.ParseTemplate(s,
		func(name string) bool { _, ok := slices.BinarySearch(names, name); return ok },
		func(name string) string {
			if best := closest(name, names, nil); best != "" {
				return fmt.Sprintf(" (did you mean {%s}?)", best)
			}
			return "; expected a parameter path ({batch_size}, {dataset.input_mean}, ...) or one of {" + strings.Join(sortedSpecials(), "}, {") + "}"
		})
	if err != nil {
		return t, d.errAt(n, field, "%v", err)
	}
	return t, nil
}

func sortedSpecials() []string {
	var out []string
	for k := range command.Specials {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func (d *decoder) templates(n *yaml.Node, field, what string) ([]driver.Template, error) {
	items, err := d.sequence(n, field, what)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, d.errAt(resolve(n), field, "expected %s, got an empty list", what)
	}
	out := make([]driver.Template, len(items))
	for i, it := range items {
		if out[i], err = d.template(it, index(field, i)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// commandBlock decodes the command block.
func (d *decoder) commandBlock(kn, n *yaml.Node) error {
	kvs, err := d.mapping(n, "command", "a mapping with argv, output and optionally env, dir, metrics, profiler, version")
	if err != nil {
		return err
	}
	def := &command.Definition{Dir: d.spec.Dir, Output: command.OutputRecords}
	if a, err := filepath.Abs(def.Dir); err == nil {
		def.Dir = a
	}
	var argvNode, metricsNode, outputNode *yaml.Node
	for _, kv := range kvs {
		f := "command." + kv.key
		switch kv.key {
		case "argv":
			argvNode = kv.kn
			if def.Argv, err = d.templates(kv.vn, f, "a list of words, the program first"); err != nil {
				return err
			}
		case "version":
			if def.Version, err = d.templates(kv.vn, f, "a list of words printing the program's version"); err != nil {
				return err
			}
			for i, t := range def.Version {
				if len(t.Names()) > 0 {
					return d.errAt(resolve(resolve(kv.vn).Content[i]), index(f, i), "takes no placeholders ({%s}): the version is asked once per study, not per cell", t.Names()[0])
				}
			}
		case "env":
			ekvs, err := d.envMapping(kv.vn, f)
			if err != nil {
				return err
			}
			for _, e := range ekvs {
				t, err := d.template(e.vn, join(f, e.key))
				if err != nil {
					return err
				}
				def.Env = append(def.Env, command.EnvVar{Name: e.key, Value: t})
			}
		case "dir":
			s, ok := scalarString(kv.vn)
			if !ok || s == "" {
				return d.errAt(resolve(kv.vn), f, "expected a directory (relative to the spec's), got %s", describe(kv.vn))
			}
			def.Dir = d.resolvePath(cleanPath(s))
			if a, err := filepath.Abs(def.Dir); err == nil {
				def.Dir = a
			}
		case "output":
			outputNode = resolve(kv.vn)
			s, ok := scalarString(kv.vn)
			if !ok || (s != command.OutputRecords && s != command.OutputReport) {
				return d.errAt(outputNode, f, "expected records (per-request records in xrun's requests.jsonl format) or report (a JSON report read through metrics), got %s", describe(kv.vn))
			}
			def.Output = s
		case "metrics":
			metricsNode = kv.kn
			mkvs, err := d.mapping(kv.vn, f, "a mapping of xrun metric names to JSON paths in the report")
			if err != nil {
				return err
			}
			def.Metrics = map[string]string{}
			for _, m := range mkvs {
				if !slices.Contains(engine.MetricKeys, m.key) {
					return d.errAt(m.kn, join(f, m.key), "unknown metric%s", suggestOrList(m.key, engine.MetricKeys))
				}
				p, ok := scalarString(m.vn)
				if !ok {
					return d.errAt(resolve(m.vn), join(f, m.key), "expected a JSON path such as performance.system_output_throughput_tok_s, got %s", describe(m.vn))
				}
				if err := checkJSONPath(p); err != nil {
					return d.errAt(resolve(m.vn), join(f, m.key), "%v", err)
				}
				def.Metrics[m.key] = p
			}
		case "profiler":
			vn := resolve(kv.vn)
			if s, ok := scalarString(vn); ok {
				switch s {
				case "nsys":
					def.Profiler = command.ProfilerNsys
				case "none":
					def.Profiler = command.ProfilerNone
				default:
					return d.errAt(vn, f, "expected nsys, none, or a list of words to put before argv in the profiled pass, got %q", s)
				}
				continue
			}
			if def.Wrap, err = d.templates(vn, f, "nsys, none, or a list of words to put before argv in the profiled pass"); err != nil {
				return err
			}
			def.Profiler = command.ProfilerWrap
		case "nsys":
			s, ok := scalarString(kv.vn)
			if !ok || s == "" {
				return d.errAt(resolve(kv.vn), f, "expected the nsys executable, got %s", describe(kv.vn))
			}
			def.NsysPath = s
		default:
			return d.errAt(kv.kn, f, "unknown key%s", suggestOrList(kv.key, commandKeys))
		}
	}
	switch {
	case argvNode == nil:
		return d.errAt(kn, "command.argv", "required: the program and its arguments, e.g. argv: [python3, bench.py, --dataset, \"{dataset}\", --records, \"{records}\"]")
	case !def.Reads():
		return d.errAt(argvNode, "command.argv", "the program must read the dataset xrun generates: put {dataset} in argv or env")
	case def.Output == command.OutputReport && len(def.Metrics) == 0:
		n := outputNode
		return d.errAt(n, "command.metrics", "output: report needs metrics: a mapping from xrun metric names to JSON paths in {report}, e.g. system_output_throughput_tok_s: performance.output_tok_s")
	case def.Output == command.OutputRecords && metricsNode != nil:
		return d.errAt(metricsNode, "command.metrics", "only for output: report; with records xrun computes every metric itself")
	}
	d.spec.Command = def
	d.commandKey = kn
	return nil
}

var trtllmKeys = []string{"bench", "build", "python", "nsys", "convert", "env", "streaming"}

// trtllmBlock decodes the trtllm block: where TensorRT-LLM's tools are.
func (d *decoder) trtllmBlock(kn, n *yaml.Node) error {
	kvs, err := d.mapping(n, "trtllm", "a mapping with bench, build, python, nsys, convert, env or streaming")
	if err != nil {
		return err
	}
	o := trtllm.Options{}
	for _, kv := range kvs {
		f := "trtllm." + kv.key
		switch kv.key {
		case "bench", "build", "python", "nsys":
			s, ok := scalarString(kv.vn)
			if !ok || strings.TrimSpace(s) == "" {
				return d.errAt(resolve(kv.vn), f, "expected an executable (a name on PATH or a path), got %s", describe(kv.vn))
			}
			*map[string]*string{"bench": &o.Bench, "build": &o.Build, "python": &o.Python, "nsys": &o.Nsys}[kv.key] = s
		case "streaming":
			v := resolve(kv.vn)
			if v == nil || v.Kind != yaml.ScalarNode || v.ShortTag() != "!!bool" {
				return d.errAt(v, f, "expected true or false, got %s", describe(kv.vn))
			}
			o.Streaming = v.Value == "true"
		case "env":
			ekvs, err := d.envMapping(kv.vn, f)
			if err != nil {
				return err
			}
			for _, e := range ekvs {
				v := resolve(e.vn)
				if v == nil || v.Kind != yaml.ScalarNode {
					return d.errAt(v, join(f, e.key), "expected a value, got %s", describe(e.vn))
				}
				o.Env = append(o.Env, e.key+"="+v.Value)
			}
		case "convert":
			items, err := d.sequence(kv.vn, f, "a list of words converting a checkpoint, with {model}, {checkpoint_dir}, {dtype}, {tp}, {pp}, {ep}")
			if err != nil {
				return err
			}
			if len(items) == 0 {
				return d.errAt(resolve(kv.vn), f, "expected the conversion command's words, got an empty list")
			}
			for i, it := range items {
				s, ok := scalarString(it)
				if !ok {
					return d.errAt(resolve(it), index(f, i), "expected a string, got %s", describe(it))
				}
				t, err := driver.ParseTemplate(s, func(name string) bool { return slices.Contains(trtllm.ConvertNames, name) },
					func(name string) string { return suggestOrList(name, trtllm.ConvertNames) })
				if err != nil {
					return d.errAt(resolve(it), index(f, i), "%v", err)
				}
				o.Convert = append(o.Convert, t)
			}
		default:
			return d.errAt(kv.kn, f, "unknown key%s", suggestOrList(kv.key, trtllmKeys))
		}
	}
	d.spec.Trtllm = &o
	d.trtllmKey = kn
	return nil
}

// envMapping decodes a mapping of environment variables, checking the
// names; the values are the caller's.
func (d *decoder) envMapping(n *yaml.Node, field string) ([]keyValue, error) {
	kvs, err := d.mapping(n, field, "a mapping of variable names to values")
	if err != nil {
		return nil, err
	}
	for _, e := range kvs {
		if !envNameRE.MatchString(e.key) {
			return nil, d.errAt(e.kn, join(field, e.key), "expected an environment variable name (letters, digits, _), got %q", e.key)
		}
	}
	return kvs, nil
}
