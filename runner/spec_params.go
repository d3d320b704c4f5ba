package runner

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/xrun-dev/xrun/engine"
)

// Params are the fully resolved parameters of one cell: the defaults,
// overlaid with the spec's params, overlaid with the cell's matrix values.
// Values are canonical (profile_window "100-150", routing_mode "zipf:1.5").
type Params struct {
	Engine        string // auto | cuda | cpu | trtllm | command | openai
	Model         string // zoo name, or a model directory as written in the spec
	Dtype         string // float16 | bfloat16 | float32 | fp8 (built-in engine: E4M3 GEMMs)
	KVCacheDtype  string // auto | fp8 (built-in engine: an E4M3 KV cache)
	MoEWeights    string // auto | bf16 | mxfp4 (built-in engine: how experts are kept)
	BatchSize     int    // most requests in flight (trtllm-bench --max_batch_size)
	MaxNumTokens  int    // most tokens per engine iteration
	GemmPlugin    string // auto | disable
	RoutingMode   string // learned | perfect | uniform | zipf:S
	ProfileWindow string // none, or comma list of "A-B" spans and single iterations
	Seed          int    // seed of random weights and of random routing modes
	Warmup        int    // requests run and discarded before timing
	GPUsPerCell   int
	// Layers runs the model's first Layers layers at their exact shapes; 0
	// means all of them (canonical: a count equal to the model's is 0).
	Layers int
	// FP8Activations is auto | static | dynamic (built-in engine, dtype
	// fp8: how the FP8 GEMMs scale their input activations).
	FP8Activations string
	// KVCacheFreeGPUMemFraction is the share of free GPU memory the KV cache may take.
	KVCacheFreeGPUMemFraction float64
	// TrtllmBackend is trtllm-bench's --backend (engine trtllm).
	TrtllmBackend string
	// TP, PP and EP are the tensor-, pipeline- and expert-parallel sizes
	// (trtllm-bench --tp/--pp/--ep); 1 on the built-in engine.
	TP, PP, EP int
	// ExtraLLMAPIOptions is a YAML file of LLM API options
	// (trtllm-bench --extra_llm_api_options), as written in the spec, or
	// none.
	ExtraLLMAPIOptions string
	// Timeout bounds one cell (all its repeats); 0 means no limit. It is an
	// execution limit, not something measured, so it is in neither the
	// cell id nor Flat.
	Timeout time.Duration
	// LoadDuration sizes a generated dataset for a load at request_rate:
	// at least ceil(request_rate x LoadDuration) requests, so that every
	// load point arrives for about as long (0: dataset.num_requests as
	// given).
	LoadDuration time.Duration
	// RequestRate, Burstiness and Concurrency are how requests arrive
	// (engine.Load): at RequestRate per second (0: inf, all at once),
	// gamma gaps of shape Burstiness, from at most Concurrency users (0:
	// no closed loop).
	RequestRate float64
	Burstiness  float64
	Concurrency int
	Dataset     DatasetParams
}

// DatasetParams describe the requests a cell serves: the options of
// TensorRT-LLM's prepare_dataset.py, or a dataset file.
type DatasetParams struct {
	// Generator is token-norm-dist, token-unif-dist, or a path to a .jsonl
	// dataset as written in the spec (relative to the spec's directory; see
	// Cell.DatasetFile for the resolved path).
	Generator   string
	NumRequests int
	InputMean   int
	InputStdev  int
	OutputMean  int
	OutputStdev int
	InputMin    int
	InputMax    int
	OutputMin   int
	OutputMax   int
	Seed        int
	// VocabSize and EOSID default to the model's tokenizer (DatasetVocab, EOS).
	VocabSize  int
	EOSID      int
	RandTaskID TaskIDRange
}

// Dataset generator names.
const (
	GenNorm = "token-norm-dist"
	GenUnif = "token-unif-dist"
	GenFile = "file" // what DatasetParams.Kind reports for a dataset file
)

// Kind is GenNorm, GenUnif or GenFile.
func (d DatasetParams) Kind() string {
	if d.Generator == GenNorm || d.Generator == GenUnif {
		return d.Generator
	}
	return GenFile
}

// TaskIDRange is prepare_dataset.py's --rand-task-id MIN MAX; unset means
// task ids are the requests' indices.
type TaskIDRange struct {
	Set      bool
	Min, Max int
}

