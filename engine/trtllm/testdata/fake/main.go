// Command fake is the test double of the programs xrun's TensorRT-LLM
// driver runs: TensorRT-LLM's trtllm-bench and trtllm-build, Nsight
// Systems' nsys, and the python3 that asks for TensorRT-LLM's version or
// runs a checkpoint conversion script. It plays the role of the name it is
// run under (filepath.Base(os.Args[0])); engine/trtllm/trtllmtest builds it
// and links it under each name.
//
// Nothing runs on a GPU. trtllm-bench simulates in-flight batching
// deterministically and writes what the real tool writes (banner, log
// records, text report, --report_json, --request_json, --output_json,
// --iteration_log) in the real formats of the TensorRT-LLM version it is
// told to be (XRUN_FAKE_TRTLLM_VERSION). Under the fake nsys, the profiled
// iterations' kernels go to a capture file of the fake's own, which nsys
// profile wraps into the .nsys-rep and nsys stats summarises as the real
// CUDA GPU Kernel Summary.
//
// The environment variables it reads are documented on the constants of
// engine/trtllm/trtllmtest.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Environment variables of the fake (mirrored by engine/trtllm/trtllmtest).
const (
	envVersion      = "XRUN_FAKE_TRTLLM_VERSION"
	envMissing      = "XRUN_FAKE_TRTLLM_MISSING"
	envFault        = "XRUN_FAKE_TRTLLM_FAULT"
	envSeed         = "XRUN_FAKE_SEED"
	envCapture      = "XRUN_FAKE_NSYS_CAPTURE"
	envCaptureRange = "XRUN_FAKE_NSYS_CAPTURE_RANGE"
	envCaptureEnd   = "XRUN_FAKE_NSYS_CAPTURE_RANGE_END"
	envNsysOld      = "XRUN_FAKE_NSYS_OLD"
	envNsysStrict   = "XRUN_FAKE_NSYS_STRICT"
)

const (
	// perfBase is where the simulated time.perf_counter_ns() clock starts.
	perfBase       int64 = 8_000_000_000_000
	gpuName              = "NVIDIA H100 80GB HBM3"
	gpuMemBytes    int64 = 85_020_000_256
	gpuMemClock          = 2.619
	pyLib                = "/usr/local/lib/python3.12/dist-packages"
	captureMagic         = "XRUN-FAKE-NSYS-REP 1"
	nsysVersion          = "2024.5.1.113-245134619542v0"
	nsysOldVersion       = "2021.3.1.54-ee9c30a"
)

// wallBase is the wall-clock time of perfBase: the fake's clock is fixed
// so that its output does not depend on when it runs.
var wallBase = time.Date(2025, time.July, 14, 9, 30, 0, 0, time.UTC)

func wallAt(ns int64) time.Time { return wallBase.Add(time.Duration(ns - perfBase)) }

var out = bufio.NewWriterSize(os.Stdout, 64<<10)

func outln(s string) { out.WriteString(s); out.WriteByte('\n') }

func errln(s string) { os.Stderr.WriteString(s + "\n") }

func errf(format string, a ...any) { fmt.Fprintf(os.Stderr, format, a...) }

func getenv(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func main() {
	role := strings.TrimSuffix(filepath.Base(os.Args[0]), ".exe")
	var code int
	switch role {
	case "trtllm-bench":
		code = benchMain(os.Args[1:])
	case "trtllm-build":
		code = buildMain(os.Args[1:])
	case "nsys":
		code = nsysMain(os.Args[1:])
	case "python3", "python":
		code = pythonMain(os.Args[1:])
	default:
		errf("fake: unknown role %q: link this program as trtllm-bench, trtllm-build, nsys or python3\n", role)
		code = 2
	}
	out.Flush()
	os.Exit(code)
}

// ---------------------------------------------------------------------------
// Versions

type version struct {
	raw  string
	nums [3]int
	pre  bool // a pre-release (rc, a, b, dev) of nums
}

var versionRE = regexp.MustCompile(`^(\d+)\.(\d+)(?:\.(\d+))?(.*)$`)

func parseVersion(s string) (version, error) {
	s = strings.TrimSpace(s)
	m := versionRE.FindStringSubmatch(s)
	if m == nil {
		return version{}, fmt.Errorf("%q is not a version", s)
	}
	v := version{raw: s}
	v.nums[0], _ = strconv.Atoi(m[1])
	v.nums[1], _ = strconv.Atoi(m[2])
	if m[3] != "" {
		v.nums[2], _ = strconv.Atoi(m[3])
	}
	rest := strings.TrimPrefix(strings.ToLower(m[4]), ".")
	v.pre = strings.HasPrefix(rest, "rc") || strings.HasPrefix(rest, "a") || strings.HasPrefix(rest, "b") || strings.HasPrefix(rest, "dev")
	return v, nil
}

// atLeast compares major.minor, pre-releases included (1.0.0rc4 is 1.0).
func (v version) atLeast(major, minor int) bool {
	return v.nums[0] > major || v.nums[0] == major && v.nums[1] >= minor
}

// releasedAtLeast is v >= major.minor.patch, a pre-release of that
// release counting as older.
func (v version) releasedAtLeast(major, minor, patch int) bool {
	w := [3]int{major, minor, patch}
	for i := range w {
		if v.nums[i] != w[i] {
			return v.nums[i] > w[i]
		}
	}
	return !v.pre
}

func loadVersion() (version, bool) {
	v, err := parseVersion(getenv(envVersion, "1.0.0"))
	if err != nil {
		errf("fake: %s: %v\n", envVersion, err)
		return v, false
	}
	return v, true
}

// banner is what `import tensorrt_llm` prints to stdout: TensorRT-LLM
// dropped the hyphen in 1.1.0 (1.1.0rc3 still printed it).
func banner(v version) string {
	if v.releasedAtLeast(1, 1, 0) {
		return "[TensorRT-LLM] TensorRT LLM version: " + v.raw
	}
	return "[TensorRT-LLM] TensorRT-LLM version: " + v.raw
}

// ---------------------------------------------------------------------------
// Python's JSON and repr output

type kv struct {
	k string
	v any
}

// obj is a Python dict: keys in insertion order.
type obj []kv

func (o obj) get(k string) any {
	for _, e := range o {
		if e.k == k {
			return e.v
		}
	}
	return nil
}

func (o obj) getObj(k string) obj {
	x, _ := o.get(k).(obj)
	return x
}

func (o obj) getInt(k string, def int) int {
	switch x := o.get(k).(type) {
	case int:
		return x
	case float64:
		return int(x)
	}
	return def
}

func (o obj) getFloat(k string, def float64) float64 {
	switch x := o.get(k).(type) {
	case int:
		return float64(x)
	case float64:
		return x
	}
	return def
}

func (o obj) getStr(k, def string) string {
	if x, ok := o.get(k).(string); ok {
		return x
	}
	return def
}

func (o obj) set(k string, v any) obj {
	for i := range o {
		if o[i].k == k {
			o[i].v = v
			return o
		}
	}
	return append(o, kv{k, v})
}

func sortedObj(m map[string]any) obj {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	o := make(obj, 0, len(keys))
	for _, k := range keys {
		o = append(o, kv{k, m[k]})
	}
	return o
}

// pyFloat is Python's repr of a float: the shortest round-trip digits,
// fixed notation for exponents -4..15, else d.ddde+XX.
func pyFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	s := strconv.FormatFloat(f, 'e', -1, 64)
	sign := ""
	if s[0] == '-' {
		sign, s = "-", s[1:]
	}
	i := strings.IndexByte(s, 'e')
	mant, exp := s[:i], 0
	exp, _ = strconv.Atoi(s[i+1:])
	digits := strings.Replace(mant, ".", "", 1)
	if exp >= -4 && exp < 16 {
		var ip, fp string
		if exp >= 0 {
			if len(digits) <= exp+1 {
				ip, fp = digits+strings.Repeat("0", exp+1-len(digits)), "0"
			} else {
				ip, fp = digits[:exp+1], digits[exp+1:]
			}
		} else {
			ip, fp = "0", strings.Repeat("0", -exp-1)+digits
		}
		return sign + ip + "." + fp
	}
	m := digits[:1]
	if len(digits) > 1 {
		m += "." + digits[1:]
	}
	return fmt.Sprintf("%s%se%+03d", sign, m, exp)
}

