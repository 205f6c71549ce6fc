#!/usr/bin/env python3
"""Tiny random Hugging Face checkpoints and transformers' logits for them, for
tests/test_hf_model.cpp (the safetensors + config.json loader).

    pip install torch transformers safetensors sentencepiece
    python3 tools/gen_hf_fixture.py --out tests/fixtures

(the committed files came from torch 2.15.0, transformers 5.24.0, sentencepiece 0.2.3; torch's
CPU wheel index was not reachable, the PyPI wheel runs on the CPU as well)

writes (all seeded, deterministic on one torch version):
  hf_tiny_llama/   LlamaForCausalLM: hidden 64, 2 layers, 4 heads, 2 KV heads (GQA), head_dim 16,
                   intermediate 172 (not a multiple of 32, like stories260K), rope_scaling
                   llama3 (factor 8, low 1, high 4, original context 64: with head_dim 16 the
                   8 rotary pairs fall in all three bands), untied lm_head, float32
                   model.safetensors, config.json, tokenizer.model (a sentencepiece BPE model
                   trained on the text below; its size is the model's vocab_size),
                   reference_logits.json
  hf_tiny_qwen2/   Qwen2ForCausalLM: hidden 64, 2 layers, 4 heads, 2 KV heads, intermediate 96,
                   q/k/v biases, tied embeddings, the same vocabulary size, no tokenizer,
                   reference_logits.json
  hf_rope_llama3.json  transformers' llama3 rope frequencies for a Llama-3.1-8B-shaped config
                   (head_dim 128, rope_theta 500000, factor 8, low 1, high 4, original
                   context 8192) as divisors of the default ones, with that config.json text.
reference_logits.json: {"tokens": [...], "logits": [[n_vocab floats] per position]} from
transformers run in float64 with eager attention: an implementation independent of llmctl.

Weights are drawn at std 0.15 (norm weights 1 + 0.2 N(0,1), biases 0.1 N(0,1)) rather than
transformers' 0.02, so that logits vary by several units across the vocabulary and a wrong
rope pairing or frequency shows far above the tests' 1e-3 tolerance (the script prints how
far the llama logits move when rope scaling is dropped).
"""
import argparse
import json
import os
import shutil

import sentencepiece as spm
import torch
import transformers

TEXT = """Once upon a time there was a little fox who lived in a quiet forest.
Every morning the fox ran to the river to drink and to look at the fish.
One day the fox met a small bird that could not fly, and they became friends.
The bird told stories about the sky, and the fox told stories about the ground.
They shared bread and berries, and they laughed at the clouds together.
When winter came, the fox kept the bird warm, and the bird sang songs at night.
In spring the bird learned to fly again, but it came back to the fox every day.
"""
TOKENS = [1, 5, 17, 42, 99, 3, 150, 7, 64, 200, 11, 128, 31, 77, 2, 250]


def train_tokenizer(work):
    text_path = os.path.join(work, "text.txt")
    with open(text_path, "w") as f:
        f.write(TEXT * 4)
    prefix = os.path.join(work, "tok")
    spm.SentencePieceTrainer.train(
        input=text_path, model_prefix=prefix, model_type="bpe", vocab_size=300,
        hard_vocab_limit=False, character_coverage=1.0, byte_fallback=False,
        normalization_rule_name="identity", bos_id=1, eos_id=2, unk_id=0, pad_id=-1,
        num_threads=1, minloglevel=2)
    return prefix + ".model"


