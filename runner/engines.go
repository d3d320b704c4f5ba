package runner

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	dsets "github.com/xrun-dev/xrun/datasets"
	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/command"
	"github.com/xrun-dev/xrun/engine/driver"
	"github.com/xrun-dev/xrun/engine/openai"
	"github.com/xrun-dev/xrun/engine/trtllm"
	"github.com/xrun-dev/xrun/results"
	"github.com/xrun-dev/xrun/results/layout"
)

// External engines in a study: which ones its cells use, their tools'
// versions (asked once, before anything runs, for the environment and the
// cells' fingerprints), and what a worker needs to open one.

// probeTimeout bounds asking a tool its version.
const probeTimeout = 2 * time.Minute

// probeEngines asks every external engine the cells to run use for its
// tool's version. A tool that does not answer is recorded without a
// version; its cells fail when they open it, with its own message.
func (s *study) probeEngines(ctx context.Context) {
	s.tools = map[string]results.EngineTool{}
	if s.slurm != nil {
		// The tools are on the tasks' nodes; their records name them.
		return
	}
	used := map[string]bool{}
	for i := range s.spec.Plan.Cells {
		if e := s.spec.Plan.Cells[i].Params.Engine; !builtinEngine(e) {
			used[e] = true
		}
	}
	for name := range used {
		var cmd driver.Command
		tool := results.EngineTool{Engine: name}
		switch name {
		case trtllm.Name:
			o := s.spec.Trtllm.WithDefaults()
			tool.Tool = "TensorRT-LLM"
			cmd = trtllm.VersionCommand(o)
		case openai.Name:
			// A server is asked nothing before its cells start it; its
			// cells name it (backend, commands).
			tool.Tool = s.spec.OpenAI.URL
			if srv := s.spec.OpenAI.Server; srv != nil {
				tool.Tool = srv.Argv[0].Raw
			}
			s.tools[name] = tool
			continue
		case command.Name:
			tool.Tool = s.spec.Command.Argv[0].Raw
			if len(s.spec.Command.Version) == 0 {
				s.tools[name] = tool
				continue
			}
			vars := map[string]string{}
			for _, t := range s.spec.Command.Version {
				cmd.Argv = append(cmd.Argv, t.Expand(vars))
			}
			cmd.Stage, cmd.Dir = driver.StageVersion, s.spec.Command.Dir
		}
		pctx, cancel := context.WithTimeout(ctx, probeTimeout)
		var out bytes.Buffer
		err := driver.Exec(pctx, cmd, driver.ExecOptions{Env: s.o.Env, Stdout: &out})
		cancel()
		if err != nil {
			tool.Error = err.Error()
			s.log.Warn().Str("engine", name).Err(err).Msg("could not ask the engine's tool its version; its cells will say why they fail")
		} else {
			tool.Version = driver.LastLine(out.String())
			s.log.Info().Str("engine", name).Str("tool", tool.Tool).Str("version", tool.Version).Msg("external engine")
		}
		s.tools[name] = tool
	}
}

// engineTools lists the probed tools for the environment, by engine.
func (s *study) engineTools() []results.EngineTool {
	var out []results.EngineTool
	for _, k := range driver.SortedKeys(s.tools) {
		out = append(out, s.tools[k])
	}
	return out
}

// engineIdentity is what the fingerprint takes of a cell's engine: the
// backend for the built-in one; for an external one also its tool's
// version and the spec's block for it, so that --resume measures again
// after either changed.
func (s *study) engineIdentity(backend string) string {
	if slo := s.spec.SLO; slo != nil {
		// Goodput counts against the SLO: another SLO, other numbers.
		return s.blockIdentity(backend) + fmt.Sprintf(" slo=%g/%g/%g", slo.TTFTms, slo.TPOTms, slo.Percentile)
	}
	return s.blockIdentity(backend)
}