func jsonQuote(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r < 0x20 || r >= 0x7f && r < 0x10000:
			fmt.Fprintf(b, `\u%04x`, r)
		case r >= 0x10000:
			r -= 0x10000
			fmt.Fprintf(b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

// encSeq writes n elements between open and close as json.dumps does:
// one per line when indenting, else separated by ", ".
func encSeq(b *strings.Builder, open, close string, n, indent, level int, elem func(int)) {
	if n == 0 {
		b.WriteString(open + close)
		return
	}
	b.WriteString(open)
	for i := range n {
		if i > 0 {
			b.WriteString(map[bool]string{true: ",", false: ", "}[indent > 0])
		}
		if indent > 0 {
			b.WriteString("\n" + strings.Repeat(" ", indent*(level+1)))
		}
		elem(i)
	}
	if indent > 0 {
		b.WriteString("\n" + strings.Repeat(" ", indent*level))
	}
	b.WriteString(close)
}

// dumpJSON is Python's json.dumps(v, indent=indent) (indent 0: no indent,
// separators ", " and ": "), ensure_ascii on.
func dumpJSON(v any, indent int) string {
	var b strings.Builder
	encJSON(&b, v, indent, 0)
	return b.String()
}

func encJSON(b *strings.Builder, v any, indent, level int) {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		if x {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case int:
		b.WriteString(strconv.Itoa(x))
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case float64:
		switch {
		case math.IsNaN(x):
			b.WriteString("NaN")
		case math.IsInf(x, 1):
			b.WriteString("Infinity")
		case math.IsInf(x, -1):
			b.WriteString("-Infinity")
		default:
			b.WriteString(pyFloat(x))
		}
	case string:
		jsonQuote(b, x)
	case obj:
		encSeq(b, "{", "}", len(x), indent, level, func(i int) {
			jsonQuote(b, x[i].k)
			b.WriteString(": ")
			encJSON(b, x[i].v, indent, level+1)
		})
	case []any:
		encSeq(b, "[", "]", len(x), indent, level, func(i int) { encJSON(b, x[i], indent, level+1) })
	default:
		panic(fmt.Sprintf("encJSON: %T", v))
	}
}

// pyRepr is Python's repr of a dict parsed from JSON: single-quoted
// strings, True/False/None.
func pyRepr(v any) string {
	var b strings.Builder
	encRepr(&b, v)
	return b.String()
}

func reprString(b *strings.Builder, s string) {
	q := byte('\'')
	if strings.ContainsRune(s, '\'') && !strings.ContainsRune(s, '"') {
		q = '"'
	}
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == rune(q) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(b, `\x%02x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(q)
}

func encRepr(b *strings.Builder, v any) {
	switch x := v.(type) {
	case nil:
		b.WriteString("None")
	case bool:
		if x {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case int:
		b.WriteString(strconv.Itoa(x))
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case float64:
		b.WriteString(pyFloat(x))
	case string:
		reprString(b, x)
	case obj:
		b.WriteByte('{')
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			reprString(b, e.k)
			b.WriteString(": ")
			encRepr(b, e.v)
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			encRepr(b, e)
		}
		b.WriteByte(']')
	default:
		panic(fmt.Sprintf("encRepr: %T", v))
	}
}

// parseOrdered reads JSON keeping the order of object keys; integer
// literals become int, other numbers float64.
func parseOrdered(data []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	v, err := parseValue(d)
	if err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("extra data after the JSON value")
	}
	return v, nil
}

func parseValue(d *json.Decoder) (any, error) {
	t, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch x := t.(type) {
	case json.Delim:
		switch x {
		case '{':
			o := obj{}
			for d.More() {
				kt, err := d.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				v, err := parseValue(d)
				if err != nil {
					return nil, err
				}
				o = append(o, kv{k, v})
			}
			_, err := d.Token()
			return o, err
		case '[':
			l := []any{}
			for d.More() {
				v, err := parseValue(d)
				if err != nil {
					return nil, err
				}
				l = append(l, v)
			}
			_, err := d.Token()
			return l, err
		}
		return nil, fmt.Errorf("unexpected %v", x)
	case json.Number:
		s := x.String()
		if !strings.ContainsAny(s, ".eE") {
			if n, err := strconv.Atoi(s); err == nil {
				return n, nil
			}
		}
		f, err := strconv.ParseFloat(s, 64)
		return f, err
	default:
		return x, nil // string, bool, nil
	}
}

// hubConfigs are the config.json of the Hugging Face models the fake
// conversion "downloads" by name.
var hubConfigs = map[string]string{
	"TinyLlama/TinyLlama-1.1B-Chat-v1.0": `{"architectures": ["LlamaForCausalLM"], "hidden_size": 2048, "intermediate_size": 5632, "num_attention_heads": 32, "num_hidden_layers": 22, "num_key_value_heads": 4, "vocab_size": 32000, "max_position_embeddings": 2048, "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "torch_dtype": "bfloat16", "model_type": "llama"}`,
}

func parseJSONObj(data []byte) (obj, error) {
	v, err := parseOrdered(data)
	if err != nil {
		return nil, err
	}
	o, ok := v.(obj)
	if !ok {
		return nil, fmt.Errorf("not a JSON object")
	}
	return o, nil
}

func readJSONObj(path string) (obj, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	v, err := parseOrdered(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	o, ok := v.(obj)
	if !ok {
		return nil, fmt.Errorf("%s: not a JSON object", path)
	}
	return o, nil
}

// pyPath is str(pathlib.Path(p)).
func pyPath(p string) string {
	if p == "" {
		return "."
	}
	var parts []string
	for _, s := range strings.Split(p, "/") {
		if s != "" && s != "." {
			parts = append(parts, s)
		}
	}
	r := strings.Join(parts, "/")
	if strings.HasPrefix(p, "/") {
		r = "/" + r
	}
	if r == "" {
		r = "."
	}
	return r
}

func fmtDuration(d time.Duration) string {
	s := int(d.Seconds())
	return fmt.Sprintf("%02d:%02d:%02d", s/3600, s/60%60, s%60)
}

// ---------------------------------------------------------------------------
// TensorRT-LLM's logger: '[%(asctime)s] %(message)s' with the message
// prefixed '[TRT-LLM] [I] ', on stderr.

var logLevels = map[string]int{"internal_error": 0, "error": 1, "warning": 2, "info": 3, "verbose": 4, "debug": 5, "trace": 6}

type tlog struct {
	level int
	now   *int64
}

func (l *tlog) log(min int, tag, msg string) {
	if l.level < min {
		return
	}
	t := perfBase
	if l.now != nil {
		t = *l.now
	}
	errf("[%s] [TRT-LLM] [%s] %s\n", wallAt(t).Format("01/02/2006-15:04:05"), tag, msg)
}

func (l *tlog) info(format string, a ...any) { l.log(3, "I", fmt.Sprintf(format, a...)) }
func (l *tlog) warn(format string, a ...any) { l.log(2, "W", fmt.Sprintf(format, a...)) }

// ---------------------------------------------------------------------------
// Python tracebacks

func frame(file string, line int, fn, code string) string {
	return fmt.Sprintf("  File \"%s\", line %d, in %s\n    %s\n", file, line, fn, code)
}

func traceback(frames []string, last string) {
	var b strings.Builder
	b.WriteString("Traceback (most recent call last):\n")
	for _, f := range frames {
		b.WriteString(f)
	}
	b.WriteString(last)
	b.WriteString("\n")
	out.Flush()
	os.Stderr.WriteString(b.String())
}

// benchFrames are the frames of trtllm-bench's throughput command down to
// the function named last.
func benchFrames(extra ...string) []string {
	f := []string{
		frame("/usr/local/bin/trtllm-bench", 8, "<module>", "sys.exit(main())"),
		frame(pyLib+"/click/core.py", 1161, "__call__", "return self.main(*args, **kwargs)"),
		frame(pyLib+"/click/core.py", 1082, "main", "rv = self.invoke(ctx)"),
		frame(pyLib+"/click/core.py", 1697, "invoke", "return _process_result(sub_ctx.command.invoke(sub_ctx))"),
		frame(pyLib+"/click/core.py", 1443, "invoke", "return ctx.invoke(self.callback, **ctx.params)"),
		frame(pyLib+"/click/core.py", 788, "invoke", "return __callback(*args, **kwargs)"),
		frame(pyLib+"/click/decorators.py", 33, "new_func", "return f(get_current_context(), *args, **kwargs)"),
	}
	return append(f, extra...)
}

// ---------------------------------------------------------------------------
// click (trtllm-bench's command-line parser)

type copt struct {
	names    []string
	key      string
	flag     bool
	kind     string // str, path, exists, int, float, choice
	choices  []string
	required bool
}

func (o *copt) hint() string {
	q := make([]string, len(o.names))
	for i, n := range o.names {
		q[i] = "'" + n + "'"
	}
	return strings.Join(q, " / ")
}

type clickCmd struct {
	path  string
	usage string
	group bool
	opts  []*copt
}

type clickArgs struct {
	vals map[string]string
	rest []string
}

func (a *clickArgs) has(k string) bool { _, ok := a.vals[k]; return ok }

func (c *clickCmd) find(name string) *copt {
	for _, o := range c.opts {
		for _, n := range o.names {
			if n == name {
				return o
			}
		}
	}
	return nil
}

func (c *clickCmd) fail(msg string) int {
	out.Flush()
	errf("Usage: %s %s\nTry '%s --help' for help.\n\nError: %s\n", c.path, c.usage, c.path, msg)
	return 2
}

func (c *clickCmd) help() int {
	outln(fmt.Sprintf("Usage: %s %s\n\nOptions:", c.path, c.usage))
	for _, o := range c.opts {
		arg := ""
		if !o.flag {
			arg = " " + strings.ToUpper(o.kind)
			if o.kind == "choice" {
				arg = " [" + strings.Join(o.choices, "|") + "]"
			}
		}
		req := ""
		if o.required {
			req = "  [required]"
		}
		outln("  " + strings.Join(o.names, ", ") + arg + req)
	}
	outln("  --help  Show this message and exit.")
	return 0
}

// parse reads the options; a group stops at its first argument (the
// command). It returns click's error message, if any.
func (c *clickCmd) parse(args []string) (*clickArgs, string, bool) {
	p := &clickArgs{vals: map[string]string{}}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			rest := args[i+1:]
			if c.group {
				p.rest = rest
				return p, "", false
			}
			if len(rest) > 0 {
				return nil, fmt.Sprintf("Got unexpected extra argument (%s)", rest[0]), false
			}
			break
		}
		if a == "--help" {
			return p, "", true
		}
		if len(a) > 1 && a[0] == '-' {
			name, val, hasVal := a, "", false
			if strings.HasPrefix(a, "--") {
				if j := strings.IndexByte(a, '='); j >= 0 {
					name, val, hasVal = a[:j], a[j+1:], true
				}
			}
			o := c.find(name)
			if o == nil && !strings.HasPrefix(a, "--") && len(a) > 2 {
				if o2 := c.find(a[:2]); o2 != nil && !o2.flag {
					o, name, val, hasVal = o2, a[:2], a[2:], true
				}
			}
			if o == nil {
				return nil, "No such option: " + name, false
			}
			if o.flag {
				if hasVal {
					return nil, fmt.Sprintf("Option '%s' does not take a value.", name), false
				}
				p.vals[o.key] = name
				continue
			}
			if !hasVal {
				if i+1 >= len(args) {
					return nil, fmt.Sprintf("Option '%s' requires an argument.", name), false
				}
				i++
				val = args[i]
			}
			p.vals[o.key] = val
			continue
		}
		if c.group {
			p.rest = args[i:]
			return p, "", false
		}
		return nil, fmt.Sprintf("Got unexpected extra argument (%s)", a), false
	}
	return p, "", false
}

// validate converts the values as click does, in declaration order.
func (c *clickCmd) validate(p *clickArgs) string {
	for _, o := range c.opts {
		v, ok := p.vals[o.key]
		if !ok {
			if o.required {
				return "Missing option " + o.hint() + "."
			}
			continue
		}
		if o.flag {
			continue
		}
		switch o.kind {
		case "int":
			if _, err := strconv.Atoi(strings.TrimSpace(v)); err != nil {
				return fmt.Sprintf("Invalid value for %s: '%s' is not a valid integer.", o.hint(), v)
			}
		case "float":
			if _, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err != nil {
				return fmt.Sprintf("Invalid value for %s: '%s' is not a valid float.", o.hint(), v)
			}
		case "choice":
			found := false
			for _, ch := range o.choices {
				found = found || ch == v
			}
			if !found {
				q := make([]string, len(o.choices))
				for i, ch := range o.choices {
					q[i] = "'" + ch + "'"
				}
				return fmt.Sprintf("Invalid value for %s: '%s' is not one of %s.", o.hint(), v, strings.Join(q, ", "))
			}
		case "exists":
			if _, err := os.Stat(v); err != nil {
				return fmt.Sprintf("Invalid value for %s: Path '%s' does not exist.", o.hint(), v)
			}
		}
	}
	return ""
}

func (p *clickArgs) str(k string) string { return p.vals[k] }

func (p *clickArgs) getInt(k string, def int) int {
	if v, ok := p.vals[k]; ok {
		n, _ := strconv.Atoi(strings.TrimSpace(v))
		return n
	}
	return def
}

func (p *clickArgs) getFloat(k string, def float64) float64 {
	if v, ok := p.vals[k]; ok {
		f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
		return f
	}
	return def
}

func opt(kind string, names ...string) *copt {
	return &copt{names: names, key: names[0], kind: kind}
}

func flagOpt(names ...string) *copt {
	return &copt{names: names, key: names[0], flag: true}
}

func choiceOpt(choices []string, names ...string) *copt {
	return &copt{names: names, key: names[0], kind: "choice", choices: choices}
}

func benchGroupOpts(v version) []*copt {
	levels := []string{"internal_error", "error", "warning", "info", "verbose"}
	if v.atLeast(1, 1) {
		levels = append(levels, "debug", "trace")
	}
	model := opt("str", "--model", "-m")
	model.required = true
	o := []*copt{
		model,
		opt("path", "--model_path"),
		opt("path", "--workspace", "-w"),
		choiceOpt(levels, "--log_level"),
	}
	if v.atLeast(1, 1) {
		o = append(o, opt("str", "--revision"))
	}
	if v.atLeast(1, 3) {
		t := flagOpt("--telemetry", "--no-telemetry")
		o = append(o, t)
	}
	return o
}

func backendChoices(v version) []string {
	switch {
	case v.atLeast(1, 3):
		return []string{"pytorch", "_autodeploy"}
	case v.atLeast(1, 0):
		return []string{"pytorch", "_autodeploy", "tensorrt"}
	default:
		return []string{"pytorch", "autodeploy"}
	}
}

// throughputOpts is trtllm-bench throughput's option set in version v.
func throughputOpts(v version) []*copt {
	var o []*copt
	add := func(ok bool, c *copt) {
		if ok {
			o = append(o, c)
		}
	}
	v13, v17, v10, v11, v12 := v.atLeast(0, 13), v.atLeast(0, 17), v.atLeast(1, 0), v.atLeast(1, 1), v.atLeast(1, 2)
	engine := opt("path", "--engine_dir")
	engine.required = !v17
	add(true, engine)
	add(v17, choiceOpt(backendChoices(v), "--backend"))
	if v.atLeast(1, 3) {
		add(true, &copt{names: []string{"--config", "--extra_llm_api_options"}, key: "--extra_llm_api_options", kind: "str"})
	} else {
		add(v17, opt("str", "--extra_llm_api_options"))
	}
	add(v11, opt("path", "--custom_module_dirs"))
	add(v11, opt("path", "--sampler_options"))
	add(true, opt("int", "--max_batch_size"))
	add(true, opt("int", "--max_num_tokens"))
	add(v17, opt("int", "--max_seq_len"))
	add(true, opt("int", "--beam_width"))
	add(true, opt("float", "--kv_cache_free_gpu_mem_fraction"))
	add(true, opt("exists", "--dataset"))
	add(v12, flagOpt("--no_skip_tokenizer_init"))
	add(v10, opt("int", "--eos_id"))
	add(v17, choiceOpt([]string{"image", "video"}, "--modality"))
	add(v12, choiceOpt([]string{"pt", "pil"}, "--image_data_format"))
	add(v12, choiceOpt([]string{"cuda", "cpu"}, "--data_device"))
	add(v17, opt("int", "--max_input_len"))
	add(true, opt("int", "--num_requests"))
	add(v17, opt("int", "--warmup"))
	add(v17, opt("int", "--target_input_len"))
	add(v17, opt("int", "--target_output_len"))
	add(v17, opt("int", "--tp"))
	add(v17, opt("int", "--pp"))
	add(v17, opt("int", "--ep"))
	add(v10, opt("int", "--cluster_size"))
	add(v17, opt("int", "--concurrency"))
	add(v13, flagOpt("--streaming"))
	add(v17, opt("path", "--report_json"))
	add(v13, opt("path", "--iteration_log"))
	add(v17, opt("path", "--output_json"))
	add(v10, opt("path", "--request_json"))
	if v12 {
		add(true, &copt{names: []string{"--enable_chunked_context", "--disable_chunked_context"}, key: "--enable_chunked_context", flag: true})
	} else {
		add(v17, flagOpt("--enable_chunked_context"))
	}
	add(v17, choiceOpt([]string{"guaranteed_no_evict", "max_utilization"}, "--scheduler_policy"))
	return o
}

// ---------------------------------------------------------------------------
// trtllm-bench

type benchCfg struct {
	v           version
	model       string
	modelPath   string
	log         *tlog
	backend     string // "" for the TensorRT engine flow before 1.0
	trt         bool
	engineDir   string
	extraOpts   string
	maxBatch    int
	maxTokens   int
	batchSet    bool
	tokensSet   bool
	kvFrac      float64
	dataset     string
	numRequests int
	warmup      int
	tp, pp      int
	ep          any // int or nil
	concurrency int
	streaming   bool
	reportJSON  string
	iterLog     string
	requestJSON string
	outputJSON  string
	policy      string
	seed        uint64
}

type modelInfo struct {
	layers      int
	dtype       string
	kvDtype     any
	quant       any
	maxInputLen any
	maxSeqLen   any
	gemm        string // the engine's gemm_plugin; "" when unset
	disable     bool   // TensorRT's own GEMMs (gemm_plugin disable or unset)
	version     string
	tp, pp      int
	ep          any
	buildBatch  int
	buildTokens int
}

func benchMain(args []string) int {
	v, ok := loadVersion()
	if !ok {
		return 2
	}
	outln(banner(v))
	out.Flush()
	group := &clickCmd{path: "trtllm-bench", usage: "[OPTIONS] COMMAND [ARGS]...", group: true, opts: benchGroupOpts(v)}
	g, msg, help := group.parse(args)
	if help {
		return group.help()
	}
	if msg != "" {
		return group.fail(msg)
	}
	if msg := group.validate(g); msg != "" {
		return group.fail(msg)
	}
	if len(g.rest) == 0 {
		return group.fail("Missing command.")
	}
	sub := g.rest[0]
	switch sub {
	case "throughput":
	case "build", "latency":
		errf("fake trtllm-bench: the %s command is not simulated (only throughput is)\n", sub)
		return 2
	case "prepare-dataset":
		if v.atLeast(1, 2) {
			errf("fake trtllm-bench: the %s command is not simulated (only throughput is)\n", sub)
			return 2
		}
		return group.fail(fmt.Sprintf("No such command '%s'.", sub))
	default:
		return group.fail(fmt.Sprintf("No such command '%s'.", sub))
	}
	cmd := &clickCmd{path: "trtllm-bench throughput", usage: "[OPTIONS]", opts: throughputOpts(v)}
	p, msg, help := cmd.parse(g.rest[1:])
	if help {
		return cmd.help()
	}
	if msg != "" {
		return cmd.fail(msg)
	}
	if msg := cmd.validate(p); msg != "" {
		return cmd.fail(msg)
	}
	level := logLevels[g.str("--log_level")]
	if !g.has("--log_level") {
		level = logLevels["info"]
	}
	var now int64 = perfBase
	c := &benchCfg{
		v: v, model: g.str("--model"), modelPath: g.str("--model_path"),
		log:       &tlog{level: level, now: &now},
		engineDir: p.str("--engine_dir"), extraOpts: p.str("--extra_llm_api_options"),
		maxBatch: p.getInt("--max_batch_size", 0), maxTokens: p.getInt("--max_num_tokens", 0),
		batchSet: p.has("--max_batch_size"), tokensSet: p.has("--max_num_tokens"),
		kvFrac: p.getFloat("--kv_cache_free_gpu_mem_fraction", 0.9), dataset: p.str("--dataset"),
		numRequests: p.getInt("--num_requests", 0), warmup: p.getInt("--warmup", 2),
		tp: p.getInt("--tp", 1), pp: p.getInt("--pp", 1), concurrency: p.getInt("--concurrency", -1),
		streaming: p.has("--streaming"), reportJSON: p.str("--report_json"), iterLog: p.str("--iteration_log"),
		requestJSON: p.str("--request_json"), outputJSON: p.str("--output_json"),
		policy: strings.ToUpper(p.str("--scheduler_policy")),
	}
	if !v.atLeast(0, 17) {
		c.warmup = 0
	}
	if c.policy == "" {
		c.policy = "GUARANTEED_NO_EVICT"
	}
	if p.has("--ep") {
		c.ep = p.getInt("--ep", 1)
	}
	c.seed, _ = strconv.ParseUint(getenv(envSeed, "1"), 10, 64)
	c.backend = p.str("--backend")
	if c.backend == "" && v.atLeast(1, 0) {
		c.backend = "pytorch"
	}
	c.trt = c.backend == "" || c.backend == "tensorrt"
	if c.trt && c.engineDir == "" {
		return cmd.fail("--engine_dir is required with the TensorRT engine backend (build one with trtllm-build or trtllm-bench build).")
	}
	if !c.trt && c.engineDir != "" {
		return cmd.fail(fmt.Sprintf("--engine_dir is only read by the TensorRT engine backend; the %s backend builds no engine.", c.backend))
	}
	return runBench(c, p, &now)
}

// verifyModelName is BenchmarkEnvironment's validator: --model names a
// Hugging Face model, never a local path.
func verifyModelName(c *benchCfg) bool {
	if _, err := os.Stat(c.model); err == nil {
		traceback(benchFrames(
			frame(pyLib+"/tensorrt_llm/bench/benchmark/throughput.py", 361, "throughput_command", "bench_env: BenchmarkEnvironment = ctx.obj"),
			frame(pyLib+"/tensorrt_llm/commands/bench.py", 62, "main", "ctx.obj = BenchmarkEnvironment(model=model,"),
			frame(pyLib+"/pydantic/main.py", 253, "__init__", "validated_self = self.__pydantic_validator__.validate_python(data, self_instance=self)"),
		), fmt.Sprintf("pydantic_core._pydantic_core.ValidationError: 1 validation error for BenchmarkEnvironment\n"+
			"  Value error, Model is a file or directory, please provide a model name. [type=value_error, input_value={'model': '%s'}, input_type=dict]", c.model))
		return false
	}
	return true
}

func fileNotFound(frames []string, path string) int {
	traceback(frames, fmt.Sprintf("FileNotFoundError: [Errno 2] No such file or directory: '%s'", path))
	return 1
}

// loadModel reads what the run needs of the model: the engine's
// config.json (TensorRT engine flow) or the Hugging Face config (PyTorch).
func loadModel(c *benchCfg) (*modelInfo, int) {
	m := &modelInfo{layers: 32, dtype: "bfloat16", version: c.v.raw, tp: c.tp, pp: c.pp, ep: c.ep}
	if c.trt {
		cfgPath := filepath.Join(c.engineDir, "config.json")
		cfg, err := readJSONObj(cfgPath)
		if err != nil {
			if os.IsNotExist(err) {
				return nil, fileNotFound(benchFrames(
					frame(pyLib+"/tensorrt_llm/bench/benchmark/throughput.py", 384, "throughput_command", "exec_settings = get_settings_from_engine(engine_dir)"),
					frame(pyLib+"/tensorrt_llm/bench/benchmark/utils/general.py", 59, "get_settings_from_engine", "with open(config_path, \"r\") as config_json:"),
				), cfgPath)
			}
			traceback(benchFrames(), "json.decoder.JSONDecodeError: "+err.Error())
			return nil, 1
		}
		if _, err := os.Stat(filepath.Join(c.engineDir, "rank0.engine")); err != nil {
			traceback(benchFrames(
				frame(pyLib+"/tensorrt_llm/executor/executor.py", 860, "create", "return GenerationExecutorWorker(**worker_kwargs)"),
			), fmt.Sprintf("RuntimeError: [TensorRT-LLM][ERROR] Assertion failed: Failed to open engine file %s (%s:%d)",
				filepath.Join(c.engineDir, "rank0.engine"), "/src/tensorrt_llm/cpp/tensorrt_llm/runtime/utils/sessionUtils.cpp", 128))
			return nil, 1
		}
		pre := cfg.getObj("pretrained_config")
		build := cfg.getObj("build_config")
		m.version = cfg.getStr("version", "")
		m.layers = pre.getInt("num_hidden_layers", 32)
		m.dtype = pre.getStr("dtype", "float16")
		q := pre.getObj("quantization")
		m.kvDtype, m.quant = q.get("kv_cache_quant_algo"), q.get("quant_algo")
		m.maxInputLen, m.maxSeqLen = build.get("max_input_len"), build.get("max_seq_len")
		m.buildBatch, m.buildTokens = build.getInt("max_batch_size", 2048), build.getInt("max_num_tokens", 8192)
		mp := pre.getObj("mapping")
		m.tp, m.pp = mp.getInt("tp_size", 1), mp.getInt("pp_size", 1)
		m.ep = nil
		if e := mp.get("moe_ep_size"); e != nil {
			m.ep = e
		}
		m.gemm = build.getObj("plugin_config").getStr("gemm_plugin", "")
		m.disable = m.gemm == "" || m.gemm == "disable"
		if m.version != c.v.raw {
			traceback(benchFrames(
				frame(pyLib+"/tensorrt_llm/executor/executor.py", 860, "create", "return GenerationExecutorWorker(**worker_kwargs)"),
				frame(pyLib+"/tensorrt_llm/executor/worker.py", 153, "__init__", "self.engine = _create_engine(executor_config)"),
			), fmt.Sprintf("RuntimeError: [TensorRT-LLM][ERROR] Assertion failed: Failed to deserialize cuda engine. "+
				"The engine in %s was built by TensorRT-LLM %s; this is TensorRT-LLM %s.", c.engineDir, m.version, c.v.raw))
			return nil, 1
		}
		return m, -1
	}
	if c.modelPath != "" {
		cfgPath := filepath.Join(c.modelPath, "config.json")
		hf, err := readJSONObj(cfgPath)
		if err != nil {
			if os.IsNotExist(err) {
				traceback(benchFrames(
					frame(pyLib+"/transformers/configuration_utils.py", 721, "_get_config_dict", "resolved_config_file = cached_file("),
				), fmt.Sprintf("OSError: %s does not appear to have a file named config.json.", c.modelPath))
				return nil, 1
			}
			traceback(benchFrames(), "json.decoder.JSONDecodeError: "+err.Error())
			return nil, 1
		}
		m.layers = hf.getInt("num_hidden_layers", 32)
		m.dtype = hf.getStr("dtype", hf.getStr("torch_dtype", "bfloat16"))
		if qc, err := readJSONObj(filepath.Join(c.modelPath, "hf_quant_config.json")); err == nil {
			q := qc.getObj("quantization")
			m.quant, m.kvDtype = q.get("quant_algo"), q.get("kv_cache_quant_algo")
			if m.kvDtype == nil && (m.quant == "FP8" || m.quant == "NVFP4") {
				m.kvDtype = "FP8"
			}
		}
	}
	return m, -1
}

type dsReq struct {
	taskID   int
	isl, osl int
}

// readDataset is create_dataset_from_stream: one JSON object a line.
func readDataset(c *benchCfg) ([]dsReq, int) {
	frames := benchFrames(
		frame(pyLib+"/tensorrt_llm/bench/benchmark/throughput.py", 402, "throughput_command", "metadata, requests = create_dataset_from_stream("),
		frame(pyLib+"/tensorrt_llm/bench/utils/data.py", 126, "create_dataset_from_stream", "data = json.loads(line)"),
	)
	if c.dataset == "" {
		traceback(benchFrames(
			frame(pyLib+"/tensorrt_llm/bench/benchmark/throughput.py", 400, "throughput_command", "with open(options.dataset_path, \"r\") as dataset:"),
		), "TypeError: expected str, bytes or os.PathLike object, not NoneType")
		return nil, 1
	}
	f, err := os.Open(c.dataset)
	if err != nil {
		return nil, fileNotFound(frames, c.dataset)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	var reqs []dsReq
	for lineNo := 1; c.numRequests <= 0 || len(reqs) < c.numRequests; lineNo++ {
		line, err := r.ReadString('\n')
		if line == "" && err != nil {
			break
		}
		var rec struct {
			TaskID       *json.Number    `json:"task_id"`
			InputIDs     json.RawMessage `json:"input_ids"`
			Logits       json.RawMessage `json:"logits"`
			Prompt       *string         `json:"prompt"`
			OutputTokens *json.Number    `json:"output_tokens"`
		}
		d := json.NewDecoder(strings.NewReader(line))
		d.UseNumber()
		if derr := d.Decode(&rec); derr != nil {
			col := 1
			if strings.TrimSpace(line) != "" {
				col = len(line) - len(strings.TrimLeft(line, " \t")) + 1
			}
			traceback(frames, fmt.Sprintf("json.decoder.JSONDecodeError: Expecting value: line 1 column %d (char %d)", col, col-1))
			return nil, 1
		}
		missing := ""
		switch {
		case rec.TaskID == nil:
			missing = "task_id"
		case rec.OutputTokens == nil:
			missing = "output_tokens"
		}
		if missing != "" {
			traceback(frames[:len(frames)-1], fmt.Sprintf("pydantic_core._pydantic_core.ValidationError: 1 validation error for InferenceRequest\n%s\n  Field required [type=missing, input_value=%s, input_type=dict]", missing, strings.TrimSpace(line)))
			return nil, 1
		}
		taskID, _ := rec.TaskID.Int64()
		osl, _ := rec.OutputTokens.Int64()
		ids := rec.InputIDs
		if len(ids) == 0 || string(ids) == "null" {
			ids = rec.Logits
		}
		isl := 0
		switch {
		case len(ids) > 0 && string(ids) != "null":
			var l []json.Number
			if err := json.Unmarshal(ids, &l); err != nil {
				traceback(frames[:len(frames)-1], fmt.Sprintf("pydantic_core._pydantic_core.ValidationError: 1 validation error for InferenceRequest\ninput_ids\n  Input should be a valid list [type=list_type, input_value=%s, input_type=%T]", ids, ids))
				return nil, 1
			}
			isl = len(l)
		case rec.Prompt != nil:
			isl = max(1, (len(*rec.Prompt)+3)/4)
		default:
			traceback(frames[:len(frames)-1], fmt.Sprintf("pydantic_core._pydantic_core.ValidationError: 1 validation error for InferenceRequest\n  Value error, prompt, input_ids, and turns for task %d are all None. [type=value_error, input_value=%s, input_type=dict]", taskID, strings.TrimSpace(line)))
			return nil, 1
		}
		reqs = append(reqs, dsReq{taskID: int(taskID), isl: isl, osl: max(1, int(osl))})
		if err != nil {
			break
		}
	}
	if len(reqs) == 0 {
		traceback(benchFrames(
			frame(pyLib+"/tensorrt_llm/bench/utils/data.py", 170, "create_dataset_from_stream", "metadata = DatasetMetadata("),
		), "ValueError: max() arg is an empty sequence")
		return nil, 1
	}
	return reqs, -1
}

// splitmix64 is the fake's deterministic randomness.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func unit(x uint64) float64 { return float64(splitmix64(x)>>11) / float64(1<<53) }

// profWindows is TLLM_PROFILE_START_STOP: iterations A-B (inclusive),
// comma-separated, or single iterations.
type profWindows struct {
	starts, stops map[int]bool
}

func parseProfileEnv(s string) (*profWindows, error) {
	w := &profWindows{starts: map[int]bool{}, stops: map[int]bool{}}
	for _, span := range strings.Split(s, ",") {
		span = strings.TrimSpace(span)
		a, b, isRange := strings.Cut(span, "-")
		start, err1 := strconv.Atoi(strings.TrimSpace(a))
		stop, err2 := start, error(nil)
		if isRange {
			stop, err2 = strconv.Atoi(strings.TrimSpace(b))
		}
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("Cannot parse span in environment variable `TLLM_PROFILE_START_STOP`: %s", span)
		}
		w.starts[start] = true
		w.stops[stop] = true
	}
	return w, nil
}

// simReq is one request in the simulation.
type simReq struct {
	id, isl, osl int
	taskID       int
	submit       int64
	first, end   int64
	admitted     bool
	prefilled    bool
	done         bool
	gen          int
}

// iterStat is one executor iteration.
type iterStat struct {
	iter                    int
	start, end              int64
	lat, base               int64 // latency, and what it would be with the GEMM plugin
	active, queued          int
	completed, newActive    int
	ctxReqs, genReqs        int
	ctxTokens               int
	newQueueLatMs           float64
	kvUsed, kvNew, kvAllocd int
}

type simParams struct {
	maxBatch, maxTokens, concurrency int
	disable                          bool
	seed                             uint64
	runFactor                        float64
	gap                              int64
	tokensPerBlock                   int
	kvAllocd                         int
	onIter                           func(*iterStat) bool
}

// iterLatency is 1.5 ms + 0.004 ms a token, with the run's jitter (within
// ±0.4 %) and the iteration's (within ±0.1 %).
func (p *simParams) iterLatency(tokens, iter int) (lat, base int64) {
	j := p.runFactor * (1 + 0.001*(2*unit(p.seed*0x100000001b3^uint64(iter)*0x9e37)-1))
	b := (1.5e6 + 4000*float64(tokens)) * j
	l := b
	if p.disable {
		l *= 1.15
	}
	return int64(l), int64(b)
}

// simulate runs reqs through in-flight batching from time t0 and
// iteration iter0; it returns the end time, the next iteration and
// whether onIter stopped it.
func simulate(reqs []*simReq, p *simParams, t0 int64, iter0 int) (int64, int, bool) {
	n := len(reqs)
	submitted := 0
	for submitted < n && (p.concurrency <= 0 || submitted < p.concurrency) {
		reqs[submitted].submit = t0 + int64(submitted)*p.gap
		submitted++
	}
	qi, done := 0, 0
	var active []*simReq
	t, it := t0, iter0
	blocks := func(tokens int) int { return (tokens + p.tokensPerBlock - 1) / p.tokensPerBlock }
	for done < n {
		newly := 0
		var qlat float64
		for len(active) < p.maxBatch && qi < submitted && reqs[qi].submit <= t {
			r := reqs[qi]
			qi++
			r.admitted = true
			active = append(active, r)
			newly++
			qlat += float64(t - r.submit)
		}
		if len(active) == 0 {
			if qi < submitted {
				t = reqs[qi].submit
				continue
			}
			break
		}
		budget := p.maxTokens
		var sched []*simReq
		st := iterStat{iter: it, start: t, newActive: newly}
		if newly > 0 {
			st.newQueueLatMs = qlat / float64(newly) * 1e-6
		}
		for _, r := range active {
			if r.prefilled && budget > 0 {
				sched = append(sched, r)
				st.genReqs++
				budget--
			}
		}
		for _, r := range active {
			if r.prefilled {
				continue
			}
			if r.isl > budget && (st.genReqs > 0 || st.ctxReqs > 0) {
				break
			}
			sched = append(sched, r)
			st.ctxReqs++
			st.ctxTokens += r.isl
			budget -= r.isl
		}
		tokens := st.genReqs + st.ctxTokens
		st.lat, st.base = p.iterLatency(tokens, it)
		st.end = t + st.lat
		for _, r := range sched {
			before := 0
			if r.prefilled {
				before = blocks(r.isl + r.gen)
				r.gen++
			} else {
				r.prefilled, r.gen, r.first = true, 1, st.end
			}
			st.kvNew += blocks(r.isl+r.gen) - before
			if r.gen >= r.osl {
				r.done, r.end = true, st.end
				st.completed++
			}
		}
		p.kvAllocd += st.kvNew
		st.kvAllocd = p.kvAllocd
		st.active = len(active)
		st.queued = submitted - qi
		keep := active[:0]
		for _, r := range active {
			st.kvUsed += blocks(r.isl + r.gen)
			if !r.done {
				keep = append(keep, r)
			}
		}
		active = keep
		done += st.completed
		if p.concurrency > 0 {
			for k := 1; k <= st.completed && submitted < n; k++ {
				reqs[submitted].submit = st.end + int64(k)*p.gap
				submitted++
			}
		}
		t = st.end
		it++
		if p.onIter != nil && !p.onIter(&st) {
			return t, it, true
		}
	}
	return t, it, false
}

// ---------------------------------------------------------------------------
// Kernels of an iteration (what nsys and the torch profiler see)

const (
	kGemmCublas   = "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"
	kGemmCutlass  = "void cutlass::Kernel2<cutlass_80_wmma_tensorop_f16_s161616gemm_f16_32x32_128x2_tn_align8>(cutlass_80_wmma_tensorop_f16_s161616gemm_f16_32x32_128x2_tn_align8::Params)"
	kGemmTRT      = "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize64x64x64_stage4_warpsize2x2x1_tensor16x8x16_kernel"
	kFmha         = "fmha_v2_flash_attention_fp16_64_128_S_q_paged_kv_64_causal_sm90_kernel"
	kRmsNorm      = "void tensorrt_llm::kernels::generalRmsNorm<__half, float>(__half const*, __half const*, __half const*, __half*, float, int, int, float const*, float*, float*, float*, float*)"
	kRope         = "void tensorrt_llm::kernels::applyBiasRopeUpdateKVCacheV2<__half, __half, 128, false, tensorrt_llm::kernels::KVBlockArray, false>(tensorrt_llm::kernels::QKVPreprocessingParams<__half, tensorrt_llm::kernels::KVBlockArray>)"
	kActivation   = "void tensorrt_llm::kernels::doGatedActivationKernel<__half, __half, tensorrt_llm::kernels::SiluActivation>(__half*, __half const*, float const*, int)"
	kSampling     = "void tensorrt_llm::kernels::topKStage1<__half, 128, 8>(__half const*, __half*, int*, __half*, int const*, bool const*, int, int const*, int, int, int const*, int)"
	kNcclAllReduc = "ncclDevKernel_AllReduce_Sum_f16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
)

type kinst struct {
	name string
	durs []int64
}

// spread splits total ns over n launches, each within ±2 % of the mean.
func spread(total float64, n int, salt uint64) []int64 {
	if n <= 0 || total <= 0 {
		return nil
	}
	d := make([]int64, n)
	mean := total / float64(n)
	for i := range d {
		d[i] = max(1, int64(mean*(1+0.02*(2*unit(salt*31+uint64(i))-1))))
	}
	return d
}

// iterKernels are the kernels the iteration ran: 80 % of its latency is
// GPU time, split by a fixed recipe per layer; the GEMM plugin's absence
// costs the iteration's extra latency, all of it in GEMMs.
func iterKernels(st *iterStat, m *modelInfo) []kinst {
	L := max(1, m.layers)
	gpu := 0.8 * float64(st.base)
	extra := float64(st.lat - st.base)
	salt := uint64(st.iter) * 1000003
	var k []kinst
	addK := func(name string, share float64, n int, i uint64) {
		if d := spread(share, n, salt+i); d != nil {
			k = append(k, kinst{name, d})
		}
	}
	gemm := gpu*0.62 + extra
	if m.disable {
		addK(kGemmTRT, gemm, 4*L+1, 1)
	} else {
		addK(kGemmCublas, gemm*0.8, 3*L, 1)
		addK(kGemmCutlass, gemm*0.2, L+1, 2)
	}
	addK(kFmha, gpu*0.14, L, 3)
	addK(kRmsNorm, gpu*0.05, 2*L+1, 5)
	addK(kRope, gpu*0.04, L, 6)
	addK(kActivation, gpu*0.05, L, 7)
	addK(kSampling, gpu*0.02, 1, 8)
	if m.tp > 1 {
		addK(kNcclAllReduc, gpu*0.08, 2*L, 9)
	}
	return k
}

// capture is the fake nsys's collection, as the profiled program sees it.
type capture struct {
	f         *os.File
	w         *bufio.Writer
	rangeMode string // none or cudaProfilerApi
	endMode   string // stop-shutdown, stop, repeat..., none
	active    bool
	done      bool
}

func openCapture() *capture {
	path := os.Getenv(envCapture)
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil
	}
	return &capture{f: f, w: bufio.NewWriterSize(f, 256<<10), rangeMode: getenv(envCaptureRange, "none"), endMode: getenv(envCaptureEnd, "stop-shutdown")}
}

func (c *capture) collecting() bool {
	return c != nil && (c.rangeMode != "cudaProfilerApi" || c.active)
}

// profilerStart is cudaProfilerStart.
func (c *capture) profilerStart(it int) {
	if c == nil || c.rangeMode != "cudaProfilerApi" || c.done || c.active {
		return
	}
	c.active = true
	fmt.Fprintf(c.w, "S\t%d\n", it)
}

// profilerStop is cudaProfilerStop; it reports whether nsys shuts the
// session (and the program) down.
func (c *capture) profilerStop(it int) bool {
	if c == nil || c.rangeMode != "cudaProfilerApi" || !c.active {
		return false
	}
	switch {
	case c.endMode == "none":
		return false
	case strings.HasPrefix(c.endMode, "repeat"):
		c.active = false
	default:
		c.active, c.done = false, true
	}
	fmt.Fprintf(c.w, "E\t%d\n", it)
	if c.endMode == "stop-shutdown" || strings.HasPrefix(c.endMode, "repeat-shutdown") {
		fmt.Fprintf(c.w, "X\t%d\n", it)
		return true
	}
	return false
}

func (c *capture) kernels(it int, ks []kinst) {
	for _, k := range ks {
		fmt.Fprintf(c.w, "K\t%d\t%s\t", it, k.name)
		for i, d := range k.durs {
			if i > 0 {
				c.w.WriteByte(',')
			}
			c.w.WriteString(strconv.FormatInt(d, 10))
		}
		c.w.WriteByte('\n')
	}
}

func (c *capture) close() {
	if c != nil {
		c.w.Flush()
		c.f.Close()
	}
}

// torchTrace is the PyTorch profiler that TLLM_TORCH_PROFILE_TRACE turns
// on: its Chrome trace of the window's kernels.
type torchTrace struct {
	path   string
	events []any
	corr   int
}

func (tt *torchTrace) add(st *iterStat, ks []kinst) {
	ts := float64(st.start-perfBase) / 1000
	tt.events = append(tt.events, obj{{"ph", "X"}, {"cat", "user_annotation"}, {"name", fmt.Sprintf("_forward_step %d", st.iter)},
		{"pid", 1234}, {"tid", 1234}, {"ts", ts}, {"dur", float64(st.lat) / 1000}})
	for _, k := range ks {
		for _, d := range k.durs {
			tt.corr++
			tt.events = append(tt.events, obj{{"ph", "X"}, {"cat", "kernel"}, {"name", k.name}, {"pid", 0}, {"tid", 7},
				{"ts", ts}, {"dur", float64(d) / 1000}, {"args", obj{{"device", 0}, {"stream", 7}, {"correlation", tt.corr}}}})
			ts += float64(d) / 1000
		}
	}
}

func (tt *torchTrace) write() error {
	doc := obj{
		{"schemaVersion", 1},
		{"deviceProperties", []any{obj{{"id", 0}, {"name", gpuName}, {"totalGlobalMem", gpuMemBytes}, {"computeMajor", 9}, {"computeMinor", 0}}}},
		{"traceEvents", tt.events},
		{"traceName", tt.path},
	}
	return os.WriteFile(tt.path, []byte(dumpJSON(doc, 0)), 0o644)
}

// outputWords are the "detokenized" output of the fake model.
var outputWords = strings.Fields("the of and to in a is that for it as was with be by on not he this are or his from at which but have an they you were her she there one all we their")

func outputText(id, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(outputWords[(id*7+i*13)%len(outputWords)])
	}
	return b.String()
}

func runBench(c *benchCfg, p *clickArgs, now *int64) int {
	l := c.log
	v := c.v
	if !verifyModelName(c) {
		return 1
	}
	var prof *profWindows
	if s := os.Getenv("TLLM_PROFILE_START_STOP"); s != "" {
		var err error
		if prof, err = parseProfileEnv(s); err != nil {
			traceback(benchFrames(
				frame(pyLib+"/tensorrt_llm/_torch/pyexecutor/py_executor.py", 70, "_load_iteration_indexes", "raise ValueError("),
			), "ValueError: "+err.Error())
			return 1
		}
	}
	if v.atLeast(1, 0) {
		l.info("Preparing to run throughput benchmark...")
	}
	ds, code := readDataset(c)
	if code >= 0 {
		return code
	}
	if c.extraOpts != "" {
		if _, err := os.Stat(c.extraOpts); err != nil {
			return fileNotFound(benchFrames(
				frame(pyLib+"/tensorrt_llm/bench/benchmark/utils/general.py", 122, "get_settings", "with open(extra_llm_api_options, \"r\") as f:"),
			), c.extraOpts)
		}
	}
	if p.has("--max_seq_len") && c.trt {
		traceback(benchFrames(
			frame(pyLib+"/tensorrt_llm/bench/benchmark/throughput.py", 380, "throughput_command", "assert max_seq_len is None, ("),
		), "AssertionError: max_seq_len is not a runtime parameter for C++ backend")
		return 1
	}
	m, code := loadModel(c)
	if code >= 0 {
		return code
	}
	*now = perfBase + 9_500_000_000 // the model is loaded
	if c.trt {
		if !c.batchSet {
			c.maxBatch = m.buildBatch
		}
		if !c.tokensSet {
			c.maxTokens = m.buildTokens
		}
		if c.maxBatch > m.buildBatch {
			l.warn("max_batch_size %d exceeds the engine's %d; using %d.", c.maxBatch, m.buildBatch, m.buildBatch)
			c.maxBatch = m.buildBatch
		}
		if c.maxTokens > m.buildTokens {
			l.warn("max_num_tokens %d exceeds the engine's %d; using %d.", c.maxTokens, m.buildTokens, m.buildTokens)
			c.maxTokens = m.buildTokens
		}
		c.tp, c.pp, c.ep = m.tp, m.pp, m.ep
	} else {
		if !c.batchSet || !c.tokensSet {
			if !c.batchSet {
				c.maxBatch = 2048
			}
			if !c.tokensSet {
				c.maxTokens = 8192
			}
			l.info("Max batch size and max num tokens not provided. Using heuristics or pre-defined settings: max_batch_size=%d, max_num_tokens=%d.", c.maxBatch, c.maxTokens)
		}
	}
	if c.maxBatch < 1 || c.maxTokens < 1 {
		traceback(benchFrames(), fmt.Sprintf("ValueError: max_batch_size (%d) and max_num_tokens (%d) must be positive", c.maxBatch, c.maxTokens))
		return 1
	}
	if os.Getenv("ENABLE_PERFECT_ROUTER") == "1" {
		l.warn("ENABLE_PERFECT_ROUTER=1: the MoE layers use the perfect router (precomputed load-balanced routing); model outputs are not valid.")
	}
	var tt *torchTrace
	if tp := os.Getenv("TLLM_TORCH_PROFILE_TRACE"); tp != "" && !c.trt {
		if prof == nil {
			l.warn("TLLM_PROFILE_START_STOP environment variable needs to be set to enable the torch trace. Example: export TLLM_PROFILE_START_STOP=100-150")
		} else {
			if v.atLeast(1, 2) {
				ext := filepath.Ext(tp)
				tp = strings.TrimSuffix(tp, ext) + "-rank-0" + ext
			}
			tt = &torchTrace{path: tp}
		}
	}
	l.info("Setting up throughput benchmark.")
	switch f := os.Getenv(envFault); f {
	case "oom":
		traceback(benchFrames(
			frame(pyLib+"/tensorrt_llm/bench/benchmark/throughput.py", 430, "throughput_command", "llm = get_llm(runtime_config, kwargs)"),
			frame(pyLib+"/tensorrt_llm/_torch/pyexecutor/py_executor_creator.py", 412, "create_py_executor", "kv_cache_creator.build_managers(resources, estimating_kv_cache)"),
			frame(pyLib+"/tensorrt_llm/_torch/pyexecutor/resource_manager.py", 301, "__init__", "self.impl = KVCacheManagerCpp(**kwargs)"),
		), "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.06 GiB is free.")
		return 1
	case "error":
		traceback(benchFrames(
			frame(pyLib+"/tensorrt_llm/bench/benchmark/throughput.py", 430, "throughput_command", "llm = get_llm(runtime_config, kwargs)"),
			frame(pyLib+"/tensorrt_llm/executor/executor.py", 860, "create", "return GenerationExecutorWorker(**worker_kwargs)"),
		), "RuntimeError: Executor failed: [TensorRT-LLM][ERROR] Assertion failed: mMaxNumTokens > 0")
		return 1
	}

	params := &simParams{maxBatch: c.maxBatch, maxTokens: c.maxTokens, concurrency: c.concurrency, disable: c.trt && m.disable,
		seed: c.seed, gap: 15_000, tokensPerBlock: 32}
	params.runFactor = 1 + 0.004*(2*unit(c.seed^0x5eed)-1)
	cp := openCapture()
	defer cp.close()
	profiling := false
	shutdown := false
	var iterLines []string
	benchPhase := false
	maxBlocks := int(c.kvFrac / 0.9 * 24576)
	params.onIter = func(st *iterStat) bool {
		*now = st.end
		if prof != nil && prof.starts[st.iter] && !profiling {
			profiling = true
			l.info("Profiling started at iteration %d.", st.iter)
			cp.profilerStart(st.iter)
		}
		var ks []kinst
		if cp.collecting() || profiling && tt != nil {
			ks = iterKernels(st, m)
		}
		if cp.collecting() {
			cp.kernels(st.iter, ks)
		}
		if profiling && tt != nil {
			tt.add(st, ks)
		}
		if benchPhase && c.iterLog != "" {
			iterLines = append(iterLines, pyRepr(iterDict(st, c, maxBlocks)))
		}
		if prof != nil && prof.stops[st.iter] && profiling {
			profiling = false
			if tt != nil {
				if err := tt.write(); err == nil {
					l.info("Profiling stopped at iteration %d, trace saved to %s", st.iter, tt.path)
				}
				tt.events = nil
			} else {
				l.info("Profiling stopped at iteration %d.", st.iter)
			}
			if cp.profilerStop(st.iter) {
				shutdown = true
				return false
			}
		}
		return true
	}

	t := perfBase + 10_000_000_000
	*now = t
	iter := 0
	if c.warmup > 0 {
		l.info("Setting up for warmup...")
		l.info("Running warmup.")
		var wreqs []*simReq
		for i := 0; i < c.warmup; i++ {
			d := ds[int(unit(uint64(i)+42)*float64(len(ds)))]
			wreqs = append(wreqs, &simReq{id: i, isl: d.isl, osl: d.osl, taskID: d.taskID})
		}
		for i := len(wreqs) - 1; i > 0; i-- {
			j := int(unit(uint64(i)+4242) * float64(i+1))
			wreqs[i], wreqs[j] = wreqs[j], wreqs[i]
		}
		for i, r := range wreqs {
			r.id = i
		}
		var stopped bool
		t, iter, stopped = simulate(wreqs, params, t, iter)
		if stopped && shutdown {
			return 143
		}
		t += 50_000_000
		*now = t
		l.info("Warmup done.")
	}
	reqs := make([]*simReq, len(ds))
	for i, d := range ds {
		reqs[i] = &simReq{id: c.warmup + i, isl: d.isl, osl: d.osl, taskID: d.taskID}
	}
	l.info("Starting benchmark...")
	if os.Getenv(envFault) == "hang" {
		sleep := exec.Command("sleep", "1000")
		if err := sleep.Start(); err == nil {
			l.info("Started executor worker process (pid %d).", sleep.Process.Pid)
		}
		out.Flush()
		for {
			time.Sleep(time.Hour)
		}
	}
	benchPhase = true
	tEnd, _, stopped := simulate(reqs, params, t, iter)
	if stopped && shutdown {
		return 143
	}
	*now = tEnd
	lastSubmit := reqs[len(reqs)-1].submit
	for _, r := range reqs {
		lastSubmit = max(lastSubmit, r.submit)
	}
	subTime := float64(lastSubmit-t) * 1e-9
	rate := 0.0
	if subTime > 0 {
		rate = float64(len(reqs)) / subTime
	}
	l.info("Request submission complete. [count=%d, time=%.4fs, rate=%.2f req/s]", len(reqs), subTime, rate)
	l.info("Benchmark complete.")
	if tt != nil && profiling && len(tt.events) > 0 {
		tt.write()
	}
	if os.Getenv(envFault) == "noreport" {
		return 0
	}
	l.info("Benchmark done. Reporting results...")
	rep := newReport(c, m, reqs)
	l.info("%s", rep.text())
	type file struct{ path, data string }
	var files []file
	if c.reportJSON != "" {
		files = append(files, file{c.reportJSON, dumpJSON(rep.dict(), 4)})
	}
	if c.outputJSON != "" {
		sorted := append([]*simReq(nil), reqs...)
		sort.Slice(sorted, func(i, j int) bool { return sorted[i].id < sorted[j].id })
		o := obj{}
		for _, r := range sorted {
			o = append(o, kv{strconv.Itoa(r.id), outputText(r.id, r.osl)})
		}
		files = append(files, file{c.outputJSON, dumpJSON(o, 4)})
	}
	if c.requestJSON != "" {
		indent := 0
		if v.atLeast(1, 2) {
			indent = 4
		}
		files = append(files, file{c.requestJSON, dumpJSON(rep.requestRecords(), indent)})
	}
	if c.iterLog != "" {
		files = append(files, file{c.iterLog, strings.Join(iterLines, "\n") + "\n"})
	}
	for _, f := range files {
		if err := os.WriteFile(f.path, []byte(f.data), 0o644); err != nil {
			return fileNotFound(benchFrames(
				frame(pyLib+"/tensorrt_llm/bench/benchmark/throughput.py", 520, "throughput_command", "with open(report_json, \"w\") as f:"),
			), f.path)
		}
	}
	return 0
}

// iterDict is one --iteration_log line: the executor's IterationStats as
// nlohmann serialises them (keys in alphabetical order).
func iterDict(st *iterStat, c *benchCfg, maxBlocks int) obj {
	kvStats := sortedObj(map[string]any{
		"maxNumBlocks": maxBlocks, "freeNumBlocks": max(0, maxBlocks-st.kvUsed), "usedNumBlocks": st.kvUsed,
		"tokensPerBlock": 32, "allocTotalBlocks": st.kvAllocd, "allocNewBlocks": st.kvNew,
		"reusedBlocks": 0, "missedBlocks": st.kvNew, "cacheHitRate": 0.0,
	})
	ifb := sortedObj(map[string]any{
		"numScheduledRequests": st.ctxReqs + st.genReqs, "numContextRequests": st.ctxReqs, "numGenRequests": st.genReqs,
		"numPausedRequests": 0, "numCtxTokens": st.ctxTokens, "microBatchId": 0, "avgNumDecodedTokensPerIter": 0.0,
	})
	m := map[string]any{
		"timestamp":                       wallAt(st.end).Format("01-02-2006 15:04:05.000000"),
		"iter":                            st.iter,
		"iterLatencyMS":                   float64(st.lat) * 1e-6,
		"newActiveRequestsQueueLatencyMS": st.newQueueLatMs,
		"numNewActiveRequests":            st.newActive,
		"numActiveRequests":               st.active,
		"numQueuedRequests":               st.queued,
		"numCompletedRequests":            st.completed,
		"maxNumActiveRequests":            c.maxBatch,
		"maxBatchSizeStatic":              c.maxBatch,
		"maxBatchSizeTunerRecommended":    0,
		"maxBatchSizeRuntime":             c.maxBatch,
		"gpuMemUsage":                     gpuMemBytes/5 + int64(st.kvUsed)*4<<20,
		"cpuMemUsage":                     0,
		"pinnedMemUsage":                  0,
		"kvCacheStats":                    kvStats,
		"staticBatchingStats":             nil,
		"inflightBatchingStats":           ifb,
	}
	if c.v.atLeast(1, 0) {
		m["maxNumTokensStatic"] = c.maxTokens
		m["maxNumTokensTunerRecommended"] = 0
		m["maxNumTokensRuntime"] = c.maxTokens
		m["specDecodingStats"] = nil
	}
	return sortedObj(m)
}

// ---------------------------------------------------------------------------
// Statistics and reports (tensorrt_llm/bench/dataclasses)

// pstats is PercentileStats.
type pstats struct{ p50, p90, p95, p99, min, max, avg float64 }

func pctInts(vals []int64) pstats {
	s := append([]int64(nil), vals...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	n := len(s)
	var sum int64
	for _, x := range vals {
		sum += x
	}
	at := func(q float64) float64 { return float64(s[int(float64(n)*q)]) }
	return pstats{at(0.5), at(0.9), at(0.95), at(0.99), float64(s[0]), float64(s[n-1]), float64(sum) / float64(n)}
}

func pctFloats(vals []float64) pstats {
	s := append([]float64(nil), vals...)
	sort.Float64s(s)
	n := len(s)
	sum := 0.0
	for _, x := range vals {
		sum += x
	}
	at := func(q float64) float64 { return s[int(float64(n)*q)] }
	return pstats{at(0.5), at(0.9), at(0.95), at(0.99), s[0], s[n-1], sum / float64(n)}
}

// dict is model_dump() | {k: f(v)}: p90 only from 0.19 on.
func (p pstats) dict(withP90 bool, f func(float64) float64) obj {
	o := obj{{"p50", f(p.p50)}}
	if withP90 {
		o = append(o, kv{"p90", f(p.p90)})
	}
	return append(o, kv{"p95", f(p.p95)}, kv{"p99", f(p.p99)}, kv{"minimum", f(p.min)}, kv{"maximum", f(p.max)}, kv{"average", f(p.avg)})
}

func toMs(ns float64) float64  { return ns * 1.0e-6 }
func toRate(r float64) float64 { return r * 1.0e9 }
func ident(x float64) float64  { return x }

type report struct {
	c    *benchCfg
	m    *modelInfo
	reqs []*simReq // in completion order

	totalLatNs                     float64
	totalIn, totalOut              int64
	lat, ttft, tpot, genTps, outTp pstats
	issueRateNs                    float64
	avgConcurrent                  float64
	isl, osl, seq                  pstats
	islMax, oslMax, seqMax         int
}

func newReport(c *benchCfg, m *modelInfo, reqs []*simReq) *report {
	r := &report{c: c, m: m, reqs: append([]*simReq(nil), reqs...)}
	sort.SliceStable(r.reqs, func(i, j int) bool {
		if r.reqs[i].end != r.reqs[j].end {
			return r.reqs[i].end < r.reqs[j].end
		}
		return r.reqs[i].id < r.reqs[j].id
	})
	start, end, lastStart := int64(math.MaxInt64), int64(-1), int64(0)
	var e2e []int64
	var ttft, tpot, genTps, outTp []float64
	for _, q := range r.reqs {
		rec := recordOf(q, c.streaming)
		start, end, lastStart = min(start, q.submit), max(end, q.end), max(lastStart, q.submit)
		e2e = append(e2e, rec.e2e)
		ttft = append(ttft, rec.ttft)
		tpot = append(tpot, rec.itl)
		genTps = append(genTps, rec.genTput)
		outTp = append(outTp, rec.outTput)
		r.totalIn += int64(q.isl)
		r.totalOut += int64(q.osl)
	}
	n := float64(len(r.reqs))
	r.totalLatNs = float64(end - start)
	r.lat = pctInts(e2e)
	r.ttft, r.tpot, r.genTps, r.outTp = pctFloats(ttft), pctFloats(tpot), pctFloats(genTps), pctFloats(outTp)
	r.issueRateNs = float64(lastStart-start) / n
	r.avgConcurrent = r.lat.avg * n / r.totalLatNs
	var isl, osl, seq []int64
	for _, q := range reqs {
		isl, osl, seq = append(isl, int64(q.isl)), append(osl, int64(q.osl)), append(seq, int64(q.isl+q.osl))
	}
	r.isl, r.osl, r.seq = pctInts(isl), pctInts(osl), pctInts(seq)
	return r
}

// record is RequestRecord's computed fields.
type record struct {
	e2e                        int64
	first                      int64
	ttft, genTime              float64
	ttftIsInt                  bool
	itl, genTput, outTput, tot float64
}

func recordOf(q *simReq, streaming bool) record {
	r := record{e2e: q.end - q.submit, first: -1}
	if streaming {
		r.first = q.first
		r.ttft, r.ttftIsInt = float64(q.first-q.submit), true
	}
	r.genTime = float64(r.e2e) - r.ttft
	gen := q.osl - 1
	if gen > 0 {
		r.itl = float64(q.end-r.first) / float64(gen)
	}
	if r.genTime > 0 {
		r.genTput = float64(gen) / r.genTime
	}
	r.tot = float64(q.osl) / float64(r.e2e)
	r.outTput = r.tot
	return r
}

func (r *report) p90() bool { return r.c.v.atLeast(0, 19) }

func (r *report) worldSize() int { return r.c.tp * r.c.pp }

func (r *report) reqThroughput() float64 { return toRate(float64(len(r.reqs)) / r.totalLatNs) }
func (r *report) outThroughput() float64 { return toRate(float64(r.totalOut) / r.totalLatNs) }
func (r *report) totThroughput() float64 { return toRate(float64(r.totalIn+r.totalOut) / r.totalLatNs) }

func (r *report) engineDict() obj {
	c, m := r.c, r.m
	modelPath, engineDir := "None", "None"
	if c.modelPath != "" {
		modelPath = pyPath(c.modelPath)
	}
	if c.trt {
		engineDir = pyPath(c.engineDir)
	}
	e := obj{{"model", c.model}, {"model_path", modelPath}, {"engine_dir", engineDir}, {"version", m.version}}
	if c.trt {
		return append(e, kv{"backend", "TRT"}, kv{"dtype", m.dtype}, kv{"kv_cache_dtype", m.kvDtype}, kv{"quantization", m.quant},
			kv{"max_input_length", m.maxInputLen}, kv{"max_sequence_length", m.maxSeqLen})
	}
	return append(e, kv{"backend", "Pytorch"}, kv{"dtype", m.dtype}, kv{"kv_cache_dtype", m.kvDtype}, kv{"quantization", m.quant})
}

// dict is ReportUtility.get_statistics_dict: the --report_json document.
func (r *report) dict() obj {
	c := r.c
	d := obj{{"engine", r.engineDict()}}
	if c.v.atLeast(1, 2) {
		d = append(d, kv{"machine", obj{{"name", gpuName}, {"memory.total", float64(gpuMemBytes) / (1024.0 * 1024.0 * 1024.0)}, {"clocks.mem", gpuMemClock}}})
	}
	d = append(d, kv{"world_info", obj{
		{"tp_size", c.tp}, {"pp_size", c.pp}, {"ep_size", c.ep}, {"world_size", r.worldSize()},
		{"max_batch_size", c.maxBatch}, {"max_num_tokens", c.maxTokens}, {"scheduling_policy", c.policy},
		{"kv_cache_percentage", c.kvFrac}, {"issue_rate", toRate(r.issueRateNs)},
	}})
	d = append(d, kv{"request_info", obj{
		{"num_requests", len(r.reqs)}, {"avg_num_concurrent_requests", r.avgConcurrent},
		{"avg_input_length", float64(r.totalIn) / float64(len(r.reqs))}, {"avg_output_length", float64(r.totalOut) / float64(len(r.reqs))},
	}})
	perf := obj{
		{"total_latency_ms", toMs(r.totalLatNs)},
		{"avg_request_latency_ms", toMs(r.lat.avg)},
		{"request_throughput_req_s", r.reqThroughput()},
		{"system_output_throughput_tok_s", r.outThroughput()},
	}
	if c.v.atLeast(0, 19) {
		perf = append(perf, kv{"system_total_throughput_tok_s", r.totThroughput()})
	}
	perf = append(perf,
		kv{"output_throughput_per_user_tok_s", toRate(r.outTp.avg)},
		kv{"output_throughput_per_gpu_tok_s", r.outThroughput() / float64(r.worldSize())},
		kv{"request_latency_percentiles_ms", r.lat.dict(r.p90(), toMs)},
	)
	d = append(d, kv{"performance", perf})
	if c.streaming {
		d = append(d, kv{"streaming_metrics", obj{
			{"token_output_speed_tok_s", toRate(r.genTps.avg)},
			{"avg_ttft_ms", toMs(r.ttft.avg)},
			{"avg_tpot_ms", toMs(r.tpot.avg)},
			{"tpot_percentiles", r.tpot.dict(r.p90(), toMs)},
			{"ttft_percentiles", r.ttft.dict(r.p90(), toMs)},
			{"gen_tps_percentiles", r.genTps.dict(r.p90(), toRate)},
		}})
	}
	d = append(d, kv{"dataset", obj{
		{"isl_stats", r.isl.dict(r.p90(), ident)},
		{"osl_stats", r.osl.dict(r.p90(), ident)},
		{"seq_len_stats", r.seq.dict(r.p90(), ident)},
		{"num_requests", len(r.reqs)},
		{"dataset_path", pyPath(c.dataset)},
		{"max_isl", int(r.isl.max)}, {"max_osl", int(r.osl.max)}, {"max_sequence_length", int(r.seq.max)},
		{"avg_isl", int(r.isl.avg)}, {"avg_osl", int(r.osl.avg)}, {"avg_sequence_length", int(r.seq.avg)},
	}})
	return d
}

// requestRecords is get_request_info: RequestRecord.model_dump() without
// tokens, plus output and output_tokens, in request id order.
func (r *report) requestRecords() []any {
	sorted := append([]*simReq(nil), r.reqs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].id < sorted[j].id })
	var l []any
	for _, q := range sorted {
		rec := recordOf(q, r.c.streaming)
		var ttft, genTime any = rec.ttft, rec.genTime
		if rec.ttftIsInt {
			ttft, genTime = int64(rec.ttft), int64(rec.genTime)
		}
		o := obj{
			{"id", q.id}, {"num_input_tokens", q.isl}, {"error_tokens", 0},
			{"start_timestamp", q.submit}, {"first_token_timestamp", rec.first}, {"end_timestamp", q.end},
			{"decode_iteration", q.osl - 1},
			{"num_total_output_tokens", q.osl}, {"num_generated_tokens", q.osl - 1},
			{"generation_time", genTime}, {"time_to_first_token", ttft},
			{"intertoken_latency", rec.itl}, {"end_to_end_latency", rec.e2e},
			{"total_token_throughput", rec.tot}, {"generation_token_throughput", rec.genTput},
		}
		if r.c.v.atLeast(1, 2) {
			o = append(o, kv{"output_token_throughput", rec.outTput})
		}
		o = append(o, kv{"output", outputText(q.id, q.osl)}, kv{"output_tokens", q.osl})
		l = append(l, o)
	}
	return l
}