def randomize(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
            elif name.endswith(".bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.15 * torch.randn(p.shape, generator=g))


def reference_logits(model, tokens):
    m = model.to(torch.float64).eval()
    with torch.no_grad():
        out = m(torch.tensor([tokens]), use_cache=False).logits[0]
    model.to(torch.float32)
    return out


def save(model, out_dir, tokens, logits, extra=None):
    os.makedirs(out_dir, exist_ok=True)  # files written below replace old ones; README stays
    model.save_pretrained(out_dir, safe_serialization=True)
    gen = os.path.join(out_dir, "generation_config.json")
    if os.path.exists(gen):
        os.remove(gen)
    rows = [[float(f"{x:.9g}") for x in row.tolist()] for row in logits]
    with open(os.path.join(out_dir, "reference_logits.json"), "w") as f:
        json.dump({"generator": "tools/gen_hf_fixture.py", "transformers": transformers.__version__,
                   "torch": torch.__version__, "dtype": "float64", "tokens": tokens,
                   "logits": rows, **(extra or {})}, f, separators=(",", ":"))
        f.write("\n")
    for name in os.listdir(out_dir):
        os.chmod(os.path.join(out_dir, name), 0o644)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="tests/fixtures")
    ap.add_argument("--work", default="/tmp/gen_hf_fixture")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    torch.manual_seed(0)

    sp_path = train_tokenizer(args.work)
    n_vocab = spm.SentencePieceProcessor(model_file=sp_path).get_piece_size()
    assert max(TOKENS) < n_vocab, f"vocabulary of {n_vocab} is smaller than the test tokens"

    common = dict(vocab_size=n_vocab, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=256, rms_norm_eps=1e-5,
                  bos_token_id=1, eos_token_id=2, attn_implementation="eager")
    rope_llama3 = {"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0,
                   "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 64}
    cfg = transformers.LlamaConfig(intermediate_size=172, tie_word_embeddings=False,
                                   rope_parameters=rope_llama3, **common)
    llama = transformers.LlamaForCausalLM(cfg)
    randomize(llama, 1)
    logits = reference_logits(llama, TOKENS)

    # How much the llama3 rope scaling matters here: the same weights without it.
    plain = transformers.LlamaConfig(intermediate_size=172, tie_word_embeddings=False,
                                     rope_parameters={"rope_type": "default",
                                                      "rope_theta": 10000.0}, **common)
    unscaled = transformers.LlamaForCausalLM(plain)
    unscaled.load_state_dict(llama.state_dict())
    delta = (reference_logits(unscaled, TOKENS) - logits).abs().max().item()
    # transformers' llama3 frequencies as divisors of the default ones (ModelWeights::rope_freqs).
    divisors = (unscaled.model.rotary_emb.inv_freq.double() /
                llama.model.rotary_emb.inv_freq.double()).tolist()

    out = os.path.join(args.out, "hf_tiny_llama")
    save(llama, out, TOKENS, logits, {"rope_freqs": divisors})
    shutil.copy(sp_path, os.path.join(out, "tokenizer.model"))
    os.chmod(os.path.join(out, "tokenizer.model"), 0o644)
    print(f"hf_tiny_llama: n_vocab {n_vocab}; max |logit change| without llama3 scaling: {delta:.4f}")

    qcfg = transformers.Qwen2Config(intermediate_size=96, tie_word_embeddings=True,
                                    rope_parameters={"rope_type": "default",
                                                     "rope_theta": 1000000.0},
                                    use_sliding_window=False, **common)
    qwen = transformers.Qwen2ForCausalLM(qcfg)
    randomize(qwen, 2)
    save(qwen, os.path.join(args.out, "hf_tiny_qwen2"), TOKENS, reference_logits(qwen, TOKENS))
    print(f"hf_tiny_qwen2: n_vocab {n_vocab}")
    rope_llama3_golden(os.path.join(args.out, "hf_rope_llama3.json"))


def rope_llama3_golden(path):
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    rope = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
            "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
    shape = dict(vocab_size=128256, hidden_size=4096, num_hidden_layers=32,
                 num_attention_heads=32, num_key_value_heads=8, intermediate_size=14336,
                 max_position_embeddings=131072, rms_norm_eps=1e-5)
    scaled = transformers.LlamaConfig(rope_parameters=rope, **shape)
    default = transformers.LlamaConfig(
        rope_parameters={"rope_type": "default", "rope_theta": 500000.0}, **shape)
    inv_scaled, _ = ROPE_INIT_FUNCTIONS["llama3"](scaled, "cpu")
    base = 1.0 / (500000.0 ** (torch.arange(0, 128, 2, dtype=torch.float64) / 128))
    divisors = (base / inv_scaled.double()).tolist()
    del default
    config = dict(architectures=["LlamaForCausalLM"], rope_scaling=dict(rope, type="llama3"),
                  rope_theta=500000.0, **shape)
    del config["rope_scaling"]["rope_theta"], config["rope_scaling"]["rope_type"]
    with open(path, "w") as f:
        json.dump({"generator": "tools/gen_hf_fixture.py", "transformers": transformers.__version__,
                   "config": config, "rope_freqs": divisors}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
