#!/usr/bin/env python3
"""Hugging Face transformers as a third-party engine, and a baseline.

Two ways to run it:

1. As an xrun engine (engine: command): it serves xrun's dataset file
   (TensorRT-LLM's JSONL: task_id, input_ids, output_tokens) in static
   batches of --batch-size requests in dataset order, each request
   generating exactly its output_tokens (greedy, EOS ignored), and writes
   one record per request in xrun's requests.jsonl format to --records:
   start_ns when its batch started, first_token_ns when its first token
   existed, end_ns when its batch's generate() returned
   (time.perf_counter_ns, after a device synchronisation). xrun computes
   every metric from the records. --warmup requests (the dataset's first
   ones) run untimed first. In xrun's profiled pass (XRUN_PROFILE_WINDOW=A-B,
   iterations counted from the first warm-up forward pass as TensorRT-LLM
   counts them) it opens cudaProfilerStart/Stop around the window (for
   nsys -c cudaProfilerApi) and, with --kernels, writes the window's CUDA
   kernel summary from torch.profiler in Nsight's cuda_gpu_kern_sum columns.

       python3 bench/hf_transformers.py --model tinyllama-1.1b --dtype float16 \
           --dataset DATA.jsonl --batch-size 16 --warmup 2 --records OUT.jsonl

2. As the gemm study's baseline (no --dataset): B prompts of 128 random
   tokens generating exactly 128 tokens each, one timed batch per B after a
   short warm-up; one JSON line per batch size and a table last.

       python3 bench/hf_transformers.py --batch 1,64,256 [--json out.jsonl]

The model is TinyLlama-1.1B's architecture (22 layers, hidden 2048, 32
heads, 4 KV heads, FFN 5632, vocab 32000) with random weights, as xrun's
zoo model tinyllama-1.1b (no download), or a Hugging Face directory with
config.json and weights; eager attention.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM, LogitsProcessor, LogitsProcessorList, StoppingCriteria, StoppingCriteriaList

DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}


def tinyllama_config():
    cfg = LlamaConfig(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
                      num_attention_heads=32, num_key_value_heads=4, head_dim=64, vocab_size=32000,
                      max_position_embeddings=2048, rms_norm_eps=1e-5, tie_word_embeddings=False,
                      bos_token_id=1, eos_token_id=2, pad_token_id=0)
    cfg._attn_implementation = "eager"
    return cfg


def load_model(name, dtype):
    torch.manual_seed(0)
    if os.path.isdir(name):
        model = LlamaForCausalLM.from_pretrained(name, torch_dtype=dtype, attn_implementation="eager").to("cuda")
    elif name in ("tinyllama-1.1b", "TinyLlama/TinyLlama-1.1B-Chat-v1.0"):
        torch.set_default_dtype(dtype)
        with torch.device("cuda"):
            model = LlamaForCausalLM(tinyllama_config())
        torch.set_default_dtype(torch.float32)
    else:
        sys.exit(f"hf_transformers.py: model {name!r}: expected tinyllama-1.1b (random weights) or a model directory")
    model = model.to(dtype).eval()
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    return model


def parse_window(s):
    """TLLM_PROFILE_START_STOP's syntax: 'A-B' spans and single 'K's."""
    spans = []
    for part in (s or "").split(","):
        part = part.strip()
        if not part or part == "none":
            continue
        a, _, b = part.partition("-")
        spans.append((int(a), int(b or a)))
    return spans


class Steps(LogitsProcessor):
    """Counts forward passes (one call per generated token of a batch) and
    opens the profile window at its edges; leaves the scores alone."""

    def __init__(self, spans, kernels):
        self.it = 0
        self.spans = spans
        self.kernels = kernels
        self.prof = None
        self.events = []

    def inside(self, it):
        return any(a <= it <= b for a, b in self.spans)

    def step(self):
        # Called after forward pass self.it; the next one is self.it + 1.
        nxt = self.it + 1
        if self.inside(self.it) and not self.inside(nxt):
            self.stop()
        if not self.inside(self.it) and self.inside(nxt):
            self.start()
        self.it = nxt

    def start(self):
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStart()
        if self.kernels and self.prof is None:
            self.prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA])
            self.prof.start()

    def stop(self):
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()
        if self.prof is not None:
            self.prof.stop()
            for e in self.prof.events():
                us = getattr(e, "device_time_total", None)
                if us is None:  # torch before 2.4
                    us = getattr(e, "cuda_time_total", 0)
                if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA and us > 0:
                    self.events.append((e.name, int(us * 1000)))
            self.prof = None

    def __call__(self, input_ids, scores):
        self.step()
        return scores


class FirstToken(StoppingCriteria):
    """Notes when a batch's first generated token exists; never stops."""

    def __init__(self):
        self.t = None

    def __call__(self, input_ids, scores, **kw):
        if self.t is None:
            torch.cuda.synchronize()
            self.t = time.perf_counter_ns()
        return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)


def batches(reqs, size):
    """Consecutive requests, at most size at a time, with one output length
    per batch (generate() gives every row the same number of tokens)."""
    cur = []
    for r in reqs:
        if cur and (len(cur) == size or r["output_tokens"] != cur[0]["output_tokens"]):
            yield cur
            cur = []
        cur.append(r)
    if cur:
        yield cur