func pyStr(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case string:
		return x
	case float64:
		return pyFloat(x)
	case bool:
		if x {
			return "True"
		}
		return "False"
	}
	return fmt.Sprint(v)
}

// text is the human-readable report (one log record), as the version
// prints it.
func (r *report) text() string {
	c, m, v := r.c, r.m, r.c.v
	rule := strings.Repeat("=", 59)
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	e := r.engineDict()
	newest := v.releasedAtLeast(1, 1, 0)
	versionLabel := "TensorRT-LLM Version:"
	if newest {
		versionLabel = "TensorRT LLM Version:"
	}
	kvPct := fmt.Sprintf("%.2f%%", c.kvFrac*100.0)
	if !v.atLeast(0, 19) {
		// ~0.13-0.18: tab-separated, throughput under PERFORMANCE OVERVIEW.
		w("\n\n%s\n", rule)
		if c.trt {
			w("= ENGINE DETAILS\n%s\nModel:\t\t\t%s\nEngine Directory:\t%s\n%s\t%s\nDtype:\t\t\t%s\nKV Cache Dtype:\t\t%s\nQuantization:\t\t%s\nMax Input Length:\t%s\nMax Sequence Length:\t%s\n\n",
				rule, c.model, e.get("engine_dir"), versionLabel, m.version, m.dtype, pyStr(m.kvDtype), pyStr(m.quant), pyStr(m.maxInputLen), pyStr(m.maxSeqLen))
		} else {
			w("= PyTorch backend\n%s\nModel:\t\t\t%s\nModel Path:\t\t%s\n%s\t%s\nDtype:\t\t\t%s\nKV Cache Dtype:\t\t%s\nQuantization:\t\t%s\n\n",
				rule, c.model, e.get("model_path"), versionLabel, m.version, m.dtype, pyStr(m.kvDtype), pyStr(m.quant))
		}
		policy := "Guaranteed No Evict"
		if c.policy == "MAX_UTILIZATION" {
			policy = "Max Utilization"
		}
		w("%s\n= WORLD + RUNTIME INFORMATION\n%s\nTP Size:\t\t%d\nPP Size:\t\t%d\nMax Runtime Batch Size:\t%d\nMax Runtime Tokens:\t%d\nScheduling Policy:\t%s\nKV Memory Percentage:\t%s\nIssue Rate (req/sec):\t%.4E\n\n",
			rule, rule, c.tp, c.pp, c.maxBatch, c.maxTokens, policy, kvPct, toRate(r.issueRateNs))
		w("%s\n= PERFORMANCE OVERVIEW\n%s\nNumber of requests:\t\t%d\nAverage Input Length (tokens):\t%.4f\nAverage Output Length (tokens):\t%.4f\nToken Throughput (tokens/sec):\t%.4f\nRequest Throughput (req/sec):\t%.4f\nTotal Latency (ms):\t\t%.4f\n",
			rule, rule, len(r.reqs), float64(r.totalIn)/float64(len(r.reqs)), float64(r.totalOut)/float64(len(r.reqs)), r.outThroughput(), r.reqThroughput(), toMs(r.totalLatNs))
		if c.streaming {
			w("%s\n= STREAMING STATISTICS\n%s\nAverage request latency (ms):\t\t%.4f\nAverage time-to-first-token (ms):\t%.4f\nAverage inter-token latency (ms):\t%.4f\n",
				rule, rule, toMs(r.lat.avg), toMs(r.ttft.avg), toMs(r.tpot.avg))
		}
		w("%s\n", rule)
		return b.String()
	}
	if c.trt {
		w("\n\n%s\n= ENGINE DETAILS\n%s\nModel:\t\t\t%s\nModel Path:\t\t%s\nEngine Directory:\t%s\n%s\t%s\nDtype:\t\t\t%s\nKV Cache Dtype:\t\t%s\nQuantization:\t\t%s\nMax Input Length:\t%s\nMax Sequence Length:\t%s\n\n",
			rule, rule, c.model, e.get("model_path"), e.get("engine_dir"), versionLabel, m.version, m.dtype, pyStr(m.kvDtype), pyStr(m.quant), pyStr(m.maxInputLen), pyStr(m.maxSeqLen))
	} else {
		header := "PYTORCH BACKEND"
		if !v.atLeast(0, 21) {
			header = "PyTorch backend"
		}
		w("\n\n%s\n= %s\n%s\nModel:\t\t\t%s\nModel Path:\t\t%s\n%s\t%s\nDtype:\t\t\t%s\nKV Cache Dtype:\t\t%s\nQuantization:\t\t%s\n\n",
			rule, header, rule, c.model, e.get("model_path"), versionLabel, m.version, m.dtype, pyStr(m.kvDtype), pyStr(m.quant))
	}
	if v.atLeast(1, 2) {
		w("%s\n= MACHINE DETAILS \n%s\n%s, memory %.2f GB, %.2f GHz\n\n", rule, rule, gpuName, float64(gpuMemBytes)/(1024.0*1024.0*1024.0), gpuMemClock)
	}
	n := float64(len(r.reqs))
	w("%s\n= REQUEST DETAILS \n%s\nNumber of requests:             %d\nNumber of concurrent requests:  %.4f\nAverage Input Length (tokens):  %.4f\nAverage Output Length (tokens): %.4f\n",
		rule, rule, len(r.reqs), r.avgConcurrent, float64(r.totalIn)/n, float64(r.totalOut)/n)
	w("%s\n= WORLD + RUNTIME INFORMATION \n%s\nTP Size:                %d\nPP Size:                %d\nEP Size:                %s\nMax Runtime Batch Size: %d\nMax Runtime Tokens:     %d\nScheduling Policy:      %s\nKV Memory Percentage:   %s\nIssue Rate (req/sec):   %.4E\n\n",
		rule, rule, c.tp, c.pp, pyStr(c.ep), c.maxBatch, c.maxTokens, c.policy, kvPct, toRate(r.issueRateNs))
	w("%s\n= PERFORMANCE OVERVIEW \n%s\n", rule, rule)
	stats := func(tag string, p pstats, f func(float64) float64) {
		for _, k := range []struct {
			name string
			v    float64
		}{{"MINIMUM", p.min}, {"MAXIMUM", p.max}, {"AVERAGE", p.avg}, {"P50", p.p50}, {"P90", p.p90}, {"P95", p.p95}, {"P99", p.p99}} {
			w("[%s] %-7s: %.4f\n", tag, k.name, f(k.v))
		}
	}
	if newest {
		w("Request Throughput (req/sec):                     %.4f\n", r.reqThroughput())
		w("Total Output Throughput (tokens/sec):             %.4f\n", r.outThroughput())
		w("Total Token Throughput (tokens/sec):              %.4f\n", r.totThroughput())
		w("Total Latency (ms):                               %.4f\n", toMs(r.totalLatNs))
		w("Average request latency (ms):                     %.4f\n", toMs(r.lat.avg))
		w("Per User Output Throughput [w/ ctx] (tps/user):   %.4f\n", toRate(r.outTp.avg))
		w("Per GPU Output Throughput (tps/gpu):              %.4f\n", r.outThroughput()/float64(r.worldSize()))
		if c.streaming {
			w("Average time-to-first-token [TTFT] (ms):          %.4f\n", toMs(r.ttft.avg))
			w("Average time-per-output-token [TPOT] (ms):        %.4f\n", toMs(r.tpot.avg))
			w("Per User Output Speed (tps/user):                 %.4f\n", toRate(r.genTps.avg))
			w("\n-- Per-Request Time-per-Output-Token [TPOT] Breakdown (ms)\n\n")
			stats("TPOT", r.tpot, toMs)
			w("\n-- Per-Request Time-to-First-Token [TTFT] Breakdown (ms) \n\n")
			stats("TTFT", r.ttft, toMs)
			w("\n-- Per-Request Generation Throughput [GTPS] Breakdown (tps/user)\n\n")
			stats("GTPS", r.genTps, toRate)
		}
	} else {
		w("Request Throughput (req/sec):                     %.4f\n", r.reqThroughput())
		w("Total Output Throughput (tokens/sec):             %.4f\n", r.outThroughput())
		w("Per User Output Throughput (tokens/sec/user):     %.4f\n", toRate(r.outTp.avg))
		w("Per GPU Output Throughput (tokens/sec/gpu):       %.4f\n", r.outThroughput()/float64(r.worldSize()))
		w("Total Token Throughput (tokens/sec):              %.4f\n", r.totThroughput())
		w("Total Latency (ms):                               %.4f\n", toMs(r.totalLatNs))
		w("Average request latency (ms):                     %.4f\n", toMs(r.lat.avg))
		if c.streaming {
			w("Per User Output Speed [1/TPOT] (tokens/sec/user): %.4f\n", toRate(r.genTps.avg))
			w("Average time-to-first-token [TTFT] (ms):          %.4f\n", toMs(r.ttft.avg))
			w("Average time-per-output-token [TPOT] (ms):        %.4f\n", toMs(r.tpot.avg))
			w("\n-- Per-Request Time-per-Output-Token [TPOT] Breakdown (ms)\n\n")
			stats("TPOT", r.tpot, toMs)
			w("\n-- Per-Request Time-to-First-Token [TTFT] Breakdown (ms)\n\n")
			stats("TTFT", r.ttft, toMs)
		}
	}
	w("\n-- Request Latency Breakdown (ms) -----------------------\n\n")
	for _, k := range []struct {
		name string
		v    float64
	}{{"P50", r.lat.p50}, {"P90", r.lat.p90}, {"P95", r.lat.p95}, {"P99", r.lat.p99}, {"MINIMUM", r.lat.min}, {"MAXIMUM", r.lat.max}, {"AVERAGE", r.lat.avg}} {
		w("[Latency] %-7s: %.4f\n", k.name, toMs(k.v))
	}
	form := func(x float64) string {
		if x >= 100000 {
			return fmt.Sprintf("%9.2e", x)
		}
		return fmt.Sprintf("%9.4f", x)
	}
	w("\n%s\n= DATASET DETAILS\n%s\nDataset Path:         %s\nNumber of Sequences:  %d\n\n-- Percentiles statistics ---------------------------------\n\n        Input              Output           Seq. Length\n-----------------------------------------------------------\n",
		rule, rule, pyPath(c.dataset), len(r.reqs))
	for _, row := range []struct {
		name string
		f    func(pstats) float64
	}{
		{"MIN", func(p pstats) float64 { return p.min }}, {"MAX", func(p pstats) float64 { return p.max }},
		{"AVG", func(p pstats) float64 { return p.avg }}, {"P50", func(p pstats) float64 { return p.p50 }},
		{"P90", func(p pstats) float64 { return p.p90 }}, {"P95", func(p pstats) float64 { return p.p95 }},
		{"P99", func(p pstats) float64 { return p.p99 }},
	} {
		w("%s:  %s          %s          %s\n", row.name, form(row.f(r.isl)), form(row.f(r.osl)), form(row.f(r.seq)))
	}
	w("%s\n", rule)
	return b.String()
}

