#!/usr/bin/env python3
"""Hugging Face transformers baseline for the gemm study's shapes.

TinyLlama-1.1B's architecture (22 layers, hidden 2048, 32 heads, 4 KV heads,
FFN 5632, vocab 32000) with random weights, float16, eager attention, static
batches of B prompts of 128 random tokens generating exactly 128 tokens each
(greedy, EOS ignored). Output tok/s = B * 128 / wall time of generate(),
prefill included, one timed batch per B after a short warm-up. Prints one
JSON line per batch size and a table last.

    python3 bench/hf_transformers.py --batch 1,64,256 [--json out.jsonl]
"""
import argparse
import json
import sys
import time

import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", default="1,64,256")
    ap.add_argument("--input", type=int, default=128)
    ap.add_argument("--output", type=int, default=128)
    ap.add_argument("--json", default="")
    a = ap.parse_args()

    cfg = LlamaConfig(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
                      num_attention_heads=32, num_key_value_heads=4, head_dim=64, vocab_size=32000,
                      max_position_embeddings=2048, rms_norm_eps=1e-5, tie_word_embeddings=False,
                      bos_token_id=1, eos_token_id=2, pad_token_id=0)
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    torch.set_default_dtype(torch.float16)
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg)
    model = model.half().eval()
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
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


if __name__ == "__main__":
    sys.exit(main())
