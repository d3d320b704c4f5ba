package runner

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	dsets "github.com/xrun-dev/xrun/datasets"
	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/cuda"
)

// resolveDevices probes the GPUs when a cell may use one and decides which
// GPUs cells run on.
func (s *study) resolveDevices(ctx context.Context) error {
	if s.slurm != nil {
		// The tasks' nodes have the GPUs, not this host: Slurm gives each
		// task its own (--gres).
		return nil
	}
	need := false
	for i := range s.spec.Plan.Cells {
		need = need || s.spec.Plan.Cells[i].Params.Engine != "cpu"
	}
	if !need {
		if s.o.GPUs != nil {
			s.log.Warn().Msg("--gpus has no effect: every cell runs on the cpu engine")
		}
		return nil
	}
	devs, err := cuda.ProbeWith(ctx, cuda.ProbeOptions{Executable: s.o.Executable, Env: s.o.Env})
	if ctx.Err() != nil {
		return fmt.Errorf("probing GPUs: %w", ErrInterrupted)
	}
	s.devs = devs
	var ng *cuda.NoGPUError
	switch {
	case errors.As(err, &ng):
		s.noGPU = ng.Reason
	case err != nil:
		s.noGPU = err.Error()
		s.log.Warn().Err(err).Msg("the GPU probe failed; taking this machine to have no usable GPU")
	}
	var usable []cuda.DeviceInfo
	for _, g := range devs.GPUs {
		if g.Unusable == "" {
			usable = append(usable, g)
		}
	}
	if s.o.GPUs == nil {
		s.gpus = usable
		return nil
	}
	for _, idx := range s.o.GPUs {
		i := slices.IndexFunc(devs.GPUs, func(g cuda.DeviceInfo) bool { return g.Index == idx })
		switch {
		case i < 0 && len(devs.GPUs) == 0:
			return &OptionError{"--gpus", fmt.Sprintf("GPU %d: this machine has no usable GPU (%s)", idx, s.noGPU)}
		case i < 0:
			return &OptionError{"--gpus", fmt.Sprintf("GPU %d does not exist; xrun devices lists GPUs 0 to %d", idx, len(devs.GPUs)-1)}
		case devs.GPUs[i].Unusable != "":
			return &OptionError{"--gpus", fmt.Sprintf("GPU %d (%s) is not usable: %s", idx, devs.GPUs[i].Name, devs.GPUs[i].Unusable)}
		}
		s.gpus = append(s.gpus, devs.GPUs[i])
	}
	return nil
}

// buildPlan resolves every planned cell for its worker: backend, absolute
// paths, dataset, timeout and fingerprint.
func (s *study) buildPlan(sel []bool) error {
	abs, err := filepath.Abs(s.o.CacheDir)
	if err != nil {
		return err
	}
	s.plan = &workerPlan{Version: workerPlanVersion, Name: s.spec.Name, Spec: s.spec.File, Repeats: s.spec.Repeats, CacheDir: abs,
		Command: s.spec.Command, Trtllm: s.spec.Trtllm, ThrottleThreshold: s.o.ThrottleThreshold,
		OpenAI: s.spec.OpenAI, SLO: engineSLO(s.spec.SLO),
		// Allocated whole, so the runCells may point into it.
		Cells: make([]workerCell, 0, len(s.spec.Plan.Cells))}
	build := Build()
	gpuDevice := ""
	if len(s.gpus) > 0 {
		var names []string
		for _, g := range s.gpus {
			if !slices.Contains(names, g.Name) {
				names = append(names, g.Name)
			}
		}
		slices.Sort(names)
		gpuDevice = strings.Join(names, "+") + " driver " + s.devs.DriverVersion
	}
	loggedAuto, loggedNoGPU := false, false
	var onGPU []*Cell
	for i := range s.spec.Plan.Cells {
		c := &s.spec.Plan.Cells[i]
		p := &c.Params
		backend := p.Engine
		if backend == "auto" && s.slurm != nil {
			backend = "cpu"
			if s.slurm.gpus > 0 {
				backend = "cuda"
			}
			if !loggedAuto {
				s.log.Info().Str("backend", backend).Str("gres", s.slurm.gres).Msg("engine auto under Slurm: cuda when the tasks ask for GPUs (--gres gpu:N), else cpu")
				loggedAuto = true
			}
		}
		if backend == "auto" {
			backend = "cpu"
			if len(s.gpus) > 0 {
				backend = "cuda"
			}
			if !loggedAuto {
				if backend == "cuda" {
					s.log.Info().Int("gpus", len(s.gpus)).Str("gpu", s.gpus[0].Name).Msg("engine auto: running on the GPU (cuda backend)")
				} else {
					s.log.Info().Str("why", s.noGPU).Msg("engine auto: no usable GPU, running on the cpu backend")
				}
				loggedAuto = true
			}
		}
		if sel[i] {
			// engine auto became cuda only now: float32 is refused there.
			if err := c.CheckBackend(backend); err != nil {
				return err
			}
		}
		rc := &runCell{cell: c, selected: sel[i]}
		gpu := DefaultEstimateGPU
		if len(s.gpus) > 0 {
			gpu = s.gpus[0].Name
		}
		rc.roof = roofPass(c, gpu)
		device := hostDevice()
		external := !builtinEngine(backend)
		if s.slurm != nil {
			// Checked against the tasks' GPUs once the plan is built.
			device = s.slurm.device()
		} else if external && len(s.gpus) == 0 {
			// An external engine's tool says for itself whether it needs a
			// GPU; its cells run one at a time, as CPU cells do.
			if !loggedNoGPU {
				s.log.Warn().Str("engine", backend).Str("why", s.noGPU).Msg("no usable GPU: cells of external engines run without one")
				loggedNoGPU = true
			}
		} else if backend == "cuda" || external {
			if len(s.gpus) == 0 {
				return fmt.Errorf("cell %s: engine cuda, but no GPU is usable: %s", c.ID, s.noGPU)
			}
			if sel[i] && p.GPUsPerCell > len(s.gpus) {
				return fmt.Errorf("cell %s needs %d GPUs (gpus_per_cell); only %d can be used", c.ID, p.GPUsPerCell, len(s.gpus))
			}
			rc.gpus = p.GPUsPerCell
			device = gpuDevice
		}
		timeout := p.Timeout
		if timeout <= 0 {
			timeout = DefaultCellTimeout
		}
		s.plan.Cells = append(s.plan.Cells, workerCell{
			ID: c.ID, Hash: c.Hash,
			Fingerprint: fingerprint(c, s.spec.Repeats, build, s.engineIdentity(backend), device, s.switches()),
			Params:      c.Flat(),
			Engine:      engineConfig(c, backend),
			Dataset:     workerDatasetFor(c),
			Timeout:     timeout,
		})
		if external {
			s.plan.Cells[len(s.plan.Cells)-1].Driver = cellDriverParams(s.spec, c)
		}
		rc.wc = &s.plan.Cells[len(s.plan.Cells)-1]
		s.cells = append(s.cells, rc)
		if sel[i] && backend == "cuda" {
			onGPU = append(onGPU, c)
		}
	}
	// Cells that cannot fit their GPU are refused before anything runs.
	if err := CheckFit(onGPU, gpuMemories(s.gpus)); err != nil {
		return err
	}
	if s.slurm != nil {
		if err := s.slurm.planGPUs(s.cells); err != nil {
			return err
		}
		// The fingerprints name the GPUs the tasks ask for, known only
		// now.
		for _, rc := range s.cells {
			rc.wc.Fingerprint = fingerprint(rc.cell, s.spec.Repeats, build, s.engineIdentity(rc.wc.Engine.Backend), s.slurm.device(), s.switches())
		}
	}
	return nil
}

