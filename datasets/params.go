package datasets

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Dataset kinds, named as prepare_dataset.py's subcommands.
const (
	NormDist = "token-norm-dist"
	UnifDist = "token-unif-dist"
)

// DefaultSeed is prepare_dataset.py's --random-seed default.
const DefaultSeed = 420

// MaxTokens bounds every request length (input or output) a generator may
// produce. It is far beyond any model's context and keeps lengths, per
// request buffers and int conversions safe.
const MaxTokens = 1 << 24

// maxAbsNormal bounds |z| for numpy's polar method: the smallest non-zero
// r2 it can draw is 2^-104, so |z| <= sqrt(-2 ln 2^-104) < 12.1.
const maxAbsNormal = 13

// generatorVersion is part of every cache key, so a fix to the generators
// invalidates datasets cached by an older xrun.
const generatorVersion = 1

// Params are the parameters of a synthetic dataset, named after
// prepare_dataset.py's options. Only the fields of the chosen Dist count:
// Input/OutputMean and Stdev for NormDist, Input/OutputMin and Max
// (inclusive) for UnifDist.
type Params struct {
	Dist        string
	NumRequests int

	InputMean, InputStdev   int
	OutputMean, OutputStdev int

	InputMin, InputMax   int
	OutputMin, OutputMax int

	// Seed seeds numpy (lengths) and Python's random (token ids); set it to
	// DefaultSeed for prepare_dataset.py's default.
	Seed int64
	// VocabSize is the tokenizer's base vocabulary (token ids are drawn from
	// [0, VocabSize)); EOSID is scrubbed from every request. An EOSID at or
	// beyond VocabSize (Llama-3's 128001 with 128000 base ids) is valid, as
	// in prepare_dataset.py: it is never drawn, so the scrub never fires.
	VocabSize int
	EOSID     int
	// FullVocabSize, when known (a model's tokenizer with its added special
	// tokens: 128256 for Llama-3), bounds EOSID: an id the tokenizer does
	// not have is a mistake. 0 means unknown, and EOSID is bounded only by
	// int32. It does not change the dataset.
	FullVocabSize int

	// LoRA, when set, adds a lora_request to requests as prepare_dataset.py
	// does when given --lora-dir.
	LoRA *LoRAParams
}

// LoRAParams are prepare_dataset.py's --lora-dir, --task-id and
// --rand-task-id.
type LoRAParams struct {
	// Dir is the directory whose <task id> subdirectories hold adapters;
	// lora_path is Dir joined with the task id.
	Dir string
	// TaskID is the task of every request when Rand is nil; -1 means none.
	TaskID int
	// Rand, when set, draws each request's task id uniformly from
	// [Rand[0], Rand[1]] with random.randint, after all token ids.
	Rand *[2]int
}

// ParamError reports one bad generator parameter. Field is the parameter's
// snake_case name (num_requests, input_stdev, ...), which the CLI turns into
// its flag name.
type ParamError struct {
	Field string
	Msg   string
}

func (e *ParamError) Error() string  { return e.Field + ": " + e.Msg }
func (e *ParamError) BadInput() bool { return true }