// ---------------------------------------------------------------------------
// argparse (trtllm-build, convert_checkpoint.py)

type aopt struct {
	names   []string
	dest    string
	flag    bool
	kind    string // str, int, float, choice
	choices []string
}

type argparser struct {
	prog string
	opts []*aopt
}

func aflag(names ...string) *aopt { return &aopt{names: names, dest: names[0], flag: true} }
func aval(kind string, names ...string) *aopt {
	return &aopt{names: names, dest: names[0], kind: kind}
}
func achoice(choices []string, names ...string) *aopt {
	return &aopt{names: names, dest: names[0], kind: "choice", choices: choices}
}

func (a *argparser) usage() string {
	var b strings.Builder
	b.WriteString("usage: " + a.prog + " [-h]")
	for _, o := range a.opts {
		if o.flag {
			fmt.Fprintf(&b, " [%s]", o.names[0])
		} else {
			fmt.Fprintf(&b, " [%s %s]", o.names[0], strings.ToUpper(strings.TrimLeft(o.names[0], "-")))
		}
	}
	return b.String()
}

func (a *argparser) fail(msg string) int {
	out.Flush()
	errf("%s\n%s: error: %s\n", a.usage(), a.prog, msg)
	return 2
}

// find resolves an option name, allowing unique prefixes as argparse
// does.
func (a *argparser) find(name string) (*aopt, string) {
	var cands []*aopt
	var candNames []string
	for _, o := range a.opts {
		for _, n := range o.names {
			if n == name {
				return o, ""
			}
			if strings.HasPrefix(n, name) && strings.HasPrefix(name, "--") && len(name) > 2 {
				cands = append(cands, o)
				candNames = append(candNames, n)
			}
		}
	}
	switch len(cands) {
	case 0:
		return nil, ""
	case 1:
		return cands[0], ""
	}
	return nil, fmt.Sprintf("ambiguous option: %s could match %s", name, strings.Join(candNames, ", "))
}

