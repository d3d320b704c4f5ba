package model

import (
	"fmt"
	"math/rand/v2"
)

// Static FP8 input scales calibrated at load (Options.FP8Activations auto
// or static, loader.fp8Calibrate): TensorRT-LLM deploys ModelOpt FP8
// checkpoints whose activation scales were calibrated offline, so weights
// quantized at load (random zoo weights, fp16/bf16 checkpoints) get such
// scales too, from one forward pass over a fixed calibration batch. The
// batch depends on nothing but the model's shape (not on the seed, the
// run, the routing mode or the backend), so every cell of a model and
// every backend computes the same scales: one sequence of
// min(calibMaxLen, max positions) token ids, drawn uniformly from the
// tokenizer's base vocabulary (the dataset generators' range: DatasetVocab
// where the model has one, else Vocab) by a PCG with the fixed seeds
// calibSeed1 and calibSeed2, in one prefill. Each Matrix weight whose
// input is dynamic per tensor gets amax/448 of the largest amax its GEMM
// saw (FP8Calibrator). MoE expert stacks are not calibrated: which tokens
// an expert gets in one short batch says little about the rest, so their
// inputs stay dynamic per tensor. Split models (tp, ep) run no FP8.
const (
	calibMaxLen = 256
	calibSeed1  = 0x6670_3863_616c_6962 // "fp8calib"
	calibSeed2  = 1
)

// CalibrationTokens is the calibration batch's n token ids, each below
// vocab (see above).
func CalibrationTokens(n, vocab int) []int32 {
	r := rand.New(rand.NewPCG(calibSeed1, calibSeed2))
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(r.IntN(vocab))
	}
	return ids
}

// calibrationBatch is the model's calibration sequence.
func (m *Model) calibrationBatch() []int32 {
	c := m.cfg
	n := calibMaxLen
	if c.MaxPos > 0 {
		n = min(n, c.MaxPos)
	}
	vocab := c.Vocab
	if c.DatasetVocab > 0 && c.DatasetVocab <= c.Vocab {
		vocab = c.DatasetVocab
	}
	return CalibrationTokens(n, vocab)
}

// calibrateFP8 runs the calibration batch between CalibrateFP8(true) and
// CalibrateFP8(false), then leaves nothing of it for the run: the KV cache
// is dropped (Reserve sizes the run's own), the expert counts are zeroed
// and the random routing modes restart. The activations stay allocated at
// the batch's size; Reserve only grows them.
func (m *Model) calibrateFP8() error {
	cal, ok := m.be.(FP8Calibrator)
	if !ok {
		return fmt.Errorf("model %q (%s): static FP8 input scales: %w", m.full.Name, m.be.Name(), ErrNoFP8Calibration)
	}
	ids := m.calibrationBatch()
	n := len(ids)
	if err := m.Reserve(Capacity{MaxTokens: n, MaxLogitRows: 1, Slots: 1, MaxLen: n}); err != nil {
		return fmt.Errorf("model %q: FP8 calibration: %w", m.full.Name, err)
	}
	var b Batch
	b.Add(0, 0, ids, true)
	// The router's own choices, whatever the routing mode: the scales are
	// the checkpoint's, not the benchmark's.
	m.route.mode = Routing{}
	err := cal.CalibrateFP8(true)
	if err == nil {
		err = m.Forward(&b)
	}
	if err == nil {
		// Argmax waits for the pass and reports a failed op.
		var pick [1]int32
		err = m.Argmax(pick[:])
	}
	if e := cal.CalibrateFP8(false); err == nil {
		err = e
	}
	m.route.mode = m.opt.Routing
	m.ResetRouting()
	if m.counts != nil {
		m.be.Zero(m.counts)
	}
	if r, ok := m.be.(Releaser); ok && m.cache != nil {
		r.FreeKVCache(m.cache)
	}
	m.cache = nil
	m.capa.Slots, m.capa.MaxLen, m.capa.BlockSize, m.capa.Blocks = 0, 0, 0, 0
	m.lastRows, m.lastLogitRows = 0, 0
	if err != nil {
		return fmt.Errorf("model %q: FP8 calibration: %w", m.full.Name, err)
	}
	return nil
}
