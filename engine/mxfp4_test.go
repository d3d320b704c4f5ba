package engine

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/xrun-dev/xrun/datasets"
	"github.com/xrun-dev/xrun/engine/backendtest"
	"github.com/xrun-dev/xrun/engine/cpu"
	"github.com/xrun-dev/xrun/engine/model"
	"github.com/xrun-dev/xrun/engine/safetensors"
)

// TestResolveMoEWeights: what moe_weights resolves to per backend and
// model, and what it refuses.
func TestResolveMoEWeights(t *testing.T) {
	oss, _ := ZooModel("gpt-oss-20b")
	moe, _ := ZooModel("tiny-moe")
	dense, _ := ZooModel("tiny-llama")
	ckpt := moe
	ckpt.Path, ckpt.MXFP4 = "/models/x", true
	odd := moe
	odd.FFN = 48
	for _, c := range []struct {
		name, backend, dtype, v string
		mc                      ModelConfig
		want                    bool
		err                     bool
	}{
		{"zoo gpt-oss auto on cpu", "cpu", "float16", "auto", oss, true, false},
		{"zoo gpt-oss auto on cuda: unverified", "cuda", "bfloat16", "auto", oss, false, false},
		{"zoo gpt-oss empty on cpu", "cpu", "", "", oss, true, false},
		{"MXFP4 checkpoint auto on cpu", "cpu", "float16", "auto", ckpt, true, false},
		{"other MoE auto", "cpu", "float16", "auto", moe, false, false},
		{"auto with fp8", "cpu", "fp8", "auto", oss, false, false},
		{"bf16", "cpu", "float16", "bf16", oss, false, false},
		{"mxfp4 any MoE", "cpu", "float16", "mxfp4", moe, true, false},
		{"mxfp4 opted in on cuda", "cuda", "bfloat16", "mxfp4", oss, true, false},
		{"mxfp4 on a dense model", "cpu", "float16", "mxfp4", dense, false, true},
		{"mxfp4 with fp8", "cpu", "fp8", "mxfp4", moe, false, true},
		{"mxfp4 on odd widths", "cpu", "float16", "mxfp4", odd, false, true},
		{"unknown", "cpu", "float16", "fp4", moe, false, true},
	} {
		got, err := ResolveMoEWeights(c.backend, c.mc, c.dtype, c.v)
		var pe *ParamError
		switch {
		case c.err && (!errors.As(err, &pe) || pe.Field != "moe_weights"):
			t.Errorf("%s: error %v, want a moe_weights ParamError", c.name, err)
		case !c.err && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case got != c.want:
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if err := (Config{Model: "tiny-moe", Backend: "cpu", MoEWeights: "int4"}).withDefaults().validate(); err == nil || !strings.Contains(err.Error(), "moe_weights") {
		t.Errorf("moe_weights int4: %v", err)
	}
}

// TestMXFP4GoldenCPU: the tiny GPT-OSS with MXFP4 experts kept as MXFP4
// matches transformers' golden, and gives exactly the logits of its
// experts dequantized (the loader's requantization is lossless).
func TestMXFP4GoldenCPU(t *testing.T) {
	dir := filepath.Join("testdata", "hf", "tiny-gpt-oss-mxfp4")
	cases := backendtest.ReadGolden(t, dir)
	cfg, err := LoadHFConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, gemm := range []string{"auto", "disable"} {
		var logits [2][]float32
		for i, mx := range []bool{false, true} {
			src, err := safetensors.OpenDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			be, err := cpu.New(model.BackendOptions{Gemm: gemm})
			if err != nil {
				t.Fatal(err)
			}
			defer be.Close()
			m, err := model.New(be, cfg, model.Options{Weights: src, MXFP4: mx})
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Reserve(model.Capacity{MaxTokens: 64, MaxLogitRows: 64, Slots: 4, MaxLen: 64}); err != nil {
				t.Fatal(err)
			}
			V := cfg.Vocab
			for ci, c := range cases {
				var b model.Batch
				start := b.Add(ci, 0, c.Input, false)
				b.LogitRows = b.LogitRows[:0]
				for j := range c.Input {
					b.LogitRows = append(b.LogitRows, int32(start+j))
				}
				if err := m.Forward(&b); err != nil {
					t.Fatal(err)
				}
				l := make([]float32, len(c.Input)*V)
				if err := m.ReadLogits(l); err != nil {
					t.Fatal(err)
				}
				if e := cpu.RelErr(l, c.Logits); e > 1e-4 {
					t.Errorf("gemm=%s mxfp4 %v case %d: logits rel err %.3g", gemm, mx, ci, e)
				}
				logits[i] = append(logits[i], l...)
				next := make([]int32, len(c.Input))
				if err := m.Argmax(next); err != nil {
					t.Fatal(err)
				}
				got := []int32{next[len(c.Input)-1]}
				for len(got) < len(c.Greedy) {
					b.Reset()
					b.Add(ci, len(c.Input)+len(got)-1, got[len(got)-1:], true)
					if err := m.Forward(&b); err != nil {
						t.Fatal(err)
					}
					m.Argmax(next)
					got = append(got, next[0])
				}
				if !slices.Equal(got, c.Greedy) {
					t.Errorf("gemm=%s mxfp4 %v case %d: tokens %v, want %v", gemm, mx, ci, got, c.Greedy)
				}
			}
		}
		if !slices.Equal(logits[0], logits[1]) {
			t.Errorf("gemm=%s: MXFP4 experts differ from their dequantized values (rel err %.3g)", gemm, cpu.RelErr(logits[1], logits[0]))
		}
	}
}

// TestMXFP4Engine: moe_weights through engine.New: a zoo MoE model runs
// with MXFP4 experts; a dense one, tp, and an unknown value are refused
// on moe_weights.
func TestMXFP4Engine(t *testing.T) {
	ctx := context.Background()
	e, err := New(ctx, Config{Model: "tiny-moe", Backend: "cpu", BatchSize: 2, Threads: 2, MoEWeights: "mxfp4"})
	if err != nil {
		t.Fatal(err)
	}
	if er, ok := e.(ExpertsReporter); !ok || er.MoEWeights() != "mxfp4" {
		t.Errorf("the engine does not report its MXFP4 experts")
	}
	res, err := e.Run(ctx, []datasets.Request{{TaskID: 0, InputIDs: []int32{5, 6, 7}, OutputTokens: 3}}, RunOptions{})
	e.Close()
	if err != nil || len(res.Requests) != 1 || len(res.Requests[0].OutputIDs) != 3 {
		t.Fatalf("run: %v %+v", err, res)
	}
	for _, c := range []Config{
		{Model: "tiny-llama", Backend: "cpu", MoEWeights: "mxfp4"},
		{Model: "tiny-moe", Backend: "cpu", MoEWeights: "mxfp4", EP: 2, NumGPUs: 2},
		{Model: "tiny-moe", Backend: "cpu", MoEWeights: "nvfp4"},
	} {
		_, err := New(ctx, c)
		var pe *ParamError
		if !errors.As(err, &pe) || pe.Field != "moe_weights" {
			t.Errorf("%+v: error %v, want a moe_weights ParamError", c, err)
		}
	}
}