func looksNegative(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

// parse returns the values by dest ("true" for flags), or an exit code.
func (a *argparser) parse(args []string) (map[string]string, int) {
	vals := map[string]string{}
	var unknown []string
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "-h" || arg == "--help" {
			outln(a.usage())
			return nil, 0
		}
		if !strings.HasPrefix(arg, "-") || arg == "-" || looksNegative(arg) {
			unknown = append(unknown, arg)
			continue
		}
		name, val, hasVal := arg, "", false
		if j := strings.IndexByte(arg, '='); j >= 0 {
			name, val, hasVal = arg[:j], arg[j+1:], true
		}
		o, amb := a.find(name)
		if amb != "" {
			return nil, a.fail(amb)
		}
		if o == nil {
			unknown = append(unknown, arg)
			continue
		}
		if o.flag {
			if hasVal {
				return nil, a.fail(fmt.Sprintf("argument %s: ignored explicit argument '%s'", o.names[0], val))
			}
			vals[o.dest] = "true"
			continue
		}
		if !hasVal {
			if i+1 >= len(args) || strings.HasPrefix(args[i+1], "-") && !looksNegative(args[i+1]) {
				return nil, a.fail(fmt.Sprintf("argument %s: expected one argument", strings.Join(o.names, "/")))
			}
			i++
			val = args[i]
		}
		switch o.kind {
		case "int":
			if _, err := strconv.Atoi(val); err != nil {
				return nil, a.fail(fmt.Sprintf("argument %s: invalid int value: '%s'", strings.Join(o.names, "/"), val))
			}
		case "float":
			if _, err := strconv.ParseFloat(val, 64); err != nil {
				return nil, a.fail(fmt.Sprintf("argument %s: invalid float value: '%s'", strings.Join(o.names, "/"), val))
			}
		case "choice":
			ok := false
			for _, ch := range o.choices {
				ok = ok || ch == val
			}
			if !ok {
				q := make([]string, len(o.choices))
				for i, ch := range o.choices {
					q[i] = "'" + ch + "'"
				}
				return nil, a.fail(fmt.Sprintf("argument %s: invalid choice: '%s' (choose from %s)", strings.Join(o.names, "/"), val, strings.Join(q, ", ")))
			}
		}
		vals[o.dest] = val
	}
	if len(unknown) > 0 {
		return nil, a.fail("unrecognized arguments: " + strings.Join(unknown, " "))
	}
	return vals, -1
}

