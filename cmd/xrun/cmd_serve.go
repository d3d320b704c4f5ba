package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/cuda"
	"github.com/xrun-dev/xrun/engine/openai"
)

type serveOptions struct {
	listen       string
	model        string
	servedName   string
	engine       string
	dtype        string
	batchSize    int
	maxNumTokens int
	maxSeqLen    int
	gemmPlugin   string
	seed         int
	kvFraction   float64
	drain        time.Duration
}

func newServeCommand(a *app) *cobra.Command {
	opts := &serveOptions{}
	cmd := &cobra.Command{
		Use:   "serve --model MODEL [--listen ADDR]",
		Short: "Serve the built-in engine behind an OpenAI-compatible HTTP API",
		Long: `Serve xrun's own engine behind an OpenAI-compatible API, so that any load
generator can load it (and so that engine openai can be measured against it):
POST /v1/completions with a prompt of token ids, POST /v1/chat/completions
whose message contents are token ids, both streaming (stream: true, one
server-sent event per token), GET /v1/models and GET /health. The engine has
no tokenizer: text prompts are refused, saying so. Generation is greedy and
exactly max_tokens tokens (EOS ignored, as in the benchmarks).

The engine parameters are a cell's: --engine, --model, --dtype,
--batch-size, --max-num-tokens, --gemm-plugin, --seed,
--kv-cache-free-gpu-mem-fraction. Requests are admitted as they arrive, by
the in-flight batching scheduler, between iterations.

SIGINT or SIGTERM shuts down gracefully: /health answers 503, new requests
are refused, and those in flight finish (for at most --drain); a second
signal stops at once.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runServe(cmd.Context(), a, opts) },
	}
	f := cmd.Flags()
	f.StringVar(&opts.listen, "listen", "127.0.0.1:8000", "address to listen on (host:port; port 0 picks a free one)")
	f.StringVar(&opts.model, "model", "", "a zoo model name or a directory with config.json (required)")
	f.StringVar(&opts.servedName, "served-model-name", "", "the model name of the API (default: --model)")
	f.StringVar(&opts.engine, "engine", "auto", "auto (the GPU when one is usable, else the CPU), cuda or cpu")
	f.StringVar(&opts.dtype, "dtype", "float16", "float16, bfloat16 or float32")
	f.IntVar(&opts.batchSize, "batch-size", 256, "the most requests in flight")
	f.IntVar(&opts.maxNumTokens, "max-num-tokens", 8192, "the most tokens in one engine iteration")
	f.IntVar(&opts.maxSeqLen, "max-seq-len", 0, "the longest prompt plus max_tokens served (0: the model's positions)")
	f.StringVar(&opts.gemmPlugin, "gemm-plugin", "auto", "auto (cuBLASLt) or disable (the engine's own GEMMs)")
	f.IntVar(&opts.seed, "seed", 0, "seed of random weights")
	f.Float64Var(&opts.kvFraction, "kv-cache-free-gpu-mem-fraction", 0.9, "share of free GPU memory the KV cache may take")
	f.DurationVar(&opts.drain, "drain", time.Minute, "how long a graceful shutdown waits for the requests in flight")
	return cmd
}

func runServe(ctx context.Context, a *app, opts *serveOptions) error {
	if opts.model == "" {
		return usageError{errors.New("--model: required (a zoo model name such as tinyllama-1.1b, or a directory with config.json)")}
	}
	// Checked before the model loads, which takes a while.
	if opts.maxSeqLen < 0 {
		return usageError{fmt.Errorf("--max-seq-len %d: expected the longest prompt plus max_tokens served, >= 1, or 0 for the model's positions", opts.maxSeqLen)}
	}
	if opts.drain < 0 {
		return usageError{fmt.Errorf("--drain %v: expected how long a graceful shutdown waits, >= 0", opts.drain)}
	}
	backend := opts.engine
	switch backend {
	case "auto":
		backend = "cpu"
		if devs, err := cuda.Probe(ctx); err == nil && len(devs.GPUs) > 0 {
			backend = "cuda"
		}
	case "cuda", "cpu":
	default:
		return usageError{fmt.Errorf("--engine: %q: expected auto, cuda or cpu (xrun serve runs xrun's own engine)", opts.engine)}
	}
	cfg := engine.Config{Model: opts.model, Backend: backend, Dtype: opts.dtype, BatchSize: opts.batchSize, MaxNumTokens: opts.maxNumTokens,
		GemmPlugin: opts.gemmPlugin, Seed: opts.seed, KVCacheFreeGPUMemFraction: opts.kvFraction}
	e, err := engine.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer e.Close()
	srvEng, ok := e.(engine.Server)
	if !ok {
		return fmt.Errorf("the %s engine cannot serve requests as they come", backend)
	}
	mc := e.Model()
	maxLen := opts.maxSeqLen
	if maxLen <= 0 || maxLen > mc.MaxPos {
		maxLen = mc.MaxPos
	}
	name := opts.servedName
	if name == "" {
		name = opts.model
	}
	sized := func(z engine.Sizing) {
		a.log.Info().Int("slots", z.Slots).Int("max_seq_len", z.MaxSeqLen).Msg("xrun serve: requests in flight at most")
		if z.Slots < z.BatchSize {
			// Whole-sequence KV slots: the longest request allowed sets
			// how many fit, whatever the requests' real lengths.
			a.log.Warn().Int("slots", z.Slots).Int("batch_size", z.BatchSize).Int("max_seq_len", z.MaxSeqLen).
				Msgf("xrun serve: the KV cache holds %d requests of %d tokens, not --batch-size %d: at most %d are in flight; --max-seq-len (the longest prompt plus max_tokens served) admits more", z.Slots, z.MaxSeqLen, z.BatchSize, z.Slots)
		}
	}
	s := openai.NewServer(srvEng, openai.ServerOptions{Model: name, MaxSeqLen: maxLen, Vocab: mc.Vocab, Sized: sized})
	l, err := net.Listen("tcp", opts.listen)
	if err != nil {
		return usageError{fmt.Errorf("--listen %s: %w", opts.listen, err)}
	}
	// The engine runs until the server closes its input (a drain) or a
	// second signal (hard).
	hard, stopHard := context.WithCancel(context.Background())
	defer stopHard()
	ran := make(chan error, 1)
	go func() { ran <- s.Run(hard) }()
	hs := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 30 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(l) }()
	a.log.Info().Str("listen", l.Addr().String()).Str("model", name).Str("backend", e.Backend()).Int("max_seq_len", maxLen).Msg("xrun serve: ready")
	select {
	case err := <-served:
		stopHard()
		<-ran
		return fmt.Errorf("serving: %w", err)
	case err := <-ran:
		hs.Close()
		return fmt.Errorf("the engine stopped: %w", err)
	case <-ctx.Done():
	}
	a.log.Info().Dur("drain", opts.drain).Msg("xrun serve: shutting down; the requests in flight finish")
	s.Drain()
	dctx, cancel := context.WithTimeout(context.Background(), opts.drain)
	defer cancel()
	shutErr := hs.Shutdown(dctx)
	if shutErr != nil {
		hs.Close()
		stopHard()
	}
	s.Close()
	if err := <-ran; err != nil && shutErr == nil {
		return fmt.Errorf("the engine stopped: %w", err)
	}
	if shutErr != nil {
		return fmt.Errorf("the requests in flight did not finish within --drain %v: %w", opts.drain, shutErr)
	}
	a.log.Info().Msg("xrun serve: stopped")
	a.stopped = true
	return nil
}
