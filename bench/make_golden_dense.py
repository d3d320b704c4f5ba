# Makes the tiny Llama and Mixtral goldens (float32, CPU) the engine checks (engine/golden_test.go,
# engine/cuda/backend TestGoldenHF): every weight random, the RMSNorm weights too (1 + 0.1 N(0, 1)), so that
# a norm weight applied to the wrong columns, or not at all, shows in the logits. The first goldens of these
# two kept transformers' initial norm weights, all ones, under which such a bug passes. Shapes as before.
# Run where transformers 5.x and torch are installed (no GPU needed):
#   python3 bench/make_golden_dense.py OUTDIR     # then copy OUTDIR/tiny-llama, OUTDIR/tiny-mixtral to engine/testdata/hf/
import os, sys, torch, transformers
from golden_ref import randomize, reference  # bench/golden_ref.py
torch.set_grad_enabled(False)
out = sys.argv[1]
T = transformers

def make(name, cfg, model_cls, seed):
    torch.manual_seed(seed)
    model = model_cls(cfg).float().eval()
    randomize(model, seed)
    norms = [n for n, p in model.named_parameters() if p.dim() == 1 and "norm" in n]
    assert norms and all((p != 1).any() for n, p in model.named_parameters() if n in norms), "norm weights left at one"
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    model.save_pretrained(d, safe_serialization=True)
    reference(model, cfg, d, seed, {},
              metadata={"note": "logits: [seq, vocab] float32 for the prompt; greedy_ids: 12 greedy tokens after the prompt"})

common = dict(vocab_size=512, hidden_size=64, intermediate_size=160, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=256, rms_norm_eps=1e-5, tie_word_embeddings=False,
              bos_token_id=1, eos_token_id=2, pad_token_id=None)
make("tiny-llama", T.LlamaConfig(**common, head_dim=16, rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
     T.LlamaForCausalLM, 3)
make("tiny-mixtral", T.MixtralConfig(**common, num_local_experts=4, num_experts_per_tok=2,
                                     rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}),
     T.MixtralForCausalLM, 5)
