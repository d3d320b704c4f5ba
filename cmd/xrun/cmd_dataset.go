package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/xrun-dev/xrun/datasets"
	"github.com/xrun-dev/xrun/engine"
)

// datasetOptions are the flags of "xrun dataset token-norm-dist" and
// "token-unif-dist", named as prepare_dataset.py's options.
type datasetOptions struct {
	dist        string
	numRequests optionalInt

	inputMean, inputStdev, outputMean, outputStdev optionalInt
	inputMin, inputMax, outputMin, outputMax       optionalInt
	// required are the flags the chosen distribution cannot do without,
	// checked here rather than by cobra so that leaving one out is a usage
	// error (exit 2) like every other bad flag.
	required []requiredFlag

	seed       int64
	vocabSize  optionalInt
	eosID      optionalInt
	model      string
	taskID     int
	randTaskID string
	loraDir    string
	output     string
}

type requiredFlag struct {
	name string
	v    *optionalInt
}

// optionalInt is an int flag that remembers whether it was given, so that
// an explicit value (even a bad one) is never replaced by the model's.
type optionalInt struct {
	v   int
	set bool
}

func (o *optionalInt) String() string {
	if !o.set {
		return ""
	}
	return strconv.Itoa(o.v)
}

func (o *optionalInt) Set(s string) error {
	v, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("want an integer, got %q", s)
	}
	o.v, o.set = v, true
	return nil
}

func (o *optionalInt) Type() string { return "int" }

const datasetLong = `Generate a synthetic dataset in trtllm-bench's line format (one JSON object
per request: task_id, input_ids, output_tokens), byte for byte what
TensorRT-LLM's benchmarks/cpp/prepare_dataset.py --stdout prints for the
same parameters, without its tokenizer download and in a fraction of its
time and memory.

The tokenizer only ever supplied the vocabulary size and the EOS id: give
--model (a zoo model or a Hugging Face directory) to take them from the
model, or --vocab-size and --eos-id. An EOS id at or beyond the vocabulary
size (Llama-3's tokenizer: --vocab-size 128000 --eos-id 128001) is taken as
TensorRT-LLM takes it: ids are drawn below the vocabulary size, so it never
occurs. Output goes to stdout, or atomically to --output FILE (nothing is
written when anything fails).`

func newDatasetCommand(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dataset",
		Short: "Generate token-norm-dist / token-unif-dist datasets identical to TensorRT-LLM's",
		Long:  datasetLong,
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newDatasetNormCommand(a), newDatasetUnifCommand(a))
	return cmd
}

func newDatasetNormCommand(a *app) *cobra.Command {
	opts := &datasetOptions{dist: datasets.NormDist}
	return newDatasetGenCommand(a, opts,
		"token-norm-dist --num-requests N --input-mean A --input-stdev B --output-mean C --output-stdev D",
		"Requests with normally distributed input and output lengths", `

Lengths are max(1, ceil(mean + stdev*z)) with numpy's legacy normal
generator; input and output lengths share the same z (TensorRT-LLM re-seeds
before each), so they are perfectly correlated.

Example:
  xrun dataset token-norm-dist --model tinyllama-1.1b --num-requests 3000 \
    --input-mean 128 --input-stdev 0 --output-mean 128 --output-stdev 0 --output data.jsonl
`,
		requiredFlag{"num-requests", &opts.numRequests}, requiredFlag{"input-mean", &opts.inputMean},
		requiredFlag{"input-stdev", &opts.inputStdev}, requiredFlag{"output-mean", &opts.outputMean},
		requiredFlag{"output-stdev", &opts.outputStdev})
}

func newDatasetUnifCommand(a *app) *cobra.Command {
	opts := &datasetOptions{dist: datasets.UnifDist}
	return newDatasetGenCommand(a, opts,
		"token-unif-dist --num-requests N --input-min A --input-max B --output-min C --output-max D",
		"Requests with uniformly distributed input and output lengths", `

Lengths are drawn uniformly from the inclusive ranges with numpy's
default_rng(seed).integers, re-seeded for the output lengths.
`,
		requiredFlag{"num-requests", &opts.numRequests}, requiredFlag{"input-min", &opts.inputMin},
		requiredFlag{"input-max", &opts.inputMax}, requiredFlag{"output-min", &opts.outputMin},
		requiredFlag{"output-max", &opts.outputMax})
}

// newDatasetGenCommand builds one generator subcommand; the distributions
// differ only in their length flags and help.
func newDatasetGenCommand(a *app, opts *datasetOptions, use, short, long string, required ...requiredFlag) *cobra.Command {
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long:  datasetLong + long + exitStatusHelp,
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, args []string) error { return runDataset(cmd.Context(), a, opts, args) },
	}
	for _, rf := range required {
		cmd.Flags().Var(rf.v, rf.name, datasetFlagUsage[rf.name])
	}
	opts.required = required
	addDatasetCommonFlags(cmd, opts)
	return cmd
}

var datasetFlagUsage = map[string]string{
	"num-requests": "number of requests (required)",
	"input-mean":   "mean input length in tokens (required)",
	"input-stdev":  "standard deviation of the input length (required)",
	"output-mean":  "mean output length in tokens (required)",
	"output-stdev": "standard deviation of the output length (required)",
	"input-min":    "smallest input length, inclusive (required)",
	"input-max":    "largest input length, inclusive (required)",
	"output-min":   "smallest output length, inclusive (required)",
	"output-max":   "largest output length, inclusive (required)",
}

