#!/usr/bin/env python3
"""A tiny random Llama with YaRN rope scaling and transformers' float64 logits for it, run past
its original context, for tests/test_rope_yarn.cpp.

    pip install torch transformers safetensors sentencepiece   # gen_hf_fixture is imported
    python3 tools/gen_rope_yarn_fixture.py --out tests/fixtures

(the committed files came from torch 2.15.0, transformers 5.24.0)

writes tests/fixtures/hf_tiny_llama_yarn/: LlamaForCausalLM, hidden 64, 2 layers, 2 heads of 32
(16 rotary pairs), 1 KV head, intermediate 96, vocab 128, rope_theta 50, rope_scaling yarn with
factor 4, original_max_position_embeddings 16, beta_fast 16, beta_slow 1 (the correction range
then ramps over pairs 0 .. 4 and interpolates the rest; the attention factor 1 + 0.1 ln 4 scales
cos and sin), 40 tokens: positions 16 .. 39 lie past the original context. config.json,
model.safetensors (float32), reference_logits.json ({"tokens", "logits": [[n_vocab] per
position], "unscaled_delta": how far the logits move without YaRN}).
Weights at std 0.15 as tools/gen_hf_fixture.py does, so a wrong ramp or factor shows far above
the tests' 1e-3.
"""
import argparse
import json
import os

import torch
import transformers

# The same random weights and float64 forward as the other HF fixtures.
from gen_hf_fixture import randomize, reference_logits

TOKENS = [(7 * i + 3) % 128 for i in range(40)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="tests/fixtures")
    args = ap.parse_args()
    common = dict(vocab_size=128, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                  num_key_value_heads=1, head_dim=32, intermediate_size=96,
                  max_position_embeddings=64, rms_norm_eps=1e-5, tie_word_embeddings=False,
                  attn_implementation="eager")
    yarn = {"rope_type": "yarn", "rope_theta": 50.0, "factor": 4.0,
            "original_max_position_embeddings": 16, "beta_fast": 16.0, "beta_slow": 1.0}
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(rope_parameters=yarn, **common))
    randomize(model, 7)
    logits = reference_logits(model, TOKENS)
    plain = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        rope_parameters={"rope_type": "default", "rope_theta": 50.0}, **common))
    plain.load_state_dict(model.state_dict())
    delta = (reference_logits(plain, TOKENS) - logits).abs().max().item()

    out = os.path.join(args.out, "hf_tiny_llama_yarn")
    os.makedirs(out, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    gen = os.path.join(out, "generation_config.json")
    if os.path.exists(gen):
        os.remove(gen)
    rows = [[float(f"{x:.9g}") for x in row.tolist()] for row in logits]
    with open(os.path.join(out, "reference_logits.json"), "w") as f:
        json.dump({"generator": "tools/gen_rope_yarn_fixture.py",
                   "transformers": transformers.__version__, "torch": torch.__version__,
                   "dtype": "float64", "tokens": TOKENS, "logits": rows,
                   "unscaled_delta": delta}, f, separators=(",", ":"))
        f.write("\n")
    for name in os.listdir(out):
        os.chmod(os.path.join(out, name), 0o644)
    print(f"hf_tiny_llama_yarn: max |logit change| without YaRN: {delta:.4f}")


if __name__ == "__main__":
    main()