// engineConfig is a cell's engine configuration on backend.
func engineConfig(c *Cell, backend string) engine.Config {
	p := &c.Params
	return engine.Config{
		Model: absModel(c.ModelRef), Layers: p.Layers, Backend: backend, Dtype: p.Dtype, KVCacheDtype: p.KVCacheDtype,
		MoEWeights: p.MoEWeights, FP8Activations: p.FP8Activations, BatchSize: p.BatchSize, MaxNumTokens: p.MaxNumTokens, GemmPlugin: p.GemmPlugin,
		RoutingMode: p.RoutingMode, ProfileWindow: p.ProfileWindow, Seed: p.Seed, Warmup: p.Warmup,
		NumGPUs: p.GPUsPerCell, KVCacheFreeGPUMemFraction: p.KVCacheFreeGPUMemFraction,
		TP: p.TP, EP: builtinEP(p, c.Model), Load: cellLoad(p),
	}
}

// absModel makes a model directory absolute, so a worker in another
// directory (or on another host sharing the filesystem) finds it; zoo
// names stay names.
func absModel(ref string) string {
	if _, ok := engine.ZooModel(ref); ok {
		return ref
	}
	if a, err := filepath.Abs(ref); err == nil {
		return a
	}
	return ref
}

// workerDatasetFor turns a cell's dataset parameters into what its worker
// loads.
func workerDatasetFor(c *Cell) workerDataset {
	d := c.Params.Dataset
	wd := workerDataset{ID: c.Dataset.ID, Vocab: c.Model.Vocab}
	if d.Kind() == GenFile {
		wd.File = c.DatasetFile
		if a, err := filepath.Abs(c.DatasetFile); err == nil {
			wd.File = a
		}
		return wd
	}
	g := &dsets.Params{
		Dist: d.Generator, NumRequests: d.NumRequests,
		InputMean: d.InputMean, InputStdev: d.InputStdev, OutputMean: d.OutputMean, OutputStdev: d.OutputStdev,
		InputMin: d.InputMin, InputMax: d.InputMax, OutputMin: d.OutputMin, OutputMax: d.OutputMax,
		Seed: int64(d.Seed), VocabSize: d.VocabSize, EOSID: d.EOSID,
		// The model's special tokens (Llama-3's EOS among them) may lie
		// beyond the base vocabulary token ids are drawn from.
		FullVocabSize: max(c.Model.Vocab, d.VocabSize),
	}
	if d.RandTaskID.Set {
		g.LoRA = &dsets.LoRAParams{TaskID: -1, Rand: &[2]int{d.RandTaskID.Min, d.RandTaskID.Max}}
	}
	wd.Generate = g
	return wd
}