func (r TaskIDRange) String() string {
	if !r.Set {
		return "none"
	}
	return strconv.Itoa(r.Min) + "-" + strconv.Itoa(r.Max)
}

// showDuration is a duration parameter's value as specs write it: "5s",
// or none.
func showDuration(d time.Duration) string {
	if d <= 0 {
		return "none"
	}
	return d.String()
}

// maxNumRequests is the most requests a dataset may hold.
const maxNumRequests = 100_000_000

// Span is one profiled range of engine iterations, First..Last inclusive.
type Span = engine.Span

// ProfileSpans parses the canonical profile_window; nil means no profiling.
func (p Params) ProfileSpans() []Span {
	spans, _ := parseProfileWindow(p.ProfileWindow)
	return spans
}

// Routing splits routing_mode into its mode and, for zipf, the skew S.
func (p Params) Routing() (mode string, s float64) {
	if rest, ok := strings.CutPrefix(p.RoutingMode, "zipf:"); ok {
		s, _ = strconv.ParseFloat(rest, 64)
		return "zipf", s
	}
	return p.RoutingMode, 0
}

type valueKind int

const (
	kindInt valueKind = iota
	kindFloat
	kindString
	kindDuration
	kindTaskRange
)

// param describes one parameter: its place in Params, its default, how a
// YAML value becomes a canonical value, and when it cannot matter. The
// table below is the single source of the spec's parameters: decoding,
// axis names, suggestions, Flat, the cell hash and the README all follow it.
type param struct {
	path string
	kind valueKind
	doc  string // "expected ..." wording for errors
	// def is the default as a canonical value; nil for parameters derived
	// per cell (dataset.vocab_size, dataset.eos_id) or required (model).
	def any
	// noAxis marks parameters that may not differ between cells.
	noAxis bool
	// identity is false for execution limits that are not part of what a
	// cell measures (timeout): they are left out of Flat and the id hash.
	identity bool
	// whenGiven leaves the parameter out of Flat and the id hash of cells
	// the spec does not give it to (in params, the matrix or an include
	// entry), as one that does not apply: a parameter added after cells
	// had ids (layers) keeps them for every spec that does not use it.
	whenGiven bool
	// show renders a value for people when formatValue's would mislead
	// (layers 0 is "all"); nil means formatValue.
	show func(v any) string
	// slug turns a value into the short, readable part of a cell id.
	slug func(v any) string
	// parse validates a scalar and returns its canonical value, or the
	// message of what was expected.
	parse func(n *yaml.Node) (any, string)

	intp func(*Params) *int
	strp func(*Params) *string
	fltp func(*Params) *float64
	durp func(*Params) *time.Duration
	rngp func(*Params) *TaskIDRange
}

func (pm *param) set(p *Params, v any) {
	switch pm.kind {
	case kindInt:
		*pm.intp(p) = v.(int)
	case kindFloat:
		*pm.fltp(p) = v.(float64)
	case kindString:
		*pm.strp(p) = v.(string)
	case kindDuration:
		*pm.durp(p) = v.(time.Duration)
	case kindTaskRange:
		*pm.rngp(p) = v.(TaskIDRange)
	}
}

func (pm *param) get(p *Params) any {
	switch pm.kind {
	case kindInt:
		return *pm.intp(p)
	case kindFloat:
		return *pm.fltp(p)
	case kindString:
		return *pm.strp(p)
	case kindDuration:
		return *pm.durp(p)
	default:
		return pm.rngp(p).String()
	}
}

// appendValue writes the canonical encoding of p's value, without boxing
// it, for the cell hash.
func (pm *param) appendValue(b []byte, p *Params) []byte {
	switch pm.kind {
	case kindInt:
		return strconv.AppendInt(b, int64(*pm.intp(p)), 10)
	case kindFloat:
		return strconv.AppendFloat(b, *pm.fltp(p), 'g', -1, 64)
	case kindString:
		return appendQuoted(b, *pm.strp(p))
	case kindDuration:
		return strconv.AppendInt(b, int64(*pm.durp(p)), 10)
	default:
		r := pm.rngp(p)
		return append(b, r.String()...)
	}
}