func intOr(vals map[string]string, k string, def int) int {
	if v, ok := vals[k]; ok {
		n, _ := strconv.Atoi(v)
		return n
	}
	return def
}

// ---------------------------------------------------------------------------
// trtllm-build

func buildMain(args []string) int {
	v, ok := loadVersion()
	if !ok {
		return 2
	}
	if v.atLeast(1, 3) {
		errln("trtllm-build: command removed in TensorRT-LLM 1.3")
		return 1
	}
	outln(banner(v))
	out.Flush()
	dtypes := []string{"auto", "float16", "float32", "bfloat16", "int32", "disable"}
	gemm := []string{"auto", "float16", "float32", "bfloat16", "int32", "fp8", "disable"}
	if v.atLeast(0, 17) {
		gemm = []string{"auto", "float16", "float32", "bfloat16", "int32", "fp8", "nvfp4", "disable"}
	}
	onOff := []string{"enable", "disable"}
	a := &argparser{prog: "trtllm-build", opts: []*aopt{
		aval("str", "--checkpoint_dir"), aval("str", "--model_config"), aval("str", "--build_config"),
		aval("str", "--model_cls_file"), aval("str", "--model_cls_name"),
		aval("str", "--output_dir"),
		aval("int", "--max_batch_size"), aval("int", "--max_input_len"),
		{names: []string{"--max_seq_len", "--max_decoder_seq_len"}, dest: "--max_seq_len", kind: "int"},
		aval("int", "--max_beam_width"), aval("int", "--max_num_tokens"), aval("int", "--opt_num_tokens"),
		aval("int", "--max_encoder_input_len"),
		aval("int", "--max_prompt_embedding_table_size"),
		achoice([]string{"continuous", "paged", "disabled"}, "--kv_cache_type"),
		achoice(onOff, "--paged_kv_cache"),
		achoice([]string{"internal_error", "error", "warning", "info", "verbose", "debug", "trace"}, "--log_level"),
		achoice([]string{"layer_names_only", "detailed", "none"}, "--profiling_verbosity"),
		aflag("--enable_debug_output"), aflag("--strip_plan"), aflag("--weight_sparsity"), aflag("--weight_streaming"),
		aflag("--fast_build"), aflag("--dry_run"), aflag("--monitor_memory"), aflag("--visualize_network"),
		aval("int", "--workers"),
		achoice([]string{"float16", "float32"}, "--logits_dtype"),
		aflag("--gather_context_logits"), aflag("--gather_generation_logits"), aflag("--gather_all_token_logits"),
		aval("str", "--lora_dir"), aval("str", "--speculative_decoding_mode"), aval("int", "--max_draft_len"),
		achoice(dtypes, "--bert_attention_plugin"), achoice(dtypes, "--gpt_attention_plugin"),
		achoice(gemm, "--gemm_plugin"), achoice(dtypes, "--gemm_swiglu_plugin"), achoice(dtypes, "--fp8_rowwise_gemm_plugin"),
		achoice(dtypes, "--nccl_plugin"), achoice(dtypes, "--lora_plugin"), achoice(dtypes, "--moe_plugin"),
		achoice(dtypes, "--mamba_conv1d_plugin"), achoice(dtypes, "--low_latency_gemm_plugin"),
		achoice(onOff, "--context_fmha"), achoice(onOff, "--remove_input_padding"), achoice(onOff, "--reduce_fusion"),
		achoice(onOff, "--user_buffer"), achoice(onOff, "--use_paged_context_fmha"), achoice(onOff, "--use_fp8_context_fmha"),
		achoice(onOff, "--multiple_profiles"), achoice(onOff, "--paged_state"), achoice(onOff, "--streamingllm"),
		achoice(onOff, "--use_fused_mlp"), achoice(onOff, "--pp_reduce_scatter"),
		aval("int", "--tokens_per_block"),
	}}
	vals, code := a.parse(args)
	if code >= 0 {
		return code
	}
	var now int64 = perfBase
	l := &tlog{level: logLevels[vals["--log_level"]], now: &now}
	if _, ok := vals["--log_level"]; !ok {
		l.level = logLevels["info"]
	}
	ckpt := vals["--checkpoint_dir"]
	if ckpt == "" {
		return a.fail("the following arguments are required: --checkpoint_dir (the fake builds only from a TensorRT-LLM checkpoint)")
	}
	buildFrames := []string{
		frame("/usr/local/bin/trtllm-build", 8, "<module>", "sys.exit(main())"),
		frame(pyLib+"/tensorrt_llm/commands/build.py", 560, "main", "parallel_build(model_config, ckpt_dir, build_config, args.output_dir,"),
		frame(pyLib+"/tensorrt_llm/commands/build.py", 405, "parallel_build", "passed = build_and_save(rank, rank % workers, ckpt_dir,"),
	}
	cfgPath := filepath.Join(ckpt, "config.json")
	pre, err := readJSONObj(cfgPath)
	if err != nil {
		if os.IsNotExist(err) {
			return fileNotFound(buildFrames, cfgPath)
		}
		traceback(buildFrames, "json.decoder.JSONDecodeError: "+err.Error())
		return 1
	}
	mp := pre.getObj("mapping")
	world := mp.getInt("world_size", mp.getInt("tp_size", 1)*mp.getInt("pp_size", 1))
	dtype := pre.getStr("dtype", "float16")
	maxSeq := intOr(vals, "--max_seq_len", pre.getInt("max_position_embeddings", 2048))
	maxInput := intOr(vals, "--max_input_len", 1024)
	if maxInput > maxSeq {
		l.warn("max_input_len (%d) is larger than max_seq_len (%d), using max_seq_len", maxInput, maxSeq)
		maxInput = maxSeq
	}
	var gemmPlugin any
	if g, ok := vals["--gemm_plugin"]; ok {
		gemmPlugin = g
	}
	plugin := func(name, def string) any {
		if v, ok := vals[name]; ok {
			return v
		}
		if def == "" {
			return nil
		}
		return def
	}
	onoff := func(name string, def bool) bool {
		if v, ok := vals[name]; ok {
			return v == "enable"
		}
		return def
	}
	var optTokens any
	if _, ok := vals["--opt_num_tokens"]; ok {
		optTokens = intOr(vals, "--opt_num_tokens", 0)
	}
	kvType := strings.ToUpper(vals["--kv_cache_type"])
	if kvType == "" {
		kvType = "PAGED"
		if vals["--paged_kv_cache"] == "disable" {
			kvType = "CONTINUOUS"
		}
	}
	pluginCfg := obj{
		{"dtype", dtype},
		{"bert_attention_plugin", plugin("--bert_attention_plugin", "auto")},
		{"gpt_attention_plugin", plugin("--gpt_attention_plugin", "auto")},
		{"gemm_plugin", gemmPlugin},
		{"gemm_swiglu_plugin", plugin("--gemm_swiglu_plugin", "")},
		{"fp8_rowwise_gemm_plugin", plugin("--fp8_rowwise_gemm_plugin", "")},
		{"nccl_plugin", plugin("--nccl_plugin", "auto")},
		{"lora_plugin", plugin("--lora_plugin", "")},
		{"moe_plugin", plugin("--moe_plugin", "auto")},
		{"mamba_conv1d_plugin", plugin("--mamba_conv1d_plugin", "auto")},
		{"low_latency_gemm_plugin", plugin("--low_latency_gemm_plugin", "")},
		{"context_fmha", onoff("--context_fmha", true)},
		{"bert_context_fmha_fp32_acc", false},
		{"paged_kv_cache", kvType == "PAGED"},
		{"remove_input_padding", onoff("--remove_input_padding", true)},
		{"reduce_fusion", onoff("--reduce_fusion", false)},
		{"user_buffer", onoff("--user_buffer", false)},
		{"tokens_per_block", intOr(vals, "--tokens_per_block", 32)},
		{"use_paged_context_fmha", onoff("--use_paged_context_fmha", true)},
		{"use_fp8_context_fmha", onoff("--use_fp8_context_fmha", false)},
		{"multiple_profiles", onoff("--multiple_profiles", false)},
		{"paged_state", onoff("--paged_state", true)},
		{"streamingllm", onoff("--streamingllm", false)},
		{"use_fused_mlp", onoff("--use_fused_mlp", true)},
		{"pp_reduce_scatter", onoff("--pp_reduce_scatter", false)},
	}
	buildCfg := obj{
		{"max_input_len", maxInput},
		{"max_seq_len", maxSeq},
		{"opt_batch_size", 8},
		{"max_batch_size", intOr(vals, "--max_batch_size", 2048)},
		{"max_beam_width", intOr(vals, "--max_beam_width", 1)},
		{"max_num_tokens", intOr(vals, "--max_num_tokens", 8192)},
		{"opt_num_tokens", optTokens},
		{"max_prompt_embedding_table_size", intOr(vals, "--max_prompt_embedding_table_size", 0)},
		{"kv_cache_type", kvType},
		{"gather_context_logits", vals["--gather_context_logits"] == "true" || vals["--gather_all_token_logits"] == "true"},
		{"gather_generation_logits", vals["--gather_generation_logits"] == "true" || vals["--gather_all_token_logits"] == "true"},
		{"strongly_typed", true},
		{"force_num_profiles", nil},
		{"profiling_verbosity", vals["--profiling_verbosity"]},
		{"enable_debug_output", vals["--enable_debug_output"] == "true"},
		{"max_draft_len", intOr(vals, "--max_draft_len", 0)},
		{"speculative_decoding_mode", 1},
		{"use_refit", false},
		{"input_timing_cache", nil},
		{"output_timing_cache", "model.cache"},
		{"lora_config", obj{{"lora_dir", []any{}}, {"lora_ckpt_source", "hf"}, {"max_lora_rank", 64}, {"lora_target_modules", []any{}}, {"trtllm_modules_to_hf_modules", obj{}}}},
		{"weight_sparsity", vals["--weight_sparsity"] == "true"},
		{"weight_streaming", vals["--weight_streaming"] == "true"},
		{"plugin_config", pluginCfg},
		{"use_strip_plan", vals["--strip_plan"] == "true"},
		{"max_encoder_input_len", intOr(vals, "--max_encoder_input_len", 1024)},
		{"dry_run", vals["--dry_run"] == "true"},
		{"visualize_network", nil},
		{"monitor_memory", vals["--monitor_memory"] == "true"},
		{"use_mrope", false},
	}
	if buildCfg.get("profiling_verbosity") == "" {
		buildCfg = buildCfg.set("profiling_verbosity", "layer_names_only")
	}
	for _, o := range []struct{ name, def string }{{"bert_attention_plugin", "auto"}, {"gpt_attention_plugin", "auto"}, {"gemm_plugin", ""}, {"nccl_plugin", "auto"}} {
		if v := pluginCfg.get(o.name); v != nil {
			l.info("Set %s to %s.", o.name, v)
		}
	}
	outDir := vals["--output_dir"]
	if outDir == "" {
		outDir = "engine_outputs"
	}
	if vals["--dry_run"] == "true" {
		now += 1_000_000_000
		l.info("Total time of building all engines: %s", fmtDuration(time.Second))
		return 0
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		traceback(buildFrames, fmt.Sprintf("PermissionError: [Errno 13] Permission denied: '%s'", outDir))
		return 1
	}
	engineCfg := obj{{"version", v.raw}, {"pretrained_config", pre}, {"build_config", buildCfg}}
	for rank := 0; rank < world; rank++ {
		now += 400_000_000
		l.info("Build TensorRT engine Unnamed Network %d", rank)
		l.info("Engine generation completed in 0.40 sec.")
		path := filepath.Join(outDir, fmt.Sprintf("rank%d.engine", rank))
		l.info("Serializing engine to %s...", path)
		if err := os.WriteFile(path, []byte(fmt.Sprintf("fake TensorRT engine: rank %d of %d, TensorRT-LLM %s\n", rank, world, v.raw)), 0o644); err != nil {
			traceback(buildFrames, fmt.Sprintf("OSError: %v", err))
			return 1
		}
		l.info("Engine serialized. Total time: 00:00:00")
		if rank == 0 {
			if err := os.WriteFile(filepath.Join(outDir, "config.json"), []byte(dumpJSON(engineCfg, 4)), 0o644); err != nil {
				traceback(buildFrames, fmt.Sprintf("OSError: %v", err))
				return 1
			}
		}
	}
	now = perfBase + 1_000_000_000
	l.info("Total time of building all engines: %s", fmtDuration(time.Second))
	return 0
}