func (s *study) blockIdentity(backend string) string {
	var block any
	switch backend {
	case trtllm.Name:
		block = s.spec.Trtllm
	case command.Name:
		block = s.spec.Command
	case openai.Name:
		block = s.spec.OpenAI
	default:
		return backend
	}
	b, _ := json.Marshal(block)
	sum := sha256.Sum256(b)
	return backend + " version=" + s.tools[backend].Version + " block=" + hex.EncodeToString(sum[:8])
}

// cellDriverParams are every parameter of an external engine's cell as
// its driver reads them, with paths made absolute.
func cellDriverParams(spec *Spec, c *Cell) driver.Params {
	p := driverParams(&c.Params)
	if x := c.Params.ExtraLLMAPIOptions; x != "" && x != "none" {
		p["extra_llm_api_options"] = absPath(filepath.Join(spec.Dir, x), x)
	}
	p["model"] = absModel(c.ModelRef)
	// A program's {layers} is a count: all of them is the model's.
	p["layers"] = c.Model.Layers
	return p
}

func absPath(p, fallback string) string {
	if filepath.IsAbs(fallback) {
		return fallback
	}
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// openEngine opens a worker's engine: the built-in one, or an external
// engine's driver for the cell.
func (w *cellWorker) openEngine(ctx context.Context, path string, reqs []dsets.Request) (engine.Engine, error) {
	c, plan := w.cell, w.plan
	switch c.Engine.Backend {
	case trtllm.Name, command.Name, openai.Name:
	default:
		return engine.New(ctx, c.Engine)
	}
	dc, err := w.driverCell(path, reqs)
	if err != nil {
		return nil, err
	}
	if c.Engine.Backend == openai.Name {
		if plan.OpenAI == nil {
			return nil, errors.New("engine openai: the plan has no openai block (was it written by another xrun?)")
		}
		return openai.Open(ctx, *plan.OpenAI, dc)
	}
	if c.Engine.Backend == trtllm.Name {
		var o trtllm.Options
		if plan.Trtllm != nil {
			o = *plan.Trtllm
		}
		return trtllm.Open(ctx, o, dc)
	}
	if plan.Command == nil {
		return nil, errors.New("engine command: the plan has no command block (was it written by another xrun?)")
	}
	return command.Open(ctx, plan.Command, dc)
}

// driverCell is the cell as its driver runs it.
func (w *cellWorker) driverCell(path string, reqs []dsets.Request) (*driver.Cell, error) {
	c, plan := w.cell, w.plan
	mc, err := engine.LookupModel(c.Engine.Model)
	if err != nil {
		return nil, err
	}
	if mc, err = engine.WithLayers(mc, c.Engine.Layers); err != nil {
		return nil, err
	}
	cdir, err := filepath.Abs(layout.CellDir(w.dir, c.ID))
	if err != nil {
		return nil, err
	}
	dpath, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	dc := &driver.Cell{ID: c.ID, Dir: cdir, Params: c.Driver, Engine: c.Engine, Model: mc,
		ModelName: engine.HFName(c.Engine.Model), Dataset: dpath, CacheDir: plan.CacheDir, Env: os.Environ()}
	if dc.Params == nil {
		dc.Params = driver.Params(c.Params)
	}
	for _, r := range reqs {
		dc.MaxInputLen = max(dc.MaxInputLen, len(r.InputIDs))
		dc.MaxSeqLen = max(dc.MaxSeqLen, len(r.InputIDs)+r.OutputTokens)
	}
	if v := w.getenv("CUDA_VISIBLE_DEVICES"); v != "" && v != "-1" {
		dc.GPUs = len(strings.Split(v, ","))
	}
	if mc.Path != "" {
		if b, err := os.ReadFile(filepath.Join(mc.Path, "config.json")); err == nil {
			sum := sha256.Sum256(b)
			dc.ModelConfigHash = hex.EncodeToString(sum[:8])
		}
	}
	return dc, nil
}