// appendQuoted is strconv.AppendQuote, with a fast path for the plain
// ASCII that nearly every value is.
func appendQuoted(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c > '~' || c == '"' || c == '\\' {
			return strconv.AppendQuote(b, s)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// formatValue renders a canonical value the way a user would write it.
func formatValue(v any) string {
	switch x := v.(type) {
	case int:
		return strconv.Itoa(x)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case string:
		return x
	case time.Duration:
		if x == 0 {
			return "none"
		}
		return x.String()
	case TaskIDRange:
		return x.String()
	}
	return fmt.Sprint(v)
}

// Parameter indices of the ones the expansion treats specially.
const (
	pEngine = iota
	pModel
	pLayers
	pDtype
	pKVCacheDtype
	pMoEWeights
	pFP8Activations
	pBatchSize
	pMaxNumTokens
	pGemmPlugin
	pRoutingMode
	pProfileWindow
	pSeed
	pWarmup
	pGPUsPerCell
	pKVFraction
	pTrtllmBackend
	pTP
	pPP
	pEP
	pExtraOptions
	pTimeout
	pRequestRate
	pBurstiness
	pConcurrency
	pGenerator
	pNumRequests
	pInputMean
	pInputStdev
	pOutputMean
	pOutputStdev
	pInputMin
	pInputMax
	pOutputMin
	pOutputMax
	pDatasetSeed
	pVocabSize
	pEOSID
	pRandTaskID
	pLoadDuration
	numParams
)

// params is the registry, in the canonical order of Flat, the hash and the docs.
var params = [numParams]*param{
	pEngine: enumParam("engine", "auto", []string{"auto", "cuda", "cpu", "trtllm", "command", "openai"}, func(p *Params) *string { return &p.Engine },
		map[string]string{"auto": "eng-auto"}),
	pModel: {path: "model", kind: kindString, identity: true,
		doc:   "a zoo model name or a directory with config.json",
		parse: parseModelName, strp: func(p *Params) *string { return &p.Model },
		slug: func(v any) string { return baseName(v.(string)) }},
	pLayers: {path: "layers", kind: kindInt, def: 0, identity: true, whenGiven: true,
		doc: "all, or an integer from 1 to the model's number of layers", parse: parseLayers,
		intp: func(p *Params) *int { return &p.Layers }, show: showLayers,
		slug: func(v any) string { return "layers-" + showLayers(v) }},
	pDtype: enumParam("dtype", "float16", []string{"float16", "bfloat16", "float32", "fp8"}, func(p *Params) *string { return &p.Dtype },
		map[string]string{"float16": "fp16", "bfloat16": "bf16", "float32": "fp32"}),
	// Added after cells had ids: in their identity only where given.
	pKVCacheDtype: whenGivenParam(enumParam("kv_cache_dtype", "auto", []string{"auto", "fp8", "compute"}, func(p *Params) *string { return &p.KVCacheDtype },
		map[string]string{"auto": "kv-auto", "fp8": "kv-fp8", "compute": "kv-compute"})),
	// Added after cells had ids: in their identity only where given.
	pMoEWeights: whenGivenParam(enumParam("moe_weights", "auto", []string{"auto", "bf16", "mxfp4"}, func(p *Params) *string { return &p.MoEWeights },
		map[string]string{"auto": "moe-auto", "bf16": "moe-bf16", "mxfp4": "moe-mxfp4"})),
	// Added after cells had ids: in their identity only where given.
	pFP8Activations: whenGivenParam(enumParam("fp8_activations", "auto", []string{"auto", "static", "dynamic"}, func(p *Params) *string { return &p.FP8Activations },
		map[string]string{"auto": "fp8act-auto", "static": "fp8act-static", "dynamic": "fp8act-dynamic"})),
	// TensorRT-LLM's default max_batch_size, as the engine's.
	pBatchSize:    intParam("batch_size", 2048, 1, 1<<20, "bs", func(p *Params) *int { return &p.BatchSize }),
	pMaxNumTokens: intParam("max_num_tokens", 8192, 1, 1<<30, "mnt", func(p *Params) *int { return &p.MaxNumTokens }),
	pGemmPlugin: enumParam("gemm_plugin", "auto", []string{"auto", "disable"}, func(p *Params) *string { return &p.GemmPlugin },
		map[string]string{"auto": "gemm-auto", "disable": "gemm-disable"}),
	pRoutingMode: {path: "routing_mode", kind: kindString, def: "learned", identity: true,
		doc:   `learned, perfect, uniform or zipf:S with S > 0`,
		parse: parseRoutingMode, strp: func(p *Params) *string { return &p.RoutingMode },
		slug: func(v any) string { return "route-" + strings.ReplaceAll(v.(string), ":", "") }},
	pProfileWindow: {path: "profile_window", kind: kindString, def: "none", identity: true,
		doc:   `none, "A-B" (iterations A..B, 0 <= A <= B), a single iteration K, or a comma list of those in increasing order`,
		parse: parseProfileWindowNode, strp: func(p *Params) *string { return &p.ProfileWindow },
		slug: func(v any) string {
			if v.(string) == "none" {
				return "noprof"
			}
			return "prof" + strings.ReplaceAll(v.(string), ",", "+")
		}},
	pSeed:        intParam("seed", 0, 0, math.MaxInt64, "seed", func(p *Params) *int { return &p.Seed }),
	pWarmup:      intParam("warmup", 2, 0, 1<<30, "warm", func(p *Params) *int { return &p.Warmup }),
	pGPUsPerCell: intParam("gpus_per_cell", 1, 1, 1024, "gpus", func(p *Params) *int { return &p.GPUsPerCell }),
	pKVFraction: {path: "kv_cache_free_gpu_mem_fraction", kind: kindFloat, def: 0.9, identity: true,
		doc: "a number in (0, 1]", parse: parseFraction, fltp: func(p *Params) *float64 { return &p.KVCacheFreeGPUMemFraction },
		slug: func(v any) string { return "kv" + formatValue(v) }},
	pTrtllmBackend: enumParam("trtllm_backend", "pytorch", []string{"pytorch", "tensorrt"}, func(p *Params) *string { return &p.TrtllmBackend },
		map[string]string{"pytorch": "trt-pytorch", "tensorrt": "trt-engine"}),
	pTP: intParam("tp", 1, 1, 1024, "tp", func(p *Params) *int { return &p.TP }),
	pPP: intParam("pp", 1, 1, 1024, "pp", func(p *Params) *int { return &p.PP }),
	pEP: intParam("ep", 1, 1, 1024, "ep", func(p *Params) *int { return &p.EP }),
	pExtraOptions: {path: "extra_llm_api_options", kind: kindString, def: "none", identity: true,
		doc:   "a path to a YAML file of LLM API options, or none",
		parse: parseOptionalPath, strp: func(p *Params) *string { return &p.ExtraLLMAPIOptions },
		slug: func(v any) string {
			return "opts-" + strings.TrimSuffix(strings.TrimSuffix(baseName(v.(string)), ".yaml"), ".yml")
		}},
	pTimeout: {path: "timeout", kind: kindDuration, def: time.Duration(0), noAxis: true,
		doc: `a duration such as "90s", "45m" or "2h", or none`, parse: parseTimeout,
		durp: func(p *Params) *time.Duration { return &p.Timeout }},
	// Added after cells had ids: in their identity only where given.
	pRequestRate: whenGivenParam(&param{path: "request_rate", kind: kindFloat, def: 0.0, identity: true,
		doc: "a number of requests per second > 0, or inf (all at once)", parse: parseRequestRate, show: showRate,
		fltp: func(p *Params) *float64 { return &p.RequestRate },
		slug: func(v any) string { return "rate-" + showRate(v) }}),
	pBurstiness: whenGivenParam(&param{path: "burstiness", kind: kindFloat, def: 1.0, identity: true,
		doc: "a gamma shape > 0 (1: Poisson arrivals)", parse: parseBurstiness,
		fltp: func(p *Params) *float64 { return &p.Burstiness },
		slug: func(v any) string { return "burst" + formatValue(v) }}),
	pConcurrency: whenGivenParam(&param{path: "concurrency", kind: kindInt, def: 0, identity: true,
		doc: "a number of users >= 1, or none (no closed loop)", parse: parseConcurrency, show: showUsers,
		intp: func(p *Params) *int { return &p.Concurrency },
		slug: func(v any) string { return "users-" + showUsers(v) }}),
	pGenerator: {path: "dataset.generator", kind: kindString, def: GenNorm, identity: true,
		doc:   GenNorm + ", " + GenUnif + " or a path to a .jsonl dataset",
		parse: parseGenerator, strp: func(p *Params) *string { return &p.Dataset.Generator },
		slug: func(v any) string {
			switch s := v.(string); s {
			case GenNorm:
				return "norm"
			case GenUnif:
				return "unif"
			default:
				return strings.TrimSuffix(baseName(s), ".jsonl")
			}
		}},
	pNumRequests: intParam("dataset.num_requests", 1000, 1, maxNumRequests, "n", func(p *Params) *int { return &p.Dataset.NumRequests }),
	pInputMean:   intParam("dataset.input_mean", 128, 1, 1<<24, "in", func(p *Params) *int { return &p.Dataset.InputMean }),
	pInputStdev:  intParam("dataset.input_stdev", 0, 0, 1<<24, "insd", func(p *Params) *int { return &p.Dataset.InputStdev }),
	pOutputMean:  intParam("dataset.output_mean", 128, 1, 1<<24, "out", func(p *Params) *int { return &p.Dataset.OutputMean }),
	pOutputStdev: intParam("dataset.output_stdev", 0, 0, 1<<24, "outsd", func(p *Params) *int { return &p.Dataset.OutputStdev }),
	pInputMin:    intParam("dataset.input_min", 128, 1, 1<<24, "inmin", func(p *Params) *int { return &p.Dataset.InputMin }),
	pInputMax:    intParam("dataset.input_max", 128, 1, 1<<24, "inmax", func(p *Params) *int { return &p.Dataset.InputMax }),
	pOutputMin:   intParam("dataset.output_min", 128, 1, 1<<24, "outmin", func(p *Params) *int { return &p.Dataset.OutputMin }),
	pOutputMax:   intParam("dataset.output_max", 128, 1, 1<<24, "outmax", func(p *Params) *int { return &p.Dataset.OutputMax }),
	// numpy's legacy seeding takes 32-bit seeds.
	pDatasetSeed: intParam("dataset.seed", 420, 0, math.MaxUint32, "dseed", func(p *Params) *int { return &p.Dataset.Seed }),
	pVocabSize:   derivedParam(intParam("dataset.vocab_size", 0, 1, 1<<31-1, "vocab", func(p *Params) *int { return &p.Dataset.VocabSize })),
	pEOSID:       derivedParam(intParam("dataset.eos_id", 0, 0, 1<<31-1, "eos", func(p *Params) *int { return &p.Dataset.EOSID })),
	// Added after cells had ids: in their identity only where given.
	pLoadDuration: whenGivenParam(&param{path: "load_duration", kind: kindDuration, def: time.Duration(0), identity: true, noAxis: true,
		doc: `a duration such as "5s" or "2m", or none`, parse: parseTimeout, show: func(v any) string { return showDuration(v.(time.Duration)) },
		durp: func(p *Params) *time.Duration { return &p.LoadDuration }}),
	pRandTaskID: {path: "dataset.rand_task_id", kind: kindTaskRange, def: TaskIDRange{}, identity: true,
		doc: "[MIN, MAX] with 0 <= MIN <= MAX, or none", parse: parseTaskRange,
		rngp: func(p *Params) *TaskIDRange { return &p.Dataset.RandTaskID },
		slug: func(v any) string { return "task" + formatValue(v) }},
}

// baseName is the last element of a path as written in a spec.
func baseName(s string) string {
	if i := strings.LastIndexAny(s, `/\`); i >= 0 && i < len(s)-1 {
		return s[i+1:]
	}
	return s
}

// paramIndex maps a dotted path to its index in params.
var paramIndex = func() map[string]int {
	m := make(map[string]int, numParams)
	for i, p := range params {
		m[p.path] = i
	}
	return m
}()

// paramPaths lists every parameter path, for suggestions.
func paramPaths(axisOnly bool) []string {
	var out []string
	for _, p := range params {
		if axisOnly && p.noAxis {
			continue
		}
		out = append(out, p.path)
	}
	return out
}

func whenGivenParam(p *param) *param {
	p.whenGiven = true
	return p
}

func derivedParam(p *param) *param {
	p.def = nil
	return p
}

func intParam(path string, def, lo, hi int, slug string, f func(*Params) *int) *param {
	doc := fmt.Sprintf("an integer >= %d", lo)
	return &param{path: path, kind: kindInt, def: def, identity: true, doc: doc, intp: f,
		slug: func(v any) string { return slug + strconv.Itoa(v.(int)) },
		parse: func(n *yaml.Node) (any, string) {
			v, ok := scalarInt(n)
			switch {
			case !ok:
				return nil, "expected " + doc + ", got " + describe(n)
			case v < int64(lo):
				return nil, fmt.Sprintf("expected %s, got %d", doc, v)
			case v > int64(hi):
				return nil, fmt.Sprintf("expected an integer <= %d, got %d", hi, v)
			}
			return int(v), ""
		}}
}

func enumParam(path, def string, values []string, f func(*Params) *string, slugs map[string]string) *param {
	doc := strings.Join(values, " or ")
	if len(values) > 2 {
		doc = strings.Join(values[:len(values)-1], ", ") + " or " + values[len(values)-1]
	}
	return &param{path: path, kind: kindString, def: def, identity: true, doc: doc, strp: f,
		slug: func(v any) string {
			if s, ok := slugs[v.(string)]; ok {
				return s
			}
			return v.(string)
		},
		parse: func(n *yaml.Node) (any, string) {
			s, ok := scalarString(n)
			if !ok {
				return nil, "expected " + doc + ", got " + describe(n)
			}
			for _, v := range values {
				if s == v {
					return s, ""
				}
			}
			return nil, fmt.Sprintf("%q is not one of %s%s", s, doc, suggest(s, values, aliases))
		}}
}

// aliases are spellings people bring from other tools; suggestions map
// them to xrun's names.
var aliases = map[string]string{
	"fp16": "float16", "half": "float16", "bf16": "bfloat16", "fp32": "float32", "float": "float32",
	"enable": "auto", "enabled": "auto", "on": "auto", "off": "disable", "disabled": "disable",
	"gpu": "cuda", "norm": GenNorm, "unif": GenUnif, "uniform": GenUnif,
	"tensorrt-llm": "trtllm", "tensorrt_llm": "trtllm", "trt-llm": "trtllm", "torch": "pytorch", "trt": "tensorrt",
}

func parseModelName(n *yaml.Node) (any, string) {
	s, ok := scalarString(n)
	if !ok || s == "" {
		return nil, "expected a zoo model name or a directory with config.json, got " + describe(n)
	}
	return cleanPath(s), ""
}

// parseLayers reads layers: all (or 0), or a count >= 1; whether the model
// has that many is checked per cell (expand), where the model is known.
func parseLayers(n *yaml.Node) (any, string) {
	const doc = "all, or an integer from 1 to the model's number of layers"
	if s, ok := scalarString(n); ok && s == "all" {
		return 0, ""
	}
	v, ok := scalarInt(n)
	switch {
	case !ok:
		return nil, "expected " + doc + ", got " + describe(n)
	case v < 0:
		return nil, fmt.Sprintf("expected %s, got %d", doc, v)
	case v > 1<<20:
		return nil, fmt.Sprintf("expected %s, got %d (no model has that many)", doc, v)
	}
	return int(v), ""
}

func showLayers(v any) string {
	if v.(int) == 0 {
		return "all"
	}
	return strconv.Itoa(v.(int))
}

// showValue renders parameter pi's value v for people.
func showValue(pi int, v any) string {
	if f := params[pi].show; f != nil {
		return f(v)
	}
	return formatValue(v)
}

func parseRoutingMode(n *yaml.Node) (any, string) {
	const doc = "learned, perfect, uniform or zipf:S with S > 0"
	s, ok := scalarString(n)
	if !ok {
		return nil, "expected " + doc + ", got " + describe(n)
	}
	switch s {
	case "learned", "perfect", "uniform":
		return s, ""
	}
	if rest, ok := strings.CutPrefix(s, "zipf:"); ok {
		v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Sprintf("%q: the zipf skew S must be a number > 0, e.g. zipf:1.2", s)
		}
		if v <= 0 {
			return nil, fmt.Sprintf("%q: the zipf skew S must be > 0", s)
		}
		return "zipf:" + strconv.FormatFloat(v, 'g', -1, 64), ""
	}
	if s == "zipf" {
		return nil, `"zipf" needs its skew: zipf:S with S > 0, e.g. zipf:1.2`
	}
	return nil, fmt.Sprintf("%q is not one of %s%s", s, doc, suggest(s, []string{"learned", "perfect", "uniform", "zipf:1"}, nil))
}

func parseProfileWindowNode(n *yaml.Node) (any, string) {
	const doc = `none, "A-B", a single iteration K, or a comma list of those`
	var s string
	if v, ok := scalarInt(n); ok {
		s = strconv.FormatInt(v, 10)
	} else if str, ok := scalarString(n); ok {
		s = str
	} else {
		return nil, "expected " + doc + ", got " + describe(n)
	}
	spans, msg := parseProfileWindow(s)
	if msg != "" {
		return nil, msg
	}
	return formatSpans(spans), ""
}

// parseProfileWindow validates a profile window with the engine's own
// parser (one definition of TLLM_PROFILE_START_STOP's syntax), adding the
// spec's rule that an empty string is a mistake rather than "no window".
func parseProfileWindow(s string) ([]Span, string) {
	if s != "none" && strings.TrimSpace(s) == "" {
		return nil, `empty profile window; expected none, "A-B" or a comma list of spans`
	}
	spans, err := engine.ParseProfileWindow(s)
	if err != nil {
		var pe *engine.ParamError
		if errors.As(err, &pe) {
			return nil, pe.Msg
		}
		return nil, err.Error()
	}
	return spans, ""
}

func formatSpans(spans []Span) string {
	if len(spans) == 0 {
		return "none"
	}
	parts := make([]string, len(spans))
	for i, sp := range spans {
		if sp.First == sp.Last {
			parts[i] = strconv.Itoa(sp.First)
		} else {
			parts[i] = strconv.Itoa(sp.First) + "-" + strconv.Itoa(sp.Last)
		}
	}
	return strings.Join(parts, ",")
}

func parseFraction(n *yaml.Node) (any, string) {
	v, ok := scalarFloat(n)
	if !ok {
		return nil, "expected a number in (0, 1], got " + describe(n)
	}
	if !(v > 0 && v <= 1) {
		return nil, fmt.Sprintf("expected a number in (0, 1], got %s", formatValue(v))
	}
	return v, ""
}

func parseTimeout(n *yaml.Node) (any, string) {
	const doc = `a duration such as "90s", "45m" or "2h", or none`
	s, ok := scalarString(n)
	if !ok {
		if _, isInt := scalarInt(n); isInt {
			return nil, "expected " + doc + ", got " + describe(n) + " (give a unit: \"" + n.Value + "s\")"
		}
		return nil, "expected " + doc + ", got " + describe(n)
	}
	if s == "none" {
		return time.Duration(0), ""
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return nil, fmt.Sprintf("%q is not a duration; expected %s", s, doc)
	}
	if d <= 0 {
		return nil, fmt.Sprintf("%q: expected a positive duration, or none", s)
	}
	return d, ""
}

func parseOptionalPath(n *yaml.Node) (any, string) {
	s, ok := scalarString(n)
	if !ok || strings.TrimSpace(s) == "" {
		return nil, "expected a path to a YAML file, or none, got " + describe(n)
	}
	if s == "none" {
		return s, ""
	}
	return cleanPath(s), ""
}

func parseGenerator(n *yaml.Node) (any, string) {
	const doc = GenNorm + ", " + GenUnif + " or a path to a .jsonl dataset"
	s, ok := scalarString(n)
	if !ok || s == "" {
		return nil, "expected " + doc + ", got " + describe(n)
	}
	if s == GenNorm || s == GenUnif {
		return s, ""
	}
	if strings.HasSuffix(s, ".jsonl") || strings.ContainsAny(s, `/\`) {
		return cleanPath(s), ""
	}
	return nil, fmt.Sprintf("%q is not a generator; expected %s%s", s, doc, suggest(s, []string{GenNorm, GenUnif}, aliases))
}

func parseTaskRange(n *yaml.Node) (any, string) {
	const doc = "[MIN, MAX] with 0 <= MIN <= MAX, or none"
	if s, ok := scalarString(n); ok && s == "none" {
		return TaskIDRange{}, ""
	}
	if n.Kind != yaml.SequenceNode || len(n.Content) != 2 {
		return nil, "expected " + doc + ", got " + describe(n)
	}
	lo, ok1 := scalarInt(resolve(n.Content[0]))
	hi, ok2 := scalarInt(resolve(n.Content[1]))
	if !ok1 || !ok2 {
		return nil, "expected " + doc + ", got a list that is not two integers"
	}
	if lo < 0 || hi < lo || hi > 1<<31-1 {
		return nil, fmt.Sprintf("expected %s, got [%d, %d]", doc, lo, hi)
	}
	return TaskIDRange{Set: true, Min: int(lo), Max: int(hi)}, ""
}
