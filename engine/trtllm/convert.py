"""xrun's checkpoint conversion for trtllm-build.

Converts a Hugging Face model (a hub name or a directory) into a
TensorRT-LLM checkpoint, one rank file per GPU of the tp x pp mapping,
through TensorRT-LLM's own model classes (tensorrt_llm.models), so that
it works for every architecture TensorRT-LLM can build without knowing
where a release keeps its examples/*/convert_checkpoint.py.
"""
import argparse
import os
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", required=True, help="Hugging Face name or directory")
    ap.add_argument("--output_dir", required=True)
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--tp_size", type=int, default=1)
    ap.add_argument("--pp_size", type=int, default=1)
    ap.add_argument("--moe_ep_size", type=int, default=1)
    a = ap.parse_args()

    from tensorrt_llm.mapping import Mapping
    from tensorrt_llm.models import AutoModelForCausalLM

    src = a.model
    if not os.path.isdir(src):
        # TensorRT-LLM's model classes read a local directory; fetch the
        # checkpoint as trtllm-bench itself does for a hub name.
        from huggingface_hub import snapshot_download
        src = snapshot_download(src, allow_patterns=["*.json", "*.safetensors", "*.model", "*.txt", "*.py"])
    world = a.tp_size * a.pp_size
    for rank in range(world):
        mapping = Mapping(world_size=world, rank=rank, tp_size=a.tp_size, pp_size=a.pp_size,
                          moe_ep_size=a.moe_ep_size, moe_tp_size=a.tp_size // a.moe_ep_size)
        model = AutoModelForCausalLM.from_hugging_face(src, dtype=a.dtype, mapping=mapping)
        model.save_checkpoint(a.output_dir, save_config=(rank == 0))
        del model
        print(f"xrun convert: rank {rank} of {world} written to {a.output_dir}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