def generate(model, batch, steps, first=None):
    width = max(len(r["input_ids"]) for r in batch)
    ids = torch.zeros((len(batch), width), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, r in enumerate(batch):  # left padding, as decoder-only generation wants
        n = len(r["input_ids"])
        ids[i, width - n:] = torch.tensor(r["input_ids"])
        mask[i, width - n:] = 1
    n_out = batch[0]["output_tokens"]
    kw = dict(attention_mask=mask.cuda(), do_sample=False, pad_token_id=0, max_new_tokens=n_out, min_new_tokens=n_out,
              logits_processor=LogitsProcessorList([steps]))
    if first is not None:
        kw["stopping_criteria"] = StoppingCriteriaList([first])
    out = model.generate(ids.cuda(), **kw)
    return out[:, width:]


def write_kernels(path, events):
    """The window's kernels in Nsight Systems' cuda_gpu_kern_sum CSV."""
    by = {}
    for name, ns in events:
        by.setdefault(name, []).append(ns)
    total = sum(ns for _, ns in events) or 1
    rows = []
    for name, d in by.items():
        d.sort()
        t = sum(d)
        sd = statistics.stdev(d) if len(d) > 1 else 0.0
        rows.append((t, name, d, sd))
    rows.sort(key=lambda r: (-r[0], r[1]))
    with open(path, "w") as f:
        f.write('"Time (%)","Total Time (ns)","Instances","Avg (ns)","Med (ns)","Min (ns)","Max (ns)","StdDev (ns)","Name"\n')
        for t, name, d, sd in rows:
            q = name.replace('"', '""')
            f.write(f'"{100 * t / total:.1f}","{t}","{len(d)}","{t / len(d):.1f}","{statistics.median(d):.1f}","{d[0]}","{d[-1]}","{sd:.1f}","{q}"\n')


def serve(a):
    with open(a.dataset) as f:
        reqs = [json.loads(line) for line in f if line.strip()]
    model = load_model(a.model, DTYPES[a.dtype])
    steps = Steps(parse_window(os.environ.get("XRUN_PROFILE_WINDOW", "")), a.kernels)
    with torch.inference_mode():
        if steps.inside(0):
            steps.start()
        for b in batches(reqs[: a.warmup], a.batch_size):
            generate(model, b, steps)
        torch.cuda.synchronize()
        records = []
        for b in batches(reqs, a.batch_size):
            first = FirstToken()
            start = time.perf_counter_ns()
            out = generate(model, b, steps, first)
            torch.cuda.synchronize()
            end = time.perf_counter_ns()
            for r, ids in zip(b, out.tolist()):
                records.append({"task_id": r["task_id"], "start_ns": start, "first_token_ns": first.t, "end_ns": end,
                                "input_tokens": len(r["input_ids"]), "output_tokens": len(ids), "output_ids": ids})
        if steps.prof is not None:  # the window ran past the last pass
            steps.stop()
    tmp = a.records + ".tmp"
    with open(tmp, "w") as f:
        for rec in records:
            f.write(json.dumps(rec, separators=(",", ":")) + "\n")
    os.replace(tmp, a.records)
    if a.kernels and steps.events:
        write_kernels(a.kernels, steps.events)
    secs = (records[-1]["end_ns"] - records[0]["start_ns"]) / 1e9
    print(f"hf_transformers {transformers.__version__} torch {torch.__version__} on {torch.cuda.get_device_name(0)}: "
          f"{len(records)} requests, batch {a.batch_size}, {sum(r['output_tokens'] for r in records) / secs:.0f} output tok/s", flush=True)


def baseline(a):
    model = load_model("tinyllama-1.1b", torch.float16)
    gpu = torch.cuda.get_device_name(0)
    rows = []
    for b in [int(x) for x in a.batch.split(",") if x]:
        ids = torch.randint(3, 32000, (b, a.input), device="cuda")
        mask = torch.ones_like(ids)
        kw = dict(attention_mask=mask, do_sample=False, pad_token_id=0)
        with torch.inference_mode():
            model.generate(ids, max_new_tokens=4, min_new_tokens=4, **kw)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            out = model.generate(ids, max_new_tokens=a.output, min_new_tokens=a.output, **kw)
            torch.cuda.synchronize()
            dt = time.perf_counter() - t0
        n = (out.shape[1] - a.input) * b
        r = {"impl": "hf-transformers-eager", "transformers": transformers.__version__, "torch": torch.__version__,
             "gpu": gpu, "batch_size": b, "output_tokens": n, "seconds": dt, "output_tok_s": n / dt}
        rows.append(r)
        print(json.dumps(r), flush=True)
        if a.json:
            with open(a.json, "a") as f:
                f.write(json.dumps(r) + "\n")
    print(f"{'batch':>5} {'out_tok/s':>10}  gpu")
    for r in rows:
        print(f"{r['batch_size']:>5} {r['output_tok_s']:>10.0f}  {r['gpu']}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", help="xrun's dataset file: serve it and write --records")
    ap.add_argument("--records", help="where the per-request records go (xrun's requests.jsonl format)")
    ap.add_argument("--kernels", help="where the profile window's kernel summary goes (profiled pass)")
    ap.add_argument("--model", default="tinyllama-1.1b")
    ap.add_argument("--dtype", default="float16", choices=sorted(DTYPES))
    ap.add_argument("--batch-size", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--version", action="store_true", help="print transformers' and torch's versions")
    ap.add_argument("--batch", default="1,64,256", help="baseline mode: batch sizes")
    ap.add_argument("--input", type=int, default=128)
    ap.add_argument("--output", type=int, default=128)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    if a.version:
        print(f"transformers {transformers.__version__}, torch {torch.__version__}")
        return 0
    if a.dataset:
        if not a.records:
            ap.error("--dataset needs --records")
        serve(a)
        return 0
    baseline(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
