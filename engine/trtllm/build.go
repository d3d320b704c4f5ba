package trtllm

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/xrun-dev/xrun/engine/driver"
)

// convertScript is xrun's checkpoint conversion (convert.py).
//
//go:embed convert.py
var convertScript string

// engineCacheDir is where built engines are kept, under xrun's cache.
const engineCacheDir = "trtllm-engines"

// buildInfo is a built engine's build.json: what it was built from and
// with, and the commands that built it.
type buildInfo struct {
	Key      string            `json:"key"`
	Params   map[string]string `json:"params"`
	Commands []driver.Command  `json:"commands"`
}

// buildPlan is how an engine for the cell is built, and where it lives.
type buildPlan struct {
	key       string
	params    map[string]string
	dir       string // the cache entry
	engineDir string
	ckptDir   string
	script    string
	convert   driver.Command
	build     driver.Command
}

// buildParams are every input of the build; the cache key is their hash.
func (e *Engine) buildParams() map[string]string {
	p := e.cell.Params
	m := map[string]string{
		"tensorrt_llm":   e.version.String(),
		"model":          e.modelRef(),
		"dtype":          p.String("dtype"),
		"gemm_plugin":    p.String("gemm_plugin"),
		"max_batch_size": p.String("batch_size"),
		"max_num_tokens": p.String("max_num_tokens"),
		"max_input_len":  strconv.Itoa(e.cell.MaxInputLen),
		"max_seq_len":    strconv.Itoa(e.cell.MaxSeqLen),
		"tp":             strconv.Itoa(max(1, p.Int("tp"))),
		"pp":             strconv.Itoa(max(1, p.Int("pp"))),
		"ep":             strconv.Itoa(max(1, p.Int("ep"))),
		"trtllm_build":   e.opt.Build,
	}
	if len(e.opt.Convert) > 0 {
		var raw []string
		for _, t := range e.opt.Convert {
			raw = append(raw, t.Raw)
		}
		m["convert"] = strings.Join(raw, " ")
	} else {
		sum := sha256.Sum256([]byte(convertScript))
		m["convert"] = "xrun convert.py " + hex.EncodeToString(sum[:6])
	}
	if e.cell.ModelConfigHash != "" {
		m["model_config"] = e.cell.ModelConfigHash
	}
	return m
}

func buildKey(params map[string]string) string {
	h := sha256.New()
	for _, k := range driver.SortedKeys(params) {
		fmt.Fprintf(h, "%s=%s\n", k, params[k])
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// buildPlan lays out the build of the cell's engine in entry dir.
func (e *Engine) buildPlan(dir string) *buildPlan {
	b := &buildPlan{params: e.buildParams(), dir: dir}
	b.key = buildKey(b.params)
	b.ckptDir = filepath.Join(dir, "checkpoint")
	b.engineDir = filepath.Join(dir, "engine")
	b.script = filepath.Join(dir, "convert.py")
	p := e.cell.Params
	tp, pp, ep := max(1, p.Int("tp")), max(1, p.Int("pp")), max(1, p.Int("ep"))
	if len(e.opt.Convert) > 0 {
		vars := map[string]string{"model": e.modelRef(), "checkpoint_dir": b.ckptDir, "dtype": p.String("dtype"),
			"tp": strconv.Itoa(tp), "pp": strconv.Itoa(pp), "ep": strconv.Itoa(ep)}
		var argv []string
		for _, t := range e.opt.Convert {
			argv = append(argv, t.Expand(vars))
		}
		b.convert = driver.Command{Stage: driver.StageConvert, Argv: argv, Env: e.opt.Env}
	} else {
		b.convert = driver.Command{Stage: driver.StageConvert, Env: e.opt.Env, Argv: []string{e.opt.Python, b.script,
			"--model", e.modelRef(), "--output_dir", b.ckptDir, "--dtype", p.String("dtype"),
			"--tp_size", strconv.Itoa(tp), "--pp_size", strconv.Itoa(pp), "--moe_ep_size", strconv.Itoa(ep)}}
	}
	maxIn, maxSeq := "<longest prompt>", "<longest prompt + output>"
	if e.cell.MaxSeqLen > 0 {
		maxIn, maxSeq = strconv.Itoa(e.cell.MaxInputLen), strconv.Itoa(e.cell.MaxSeqLen)
	}
	b.build = driver.Command{Stage: driver.StageBuild, Env: e.opt.Env, Argv: []string{e.opt.Build,
		"--checkpoint_dir", b.ckptDir, "--output_dir", b.engineDir,
		"--gemm_plugin", p.String("gemm_plugin"),
		"--max_batch_size", p.String("batch_size"), "--max_num_tokens", p.String("max_num_tokens"),
		"--max_input_len", maxIn, "--max_seq_len", maxSeq,
		"--workers", strconv.Itoa(tp * pp)}}
	return b
}

// ensureEngine returns the cell's built engine: from the cache when an
// engine with the same build parameters was built before, else built now
// (conversion, then trtllm-build) into a temporary entry renamed into
// place, under a lock so that workers on other GPUs wait for it instead
// of building it twice.
func (e *Engine) ensureEngine(ctx context.Context) error {
	root := filepath.Join(e.cell.CacheDir, engineCacheDir)
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	final := filepath.Join(root, buildKey(e.buildParams()))
	unlock, err := driver.Lock(ctx, final+".lock")
	if err != nil {
		return fmt.Errorf("waiting for the engine build lock: %w", err)
	}
	defer unlock()
	done := e.buildPlan(final)
	e.build = done.params
	e.build["key"] = done.key
	if info, err := readBuildInfo(final); err == nil && engineComplete(done.engineDir) {
		e.engineDir = done.engineDir
		for _, c := range info.Commands {
			e.Remember(c)
		}
		return nil
	}
	tmp := final + ".building"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	b := e.buildPlan(tmp)
	logPath := filepath.Join(e.cell.Dir, "tool", "build.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	if len(e.opt.Convert) == 0 {
		if err := os.WriteFile(b.script, []byte(convertScript), 0o644); err != nil {
			return err
		}
	}
	for _, c := range []driver.Command{b.convert, b.build} {
		e.Remember(c)
		if err := driver.Exec(ctx, c, driver.ExecOptions{Env: e.cell.Env, Log: logf, LogPath: logPath, Audit: e.Audit, Pass: -1}); err != nil {
			return fmt.Errorf("building the TensorRT engine: %w", err)
		}
	}
	if !engineComplete(b.engineDir) {
		return fmt.Errorf("building the TensorRT engine: %s wrote no config.json and rank0.engine into %s (see %s)", e.opt.Build, b.engineDir, logPath)
	}
	info := buildInfo{Key: b.key, Params: b.params, Commands: []driver.Command{b.convert, b.build}}
	data, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, "build.json"), append(data, '\n'), 0o644); err != nil {
		return err
	}
	// The checkpoint was only the build's input.
	os.RemoveAll(b.ckptDir)
	if err := os.RemoveAll(final); err != nil {
		return err
	}
	if err := os.Rename(tmp, final); err != nil {
		return err
	}
	e.engineDir = done.engineDir
	return nil
}

func readBuildInfo(dir string) (*buildInfo, error) {
	data, err := os.ReadFile(filepath.Join(dir, "build.json"))
	if err != nil {
		return nil, err
	}
	var b buildInfo
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, err
	}
	if b.Key == "" {
		return nil, errors.New("build.json without a key")
	}
	return &b, nil
}

// engineComplete reports whether dir holds a built engine.
func engineComplete(dir string) bool {
	for _, f := range []string{"config.json", "rank0.engine"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.IsDir() {
			return false
		}
	}
	return true
}
