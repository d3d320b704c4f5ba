# What the tiny goldens' scripts (make_golden_dense.py, make_golden_gptoss.py) share: the random weights, and the
# reference, transformers' float32 logits of two prompts and 12 greedy tokens after each, saved beside the checkpoint.
import json, os, torch, transformers
from safetensors.torch import save_file

def randomize(model, seed, scales=()):
    """Every parameter random from one generator, in order: 1-D norm weights 1 + 0.1 N(0, 1), others 0.08 N(0, 1),
    or s N(0, 1) for the first (match, s) of scales whose match(name) holds."""
    g = torch.Generator().manual_seed(seed)
    for name, p in model.named_parameters():
        s = next((s for match, s in scales if match(name)), None)
        if p.dim() == 1 and "norm" in name:
            p.copy_(1 + 0.1 * torch.randn(p.shape, generator=g))
        elif s is not None:
            p.copy_(s * torch.randn(p.shape, generator=g))
        else:
            p.copy_(0.08 * torch.randn(p.shape, generator=g))

def greedy(model, ids, n):
    seq, margins = list(ids), []
    for _ in range(n):
        logits = model(torch.tensor([seq])).logits[0, -1]
        top = torch.topk(logits, 2)
        margins.append(float(top.values[0] - top.values[1]))
        seq.append(int(top.indices[0]))
    return seq[len(ids):], margins

def reference(model, cfg, d, seed, extra, metadata=None):
    """Writes d/reference.safetensors (case<i>.input_ids, .greedy_ids, .logits) and d/reference.json (versions,
    seed, each case's smallest top-2 margin along its greedy tokens, and extra)."""
    g = torch.Generator().manual_seed(seed + 1)
    tensors, cases = {}, []
    for i, L in enumerate([13, 5]):
        ids = torch.randint(3, cfg.vocab_size, (L,), generator=g).tolist()
        logits = model(torch.tensor([ids])).logits[0].float()
        toks, margins = greedy(model, ids, 12)
        tensors[f"case{i}.input_ids"] = torch.tensor(ids, dtype=torch.int64)
        tensors[f"case{i}.greedy_ids"] = torch.tensor(toks, dtype=torch.int64)
        tensors[f"case{i}.logits"] = logits.contiguous()
        cases.append({"input_len": L, "greedy_new_tokens": 12, "min_top2_margin": min(margins)})
    save_file(tensors, os.path.join(d, "reference.safetensors"), metadata=metadata)
    json.dump(dict({"transformers": transformers.__version__, "torch": torch.__version__, "seed": seed, "cases": cases}, **extra),
              open(os.path.join(d, "reference.json"), "w"), indent=1)
    print(os.path.basename(d), "ok", [round(c["min_top2_margin"], 4) for c in cases], sum(p.numel() for p in model.parameters()))