// ---------------------------------------------------------------------------
// python3

func pythonMain(args []string) int {
	if len(args) == 0 {
		errln("fake python3: the interactive interpreter is not simulated")
		return 2
	}
	missing := os.Getenv(envMissing) == "1"
	switch a := args[0]; {
	case a == "--version" || a == "-V":
		outln("Python 3.12.3")
		return 0
	case a == "-c":
		if len(args) < 2 {
			errln("Argument expected for the -c option\nusage: python3 [option] ... [-c cmd | -m mod | file | -] [arg] ...\nTry `python -h' for more information.")
			return 2
		}
		return pyCode(args[1], missing)
	case strings.HasPrefix(a, "-"):
		errf("fake python3: option %s is not simulated (only -c and scripts are)\n", a)
		return 2
	default:
		return pyScript(a, args[1:], missing)
	}
}

func pyCode(code string, missing bool) int {
	v, ok := loadVersion()
	if !ok {
		return 2
	}
	switch {
	case strings.Contains(code, "tensorrt_llm") && strings.Contains(code, "importlib"):
		if missing {
			traceback([]string{
				"  File \"<string>\", line 1, in <module>\n",
				frame("/usr/lib/python3.12/importlib/metadata/__init__.py", 889, "version", "return distribution(distribution_name).version"),
				frame("/usr/lib/python3.12/importlib/metadata/__init__.py", 862, "distribution", "return Distribution.from_name(distribution_name)"),
				frame("/usr/lib/python3.12/importlib/metadata/__init__.py", 399, "from_name", "raise PackageNotFoundError(name)"),
			}, "importlib.metadata.PackageNotFoundError: No package metadata was found for tensorrt_llm")
			return 1
		}
		outln(v.raw)
		return 0
	case strings.Contains(code, "import tensorrt_llm"):
		if missing {
			traceback([]string{"  File \"<string>\", line 1, in <module>\n"}, "ModuleNotFoundError: No module named 'tensorrt_llm'")
			return 1
		}
		outln(banner(v))
		if strings.Contains(code, "__version__") {
			outln(v.raw)
		}
		return 0
	}
	errln("fake python3: only programs that ask for TensorRT-LLM's version are simulated")
	return 2
}

// pyScript runs a TensorRT-LLM checkpoint conversion script
// (examples/.../convert_checkpoint.py): it writes config.json and
// rank<N>.safetensors.
func pyScript(script string, args []string, missing bool) int {
	abs, _ := filepath.Abs(script)
	if st, err := os.Stat(script); err != nil || st.IsDir() {
		errf("python3: can't open file '%s': [Errno 2] No such file or directory\n", abs)
		return 2
	}
	prog := filepath.Base(script)
	if missing {
		traceback([]string{frame(abs, 12, "<module>", "import tensorrt_llm")}, "ModuleNotFoundError: No module named 'tensorrt_llm'")
		return 1
	}
	v, ok := loadVersion()
	if !ok {
		return 2
	}
	a := &argparser{prog: prog, opts: []*aopt{
		aval("str", "--model_dir"), aval("str", "--meta_ckpt_dir"),
		aval("int", "--tp_size"), aval("int", "--pp_size"), aval("int", "--cp_size"),
		aval("int", "--moe_tp_size"), aval("int", "--moe_ep_size"),
		achoice([]string{"auto", "float16", "bfloat16", "float32"}, "--dtype"),
		aval("str", "--output_dir"), aval("int", "--workers"), aval("str", "--log_level"),
		aflag("--use_weight_only"), achoice([]string{"int8", "int4", "int8_gptq", "int4_gptq", "int4_awq"}, "--weight_only_precision"),
		aflag("--use_fp8"), aflag("--use_nvfp4"), aflag("--fp8_kv_cache"), aflag("--int8_kv_cache"),
		aval("float", "--smoothquant"), aflag("--per_channel"), aflag("--per_token"),
		aflag("--load_by_shard"), aflag("--load_model_on_cpu"), aflag("--use_parallel_embedding"),
		aval("int", "--embedding_sharding_dim"), aval("str", "--calib_dataset"),
	}}
	vals, code := a.parse(args)
	if code >= 0 {
		return code
	}
	outln(banner(v))
	out.Flush()
	frames := []string{frame(abs, 590, "<module>", "main()"), frame(abs, 575, "main", "convert_and_save_hf(args)")}
	modelDir := vals["--model_dir"]
	if modelDir == "" {
		if vals["--meta_ckpt_dir"] != "" {
			errf("fake %s: --meta_ckpt_dir is not simulated; use --model_dir\n", prog)
			return 2
		}
		return a.fail("the following arguments are required: --model_dir")
	}
	hf, err := readJSONObj(filepath.Join(modelDir, "config.json"))
	if cfg, ok := hubConfigs[modelDir]; ok && err != nil {
		// xrun's conversion script downloads a hub name's checkpoint
		// (huggingface_hub.snapshot_download); a few are known here.
		hf, err = parseJSONObj([]byte(cfg))
	}
	if err != nil {
		traceback(append(frames, frame(pyLib+"/transformers/configuration_utils.py", 721, "_get_config_dict", "resolved_config_file = cached_file(")),
			fmt.Sprintf("OSError: %s does not appear to have a file named config.json. Checkout 'https://huggingface.co/%s/tree/None' for available files.", modelDir, modelDir))
		return 1
	}
	tp, pp, cp := intOr(vals, "--tp_size", 1), intOr(vals, "--pp_size", 1), intOr(vals, "--cp_size", 1)
	ep, moeTP := intOr(vals, "--moe_ep_size", -1), intOr(vals, "--moe_tp_size", -1)
	if tp < 1 || pp < 1 || cp < 1 {
		traceback(frames, fmt.Sprintf("AssertionError: tp_size (%d), pp_size (%d) and cp_size (%d) must be positive", tp, pp, cp))
		return 1
	}
	switch {
	case ep == -1 && moeTP == -1:
		ep, moeTP = 1, tp
	case ep == -1:
		ep = tp / moeTP
	case moeTP == -1:
		moeTP = tp / ep
	}
	if ep < 1 || moeTP < 1 || moeTP*ep != tp {
		traceback(append(frames, frame(pyLib+"/tensorrt_llm/mapping.py", 92, "__init__", "raise ValueError(")),
			fmt.Sprintf("ValueError: tp_size must equal to moe_tp_size * moe_ep_size, but got %d != %d * %d", tp, moeTP, ep))
		return 1
	}
	dtype := vals["--dtype"]
	if dtype == "" || dtype == "auto" {
		dtype = hf.getStr("dtype", hf.getStr("torch_dtype", "float16"))
		if dtype == "float32" && vals["--dtype"] == "" {
			dtype = "float16"
		}
	}
	outDir := vals["--output_dir"]
	if outDir == "" {
		outDir = "tllm_checkpoint"
	}
	arch := "LlamaForCausalLM"
	if l, ok := hf.get("architectures").([]any); ok && len(l) > 0 {
		if s, ok := l[0].(string); ok {
			arch = s
		}
	}
	heads := hf.getInt("num_attention_heads", 32)
	hidden := hf.getInt("hidden_size", 4096)
	headSize := hidden / max(1, heads)
	if h := hf.getInt("head_dim", 0); h > 0 {
		headSize = h
	}
	ropeTheta := hf.getFloat("rope_theta", hf.getObj("rope_parameters").getFloat("rope_theta", 10000.0))
	var quant, kvQuant any
	if vals["--use_fp8"] == "true" {
		quant = "FP8"
	}
	if vals["--use_nvfp4"] == "true" {
		quant = "NVFP4"
	}
	if vals["--fp8_kv_cache"] == "true" {
		kvQuant = "FP8"
	}
	if vals["--int8_kv_cache"] == "true" {
		kvQuant = "INT8"
	}
	cfg := obj{
		{"mlp_bias", false},
		{"attn_bias", false},
		{"rotary_base", ropeTheta},
		{"rotary_scaling", hf.get("rope_scaling")},
		{"residual_mlp", false},
		{"disable_weight_only_quant_plugin", false},
		{"moe", obj{
			{"num_experts", hf.getInt("num_local_experts", hf.getInt("num_experts", 0))},
			{"shared_expert_intermediate_size", 0},
			{"top_k", hf.getInt("num_experts_per_tok", 0)},
			{"normalization_mode", 1},
			{"sparse_mixer_epsilon", 0.01},
			{"tp_mode", 0},
			{"device_limited_n_group", 0},
			{"device_limited_topk_group", 0},
			{"device_limited_routed_scaling_factor", 1.0},
		}},
		{"remove_duplicated_kv_heads", false},
		{"fc_after_embed", false},
		{"use_input_layernorm_in_first_layer", true},
		{"use_last_layernorm", true},
		{"layer_idx_offset", 0},
		{"embedding_multiplier", 1.0},
		{"attention_multiplier", 1.0},
		{"residual_multiplier", 1.0},
		{"output_multiplier_scale", 1.0},
		{"has_partial_lora_mask", false},
		{"architecture", arch},
		{"dtype", dtype},
		{"vocab_size", hf.getInt("vocab_size", 128256)},
		{"hidden_size", hidden},
		{"num_hidden_layers", hf.getInt("num_hidden_layers", 32)},
		{"num_attention_heads", heads},
		{"hidden_act", hf.getStr("hidden_act", "silu")},
		{"logits_dtype", "float32"},
		{"norm_epsilon", hf.getFloat("rms_norm_eps", 1e-5)},
		{"runtime_defaults", nil},
		{"position_embedding_type", "rope_gpt_neox"},
		{"num_key_value_heads", hf.getInt("num_key_value_heads", heads)},
		{"intermediate_size", hf.getInt("intermediate_size", 14336)},
		{"max_position_embeddings", hf.getInt("max_position_embeddings", 8192)},
		{"mapping", obj{
			{"world_size", tp * pp * cp},
			{"gpus_per_node", 8},
			{"cp_size", cp},
			{"tp_size", tp},
			{"pp_size", pp},
			{"moe_tp_size", moeTP},
			{"moe_cluster_size", 1},
			{"moe_ep_size", ep},
			{"attn_tp_size", -1},
			{"attn_cp_size", -1},
			{"auto_parallel", false},
		}},
		{"quantization", obj{
			{"quant_algo", quant},
			{"kv_cache_quant_algo", kvQuant},
			{"group_size", 128},
			{"smoothquant_val", 0.5},
			{"clamp_val", nil},
			{"use_meta_recipe", false},
			{"has_zero_point", false},
			{"pre_quant_scale", false},
			{"exclude_modules", nil},
		}},
		{"use_parallel_embedding", vals["--use_parallel_embedding"] == "true"},
		{"embedding_sharding_dim", intOr(vals, "--embedding_sharding_dim", 0)},
		{"head_size", headSize},
		{"qk_layernorm", false},
		{"rotary_embedding_dim", headSize},
		{"tie_word_embeddings", hf.get("tie_word_embeddings") == true},
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		traceback(frames, fmt.Sprintf("PermissionError: [Errno 13] Permission denied: '%s'", outDir))
		return 1
	}
	outln(fmt.Sprintf("Loading HF model from %s (%s, %s)...", modelDir, arch, dtype))
	for rank := 0; rank < tp*pp*cp; rank++ {
		path := filepath.Join(outDir, fmt.Sprintf("rank%d.safetensors", rank))
		if err := os.WriteFile(path, nil, 0o644); err != nil {
			traceback(frames, fmt.Sprintf("OSError: %v", err))
			return 1
		}
		outln(fmt.Sprintf("Saved rank %d of %d to %s", rank, tp*pp*cp, path))
	}
	if err := os.WriteFile(filepath.Join(outDir, "config.json"), []byte(dumpJSON(cfg, 4)), 0o644); err != nil {
		traceback(frames, fmt.Sprintf("OSError: %v", err))
		return 1
	}
	outln("Total time of converting checkpoints: 00:00:01")
	return 0
}

