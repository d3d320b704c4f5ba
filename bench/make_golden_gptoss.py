# Makes the tiny GPT-OSS goldens (float32, CPU) the engine checks (engine/golden_gptoss_test.go), as
# ../shared/testdata/hf-golden/make_golden.py makes the others; that directory is read-only here, so this
# script lives beside the engine. Run where transformers 5.x is installed (the GPU machine has it):
#   python3 bench/make_golden_gptoss.py OUTDIR     # then copy OUTDIR/tiny-gpt-oss* to engine/testdata/hf/
# Two directories: tiny-gpt-oss (experts unquantized, transformers' own layout) and tiny-gpt-oss-mxfp4 (the same
# model with its experts quantized to MXFP4 _blocks/_scales; its reference is transformers run on the dequantized
# values, which is what any MXFP4 loader must reproduce).
import json, math, os, shutil, sys, torch, transformers
from safetensors.torch import save_file, load_file
import golden_ref  # bench/golden_ref.py
from golden_ref import reference
torch.set_grad_enabled(False)
out = sys.argv[1]
T = transformers

def randomize(model, seed):
    golden_ref.randomize(model, seed, [(lambda n: "sinks" in n, 1.0),
                                       # Wide enough that gate and up reach the clamp at +-7.
                                       (lambda n: n.endswith("experts.gate_up_proj"), 0.5)])

FP4 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])

def quantize_mxfp4(w):
    """w [..., rows, K] (K a multiple of 32) -> blocks uint8 [..., rows, K/32, 16], scales uint8 [..., rows, K/32],
    and the dequantized values: per block of 32 the power of two that brings its largest magnitude within 6,
    each value the nearest E2M1 code (low nibble the even element)."""
    x = w.reshape(*w.shape[:-1], w.shape[-1] // 32, 32).float()
    amax = x.abs().amax(-1, keepdim=True).clamp(min=2.0 ** -126)
    e = torch.ceil(torch.log2(amax / 6.0)).clamp(-127, 127)
    scaled = x / torch.exp2(e)
    codes = (scaled.unsqueeze(-1) - FP4).abs().argmin(-1).to(torch.uint8)  # ties: the lower code, +0 before -0
    deq = FP4[codes.long()] * torch.exp2(e)
    blocks = codes[..., 0::2] | (codes[..., 1::2] << 4)
    scales = (e.squeeze(-1) + 127).to(torch.uint8)
    return blocks.contiguous(), scales.contiguous(), deq.reshape(w.shape)

seed = 11
L = 4
kw = dict(vocab_size=512, hidden_size=64, intermediate_size=64, num_hidden_layers=L, num_attention_heads=4,
          num_key_value_heads=2, head_dim=16, num_local_experts=4, num_experts_per_tok=2, sliding_window=8,
          layer_types=["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(L)],
          max_position_embeddings=4096, rms_norm_eps=1e-5, attention_bias=True, swiglu_limit=7.0,
          tie_word_embeddings=False, bos_token_id=1, eos_token_id=2, pad_token_id=None,
          rope_parameters={"rope_type": "yarn", "rope_theta": 150000.0, "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                           "truncate": False, "original_max_position_embeddings": 4096})
torch.manual_seed(seed)
cfg = T.GptOssConfig(**kw)
model = T.GptOssForCausalLM._from_config(cfg, attn_implementation="eager").float().eval()
randomize(model, seed)

# 1. Unquantized.
d = os.path.join(out, "tiny-gpt-oss"); os.makedirs(d, exist_ok=True)
model.save_pretrained(d, safe_serialization=True)
saved = load_file(os.path.join(d, "model.safetensors"))
E, H, F = 4, 64, 64
for n, shape in [("model.layers.0.mlp.experts.gate_up_proj", [E, H, 2 * F]), ("model.layers.0.mlp.experts.down_proj", [E, F, H]),
                 ("model.layers.0.mlp.experts.gate_up_proj_bias", [E, 2 * F]), ("model.layers.0.self_attn.sinks", [4]),
                 ("model.layers.0.mlp.router.bias", [E])]:
    assert n in saved and list(saved[n].shape) == shape, f"{n}: saved as {saved.get(n, torch.empty(0)).shape}; the engine reads {shape}: " + str(sorted(saved)[:40])
reference(model, cfg, d, seed, {})

# 2. MXFP4 experts: quantize, run the reference on the dequantized values, save blocks and scales.
dq = os.path.join(out, "tiny-gpt-oss-mxfp4"); os.makedirs(dq, exist_ok=True)
tensors = dict(saved)
for i in range(L):
    ex = model.model.layers[i].mlp.experts
    p = f"model.layers.{i}.mlp.experts."
    # transformers keeps gate_up_proj [E, H, 2F] and down_proj [E, F, H]; MXFP4 blocks run along the input dimension.
    for name, param in [("gate_up_proj", ex.gate_up_proj), ("down_proj", ex.down_proj)]:
        blocks, scales, deq = quantize_mxfp4(param.data.transpose(1, 2).contiguous())
        param.data.copy_(deq.transpose(1, 2))
        del tensors[p + name]
        tensors[p + name + "_blocks"], tensors[p + name + "_scales"] = blocks, scales
save_file({k: v.contiguous() for k, v in tensors.items()}, os.path.join(dq, "model.safetensors"), metadata={"format": "pt"})
c = json.load(open(os.path.join(d, "config.json")))
c["quantization_config"] = {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}
json.dump(c, open(os.path.join(dq, "config.json"), "w"), indent=2)
if os.path.exists(os.path.join(d, "generation_config.json")):
    shutil.copy(os.path.join(d, "generation_config.json"), dq)
reference(model, cfg, dq, seed, {"experts": "mxfp4, reference on the dequantized values"})