func paramErr(field, format string, args ...any) error {
	return &ParamError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Validate checks the parameters TensorRT-LLM would reject or hang on, and
// the bounds xrun adds.
func (p *Params) Validate() error {
	if p.NumRequests < 1 {
		return paramErr("num_requests", "must be at least 1, got %d", p.NumRequests)
	}
	switch p.Dist {
	case NormDist:
		if err := checkNorm("input", p.InputMean, p.InputStdev); err != nil {
			return err
		}
		if err := checkNorm("output", p.OutputMean, p.OutputStdev); err != nil {
			return err
		}
		if p.Seed < 0 || p.Seed > math.MaxUint32 {
			// numpy's legacy np.random.seed accepts only 0..2^32-1.
			return paramErr("random_seed", "must be in [0, %d] for %s (numpy's legacy seeding), got %d", uint32(math.MaxUint32), NormDist, p.Seed)
		}
	case UnifDist:
		if err := checkUnif("input", p.InputMin, p.InputMax); err != nil {
			return err
		}
		if err := checkUnif("output", p.OutputMin, p.OutputMax); err != nil {
			return err
		}
		if p.Seed < 0 {
			return paramErr("random_seed", "must not be negative (numpy's SeedSequence rejects it), got %d", p.Seed)
		}
	default:
		return paramErr("dist", "must be %s or %s, got %q", NormDist, UnifDist, p.Dist)
	}
	if p.VocabSize < 1 || p.VocabSize > math.MaxInt32 {
		return paramErr("vocab_size", "must be in [1, %d], got %d", math.MaxInt32, p.VocabSize)
	}
	if p.FullVocabSize > 0 {
		limit := max(p.VocabSize, p.FullVocabSize)
		if p.EOSID < 0 || p.EOSID >= limit {
			return paramErr("eos_id", "must be a token id in [0, %d), got %d", limit, p.EOSID)
		}
	} else if p.EOSID < 0 || p.EOSID > math.MaxInt32 {
		return paramErr("eos_id", "must be a token id in [0, %d], got %d", math.MaxInt32, p.EOSID)
	}
	if p.VocabSize == 1 && p.EOSID == 0 {
		// TensorRT-LLM would loop forever replacing the only token (EOS).
		return paramErr("vocab_size", "1 leaves no token id besides eos_id %d", p.EOSID)
	}
	if l := p.LoRA; l != nil {
		if l.Rand != nil && l.Rand[0] > l.Rand[1] {
			return paramErr("rand_task_id", "min %d is greater than max %d", l.Rand[0], l.Rand[1])
		}
	}
	return nil
}

func checkNorm(side string, mean, stdev int) error {
	if stdev < 0 {
		return paramErr(side+"_stdev", "must not be negative, got %d", stdev)
	}
	if mean > MaxTokens || stdev > MaxTokens || mean+maxAbsNormal*stdev > MaxTokens {
		return paramErr(side+"_stdev", "%s_mean + %d*%s_stdev must not exceed %d tokens, got mean %d stdev %d",
			side, maxAbsNormal, side, MaxTokens, mean, stdev)
	}
	if mean < -MaxTokens {
		return paramErr(side+"_mean", "must be at least %d, got %d", -MaxTokens, mean)
	}
	return nil
}

func checkUnif(side string, lo, hi int) error {
	if lo < 1 {
		return paramErr(side+"_min", "must be at least 1 token, got %d", lo)
	}
	if lo > hi {
		return paramErr(side+"_min", "%d is greater than %s_max %d", lo, side, hi)
	}
	if hi > MaxTokens {
		return paramErr(side+"_max", "must not exceed %d tokens, got %d", MaxTokens, hi)
	}
	return nil
}

// Canonical is a stable text encoding of exactly the parameters that
// determine the dataset's bytes (and the generator version); equal
// encodings mean byte-identical datasets.
func (p *Params) Canonical() string {
	var b strings.Builder
	kv := func(k string, v int64) {
		b.WriteByte(' ')
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(strconv.FormatInt(v, 10))
	}
	fmt.Fprintf(&b, "xrun-dataset/v%d %s", generatorVersion, p.Dist)
	kv("num_requests", int64(p.NumRequests))
	if p.Dist == NormDist {
		kv("input_mean", int64(p.InputMean))
		kv("input_stdev", int64(p.InputStdev))
		kv("output_mean", int64(p.OutputMean))
		kv("output_stdev", int64(p.OutputStdev))
	} else {
		kv("input_min", int64(p.InputMin))
		kv("input_max", int64(p.InputMax))
		kv("output_min", int64(p.OutputMin))
		kv("output_max", int64(p.OutputMax))
	}
	kv("random_seed", p.Seed)
	kv("vocab_size", int64(p.VocabSize))
	kv("eos_id", int64(p.EOSID))
	if l := p.LoRA; l != nil {
		if l.Rand != nil {
			kv("rand_task_id_min", int64(l.Rand[0]))
			kv("rand_task_id_max", int64(l.Rand[1]))
		} else {
			kv("task_id", int64(l.TaskID))
		}
		b.WriteString(" lora_dir=")
		b.WriteString(strconv.Quote(l.Dir))
	}
	return b.String()
}

// Key is the content address of the dataset: a hash of Canonical.
func (p *Params) Key() string {
	sum := sha256.Sum256([]byte(p.Canonical()))
	return hex.EncodeToString(sum[:8])
}

// Slug is a short readable name for the parameters, used in cache file
// names (e.g. norm-n3000-in128sd0-out128sd0-seed420-vocab32000-eos2).
func (p *Params) Slug() string {
	var s string
	if p.Dist == NormDist {
		s = fmt.Sprintf("norm-n%d-in%dsd%d-out%dsd%d", p.NumRequests, p.InputMean, p.InputStdev, p.OutputMean, p.OutputStdev)
	} else {
		s = fmt.Sprintf("unif-n%d-in%d-%d-out%d-%d", p.NumRequests, p.InputMin, p.InputMax, p.OutputMin, p.OutputMax)
	}
	s += fmt.Sprintf("-seed%d-vocab%d-eos%d", p.Seed, p.VocabSize, p.EOSID)
	if p.LoRA != nil {
		s += "-lora"
	}
	return s
}