// ---------------------------------------------------------------------------
// nsys

func nsysOld() bool { return os.Getenv(envNsysOld) == "1" }

func nsysMain(args []string) int {
	if len(args) == 0 {
		outln("usage: nsys [--version] [--help] <command> [<args>] [application] [<application args>]")
		return 1
	}
	switch args[0] {
	case "--version", "-v":
		ver := nsysVersion
		if nsysOld() {
			ver = nsysOldVersion
		}
		outln("NVIDIA Nsight Systems version " + ver)
		return 0
	case "--help", "-h", "help":
		outln("usage: nsys [--version] [--help] <command> [<args>] [application] [<application args>]\n\n The most commonly used nsys commands are:\n\tprofile       Run an application and capture its profile into a nsys-rep file.\n\tstats         Generate statistics from an existing nsys-rep or SQLite file.")
		return 0
	case "profile":
		return nsysProfile(args[1:])
	case "stats":
		return nsysStats(args[1:])
	}
	errf("Unknown command '%s'\n\nusage: nsys [--version] [--help] <command> [<args>] [application] [<application args>]\n", args[0])
	return 1
}

type nsysOpt struct {
	long, short string
	flag        bool
}

func nsysFind(opts []nsysOpt, name string) *nsysOpt {
	for i := range opts {
		if name == opts[i].long || opts[i].short != "" && name == opts[i].short {
			return &opts[i]
		}
	}
	return nil
}

// nsysParse reads nsys's options up to the first argument that is not one
// (the application for profile, the input file for stats).
func nsysParse(cmd string, opts []nsysOpt, args []string) (map[string][]string, []string, int) {
	vals := map[string][]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return vals, args[i+1:], -1
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			return vals, args[i:], -1
		}
		name, val, hasVal := a, "", false
		if j := strings.IndexByte(a, '='); j >= 0 && strings.HasPrefix(a, "--") {
			name, val, hasVal = a[:j], a[j+1:], true
		}
		o := nsysFind(opts, name)
		if o == nil {
			errf("unrecognised option '%s'\n\nusage: nsys %s [<args>] %s\nTry 'nsys %s --help' for more information.\n", a, cmd,
				map[bool]string{true: "[application] [<application args>]", false: "[input-file]"}[cmd == "profile"], cmd)
			return nil, nil, 1
		}
		if o.flag {
			vals[o.long] = append(vals[o.long], "true")
			continue
		}
		if !hasVal {
			if i+1 >= len(args) {
				errf("option '%s' requires an argument\n", a)
				return nil, nil, 1
			}
			i++
			val = args[i]
		}
		vals[o.long] = append(vals[o.long], val)
	}
	return vals, nil, -1
}

func last(vals map[string][]string, k, def string) string {
	if l := vals[k]; len(l) > 0 {
		return l[len(l)-1]
	}
	return def
}

func nsysProfile(args []string) int {
	opts := []nsysOpt{
		{long: "--output", short: "-o"}, {long: "--force-overwrite", short: "-f"}, {long: "--trace", short: "-t"},
		{long: "--capture-range", short: "-c"}, {long: "--capture-range-end"}, {long: "--cuda-graph-trace"},
		{long: "--trace-fork-before-exec"}, {long: "--env-var", short: "-e"}, {long: "--show-output", short: "-w"},
		{long: "--sample", short: "-s"}, {long: "--cpuctxsw"}, {long: "--stats"}, {long: "--delay", short: "-y"},
		{long: "--duration", short: "-d"}, {long: "--cuda-memory-usage"}, {long: "--wait"}, {long: "--kill"},
		{long: "--help", short: "-h", flag: true},
	}
	vals, app, code := nsysParse("profile", opts, args)
	if code >= 0 {
		return code
	}
	if len(vals["--help"]) > 0 {
		outln("usage: nsys profile [<args>] [application] [<application args>]")
		return 0
	}
	if len(app) == 0 {
		errln("No application was specified to profile.\n\nusage: nsys profile [<args>] [application] [<application args>]")
		return 1
	}
	rangeMode := last(vals, "--capture-range", "none")
	switch rangeMode {
	case "none", "cudaProfilerApi", "nvtx", "hotkey":
	default:
		errf("Illegal --capture-range argument: %s.\nPossible values are 'none', 'cudaProfilerApi', 'nvtx' or 'hotkey'.\n", rangeMode)
		return 1
	}
	endMode := last(vals, "--capture-range-end", "stop-shutdown")
	if !regexp.MustCompile(`^(none|stop|stop-shutdown|repeat(:\d+)?|repeat-shutdown:\d+)$`).MatchString(endMode) {
		errf("Illegal --capture-range-end argument: %s.\nPossible values are 'none', 'stop', 'stop-shutdown', 'repeat[:N]' or 'repeat-shutdown:N'.\n", endMode)
		return 1
	}
	force := last(vals, "--force-overwrite", "false")
	if force != "true" && force != "false" {
		errf("Illegal --force-overwrite argument: %s.\nPossible values are 'true' or 'false'.\n", force)
		return 1
	}
	output := last(vals, "--output", "")
	if output == "" {
		for i := 1; ; i++ {
			output = fmt.Sprintf("report%d", i)
			if _, err := os.Stat(output + ".nsys-rep"); err != nil {
				break
			}
		}
	}
	rep := output
	if !strings.HasSuffix(rep, ".nsys-rep") {
		rep += ".nsys-rep"
	}
	absRep, _ := filepath.Abs(rep)
	if _, err := os.Stat(rep); err == nil && force != "true" {
		errf("Failed to create '%s': File exists.\nUse `--force-overwrite true` to overwrite existing files.\n", absRep)
		return 1
	}
	capFile, err := os.CreateTemp("", "nsys-report-*.qdstrm")
	if err != nil {
		errf("Failed to create the collection file: %v\n", err)
		return 1
	}
	capPath := capFile.Name()
	capFile.Close()
	defer os.Remove(capPath)

	env := os.Environ()
	for _, e := range vals["--env-var"] {
		for _, kvs := range strings.Split(e, ",") {
			if kvs != "" {
				env = append(env, kvs)
			}
		}
	}
	env = append(env, envCapture+"="+capPath, envCaptureRange+"="+rangeMode, envCaptureEnd+"="+endMode)
	path, err := exec.LookPath(app[0])
	if err != nil {
		errf("Failed to launch '%s': No such file or directory.\n", app[0])
		return 1
	}
	outln("Collecting data...")
	out.Flush()
	cmd := exec.Command(path, app[1:]...)
	cmd.Args[0] = app[0]
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		errf("Failed to launch '%s': %v\n", app[0], err)
		return 1
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		for s := range sigs {
			cmd.Process.Signal(s)
		}
	}()
	werr := cmd.Wait()
	signal.Stop(sigs)
	status := 0
	if werr != nil {
		var ee *exec.ExitError
		if errors.As(werr, &ee) {
			status = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				status = 128 + int(ws.Signal())
			}
		} else {
			status = 1
		}
	}
	data, _ := os.ReadFile(capPath)
	capt := parseCapture(data)
	if capt.shutdown {
		status = 0
		outln("Capture range ended in the application; the session is shut down and the application terminated (--capture-range-end=" + endMode + ").")
	}
	empty := rangeMode == "cudaProfilerApi" && !capt.started
	if empty {
		outln("WARNING: No CUDA events collected. The capture range (cudaProfilerApi) never started: the application did not call cudaProfilerStart().")
		if os.Getenv(envNsysStrict) == "1" {
			outln("Generated:\n    No reports were generated.")
			return status
		}
	}
	var b bytes.Buffer
	b.WriteString(captureMagic + "\n")
	fmt.Fprintf(&b, "# nsys %s profile of: %s\n", nsysVersion, strings.Join(app, " "))
	b.Write(data)
	if err := os.WriteFile(rep, b.Bytes(), 0o644); err != nil {
		errf("Failed to create '%s': %v\n", absRep, err)
		return 1
	}
	outln(fmt.Sprintf("Generating '%s'", capPath))
	outln(fmt.Sprintf("[1/1] [========================100%%] %s", filepath.Base(rep)))
	outln("Generated:\n    " + absRep)
	return status
}

type captured struct {
	started, shutdown bool
	kernels           map[string][]int64
	order             []string
}

func parseCapture(data []byte) *captured {
	c := &captured{kernels: map[string][]int64{}}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Split(line, "\t")
		switch f[0] {
		case "S":
			c.started = true
		case "X":
			c.shutdown = true
		case "K":
			if len(f) != 4 {
				continue
			}
			name := f[2]
			if _, ok := c.kernels[name]; !ok {
				c.order = append(c.order, name)
			}
			for _, d := range strings.Split(f[3], ",") {
				if n, err := strconv.ParseInt(d, 10, 64); err == nil {
					c.kernels[name] = append(c.kernels[name], n)
				}
			}
		}
	}
	return c
}

type kernRow struct {
	name                  string
	total, n, min, max    int64
	pct, avg, med, stddev float64
}

func kernelRows(c *captured) []kernRow {
	var rows []kernRow
	var all int64
	for _, name := range c.order {
		d := append([]int64(nil), c.kernels[name]...)
		if len(d) == 0 {
			continue
		}
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		r := kernRow{name: name, n: int64(len(d)), min: d[0], max: d[len(d)-1]}
		for _, x := range d {
			r.total += x
		}
		r.avg = float64(r.total) / float64(r.n)
		if m := len(d) / 2; len(d)%2 == 1 {
			r.med = float64(d[m])
		} else {
			r.med = (float64(d[m-1]) + float64(d[m])) / 2
		}
		if len(d) > 1 {
			ss := 0.0
			for _, x := range d {
				ss += (float64(x) - r.avg) * (float64(x) - r.avg)
			}
			r.stddev = math.Sqrt(ss / float64(len(d)-1))
		}
		all += r.total
		rows = append(rows, r)
	}
	for i := range rows {
		rows[i].pct = 100 * float64(rows[i].total) / float64(all)
	}
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].total != rows[j].total {
			return rows[i].total > rows[j].total
		}
		return rows[i].name < rows[j].name
	})
	return rows
}

func csvQuote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

func csvLine(fields ...string) string {
	q := make([]string, len(fields))
	for i, f := range fields {
		q[i] = csvQuote(f)
	}
	return strings.Join(q, ",") + "\n"
}

func kernelCSV(rows []kernRow, old bool) string {
	var b strings.Builder
	f1 := func(x float64) string { return strconv.FormatFloat(x, 'f', 1, 64) }
	i := func(x int64) string { return strconv.FormatInt(x, 10) }
	if old {
		b.WriteString(csvLine("Time(%)", "Total Time (ns)", "Instances", "Average", "Minimum", "Maximum", "Name"))
		for _, r := range rows {
			b.WriteString(csvLine(f1(r.pct), i(r.total), i(r.n), f1(r.avg), i(r.min), i(r.max), r.name))
		}
		return b.String()
	}
	b.WriteString(csvLine("Time (%)", "Total Time (ns)", "Instances", "Avg (ns)", "Med (ns)", "Min (ns)", "Max (ns)", "StdDev (ns)", "Name"))
	for _, r := range rows {
		b.WriteString(csvLine(f1(r.pct), i(r.total), i(r.n), f1(r.avg), f1(r.med), i(r.min), i(r.max), f1(r.stddev), r.name))
	}
	return b.String()
}

func kernelColumns(rows []kernRow, report string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n ** CUDA GPU Kernel Summary (%s):\n\n", report)
	fmt.Fprintf(&b, " %8s  %15s  %9s  %11s  %11s  %9s  %9s  %11s  %s\n", "Time (%)", "Total Time (ns)", "Instances", "Avg (ns)", "Med (ns)", "Min (ns)", "Max (ns)", "StdDev (ns)", "Name")
	for _, r := range rows {
		fmt.Fprintf(&b, " %8.1f  %15d  %9d  %11.1f  %11.1f  %9d  %9d  %11.1f  %s\n", r.pct, r.total, r.n, r.avg, r.med, r.min, r.max, r.stddev, r.name)
	}
	return b.String()
}

func nsysStats(args []string) int {
	opts := []nsysOpt{
		{long: "--report", short: "-r"}, {long: "--format"}, {long: "--output", short: "-o"},
		{long: "--force-export"}, {long: "--force-overwrite", short: "-f"}, {long: "--timeunit"},
		{long: "--sqlite"}, {long: "--quiet", short: "-q", flag: true}, {long: "--help", short: "-h", flag: true},
	}
	vals, rest, code := nsysParse("stats", opts, args)
	if code >= 0 {
		return code
	}
	if len(vals["--help"]) > 0 {
		outln("usage: nsys stats [<args>] <input-file>")
		return 0
	}
	if len(rest) != 1 {
		errln("ERROR: Exactly one input file is required.\n\nusage: nsys stats [<args>] <input-file>")
		return 1
	}
	input := rest[0]
	old := nsysOld()
	known := "cuda_gpu_kern_sum"
	if old {
		known = "gpukernsum"
	}
	var reports []string
	for _, r := range vals["--report"] {
		for _, s := range strings.Split(r, ",") {
			if s = strings.TrimSpace(s); s != "" {
				reports = append(reports, s)
			}
		}
	}
	if len(reports) == 0 {
		reports = []string{known}
	}
	for _, r := range reports {
		if r != known {
			errf("ERROR: Report '%s' could not be found.\n", r)
			return 1
		}
	}
	format := last(vals, "--format", "column")
	if format != "csv" && format != "column" {
		errf("ERROR: Format '%s' is not simulated by the fake nsys (csv and column are).\n", format)
		return 1
	}
	data, err := os.ReadFile(input)
	if err != nil {
		errf("ERROR: Input file '%s' could not be found.\n", input)
		return 1
	}
	if !bytes.HasPrefix(data, []byte(captureMagic+"\n")) {
		errf("ERROR: '%s' is not a valid report file.\n", input)
		return 1
	}
	sqlite := strings.TrimSuffix(strings.TrimSuffix(input, ".sqlite"), ".nsys-rep") + ".sqlite"
	if !strings.HasSuffix(input, ".sqlite") {
		if _, err := os.Stat(sqlite); err != nil || last(vals, "--force-export", "false") == "true" {
			outln(fmt.Sprintf("Generating SQLite file %s from %s", sqlite, input))
			if err := os.WriteFile(sqlite, data, 0o644); err != nil {
				errf("ERROR: Could not write '%s': %v\n", sqlite, err)
				return 1
			}
		}
	}
	rows := kernelRows(parseCapture(data))
	output := last(vals, "--output", "-")
	status := 0
	for _, r := range reports {
		if old {
			outln(fmt.Sprintf("Using %s for SQL queries.", sqlite))
			outln(fmt.Sprintf("Running [/opt/nvidia/nsight-systems/2021.3.1/target-linux-x64/reports/%s.py %s]... ", r, sqlite))
		} else {
			outln(fmt.Sprintf("Processing [%s] with [/opt/nvidia/nsight-systems/2024.5.1/host-linux-x64/reports/%s.py]... ", sqlite, r))
		}
		if len(rows) == 0 {
			outln("")
			outln(fmt.Sprintf("SKIPPED: %s does not contain CUDA kernel data.", sqlite))
			continue
		}
		var text string
		if format == "csv" {
			text = kernelCSV(rows, old)
		} else {
			text = kernelColumns(rows, r)
		}
		if output == "-" {
			outln("")
			out.WriteString(text)
			continue
		}
		ext := ".csv"
		if format == "column" {
			ext = ".txt"
		}
		path := output + "_" + r + ext
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			errf("ERROR: Could not write '%s': %v\n", path, err)
			status = 1
		}
	}
	return status
}