func addDatasetCommonFlags(cmd *cobra.Command, opts *datasetOptions) {
	f := cmd.Flags()
	f.Int64Var(&opts.seed, "random-seed", datasets.DefaultSeed, "seed of the lengths and token ids")
	f.Var(&opts.vocabSize, "vocab-size", "tokenizer base vocabulary size: ids are drawn from [0, N) (default: --model's)")
	f.Var(&opts.eosID, "eos-id", "EOS token id, scrubbed from the prompts; one at or beyond --vocab-size (Llama-3's 128001) never occurs (default: --model's)")
	f.StringVar(&opts.model, "model", "", "zoo model or Hugging Face directory supplying --vocab-size and --eos-id")
	f.IntVar(&opts.taskID, "task-id", -1, "LoRA task id of every request (-1: none); needs --lora-dir")
	f.StringVar(&opts.randTaskID, "rand-task-id", "", "MIN,MAX: draw each request's LoRA task id uniformly from [MIN, MAX]; needs --lora-dir")
	f.StringVar(&opts.loraDir, "lora-dir", "", "LoRA adapter directory: adds lora_request (lora_path = DIR/<task id>)")
	f.StringVarP(&opts.output, "output", "o", "", "write to FILE (atomically) instead of stdout")
}

// flagError is a bad flag value, reported with the flag's name.
func flagError(flag, format string, args ...any) error {
	return usageError{fmt.Errorf("--%s: %s", flag, fmt.Sprintf(format, args...))}
}

func runDataset(ctx context.Context, a *app, opts *datasetOptions, _ []string) error {
	p, err := datasetParams(a, opts)
	if err != nil {
		return err
	}
	if opts.output == "" {
		return datasets.WriteContext(ctx, ctxWriter{ctx, a.gs.Stdout}, p)
	}
	if st, err := os.Stat(filepath.Dir(opts.output)); err != nil || !st.IsDir() {
		return flagError("output", "directory %s does not exist", filepath.Dir(opts.output))
	}
	err = datasets.WriteFileAtomic(opts.output, func(w io.Writer) error {
		return datasets.WriteContext(ctx, ctxWriter{ctx, w}, p)
	})
	if err != nil {
		return fmt.Errorf("writing %s: %w", opts.output, err)
	}
	a.log.Info().Str("file", opts.output).Int("requests", p.NumRequests).Str("dist", p.Dist).Msg("dataset written")
	return nil
}

// datasetParams turns the flags into generator parameters, resolving the
// vocabulary and EOS from --model where not given.
func datasetParams(a *app, opts *datasetOptions) (datasets.Params, error) {
	p := datasets.Params{
		Dist: opts.dist, NumRequests: opts.numRequests.v,
		InputMean: opts.inputMean.v, InputStdev: opts.inputStdev.v, OutputMean: opts.outputMean.v, OutputStdev: opts.outputStdev.v,
		InputMin: opts.inputMin.v, InputMax: opts.inputMax.v, OutputMin: opts.outputMin.v, OutputMax: opts.outputMax.v,
		Seed: opts.seed, VocabSize: opts.vocabSize.v, EOSID: opts.eosID.v,
	}
	for _, rf := range opts.required {
		if !rf.v.set {
			return p, flagError(rf.name, "required")
		}
	}
	if opts.model != "" {
		mc, err := engine.LookupModel(opts.model)
		if err != nil {
			return p, flagError("model", "%v", err)
		}
		if !opts.vocabSize.set {
			p.VocabSize = mc.DatasetVocab
		}
		if !opts.eosID.set {
			p.EOSID = mc.EOS
		}
		// The model's special tokens (Llama-3's EOS among them) lie beyond
		// the base vocabulary the ids are drawn from.
		p.FullVocabSize = mc.Vocab
	} else {
		if !opts.vocabSize.set {
			return p, flagError("vocab-size", "required unless --model gives it")
		}
		if !opts.eosID.set {
			return p, flagError("eos-id", "required unless --model gives it")
		}
	}
	var rand *[2]int
	if opts.randTaskID != "" {
		lo, hi, ok := strings.Cut(opts.randTaskID, ",")
		l, err1 := strconv.Atoi(strings.TrimSpace(lo))
		h, err2 := strconv.Atoi(strings.TrimSpace(hi))
		if !ok || err1 != nil || err2 != nil {
			return p, flagError("rand-task-id", "want MIN,MAX (two integers), got %q", opts.randTaskID)
		}
		if l > h {
			return p, flagError("rand-task-id", "MIN %d is greater than MAX %d", l, h)
		}
		rand = &[2]int{l, h}
	}
	if opts.loraDir != "" {
		p.LoRA = &datasets.LoRAParams{Dir: opts.loraDir, TaskID: opts.taskID, Rand: rand}
	} else if rand != nil || opts.taskID != -1 {
		// prepare_dataset.py warns and writes no lora_request either.
		a.log.Warn().Msg("--task-id/--rand-task-id need --lora-dir; no lora_request is written")
	}
	if err := p.Validate(); err != nil {
		var pe *datasets.ParamError
		if errors.As(err, &pe) {
			return p, flagError(strings.ReplaceAll(pe.Field, "_", "-"), "%s", pe.Msg)
		}
		return p, err
	}
	return p, nil
}

// ctxWriter stops a long generation when the command is interrupted; the
// dataset writer calls it once per buffer (256 KiB), not per request.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(b []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(b)
}
