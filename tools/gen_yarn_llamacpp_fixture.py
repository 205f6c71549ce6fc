#!/usr/bin/env python3
"""llama.cpp's logits for the YaRN fixture (tests/fixtures/hf_tiny_llama_yarn), through a GGUF that
gguf-py writes from the Hugging Face directory, for tests/test_rope_yarn.cpp.

    ~/.cache/llmctl/ref-venv/bin/python tools/gen_yarn_llamacpp_fixture.py   # llama-cpp-python 0.3.36

(the venv of scripts/install-reference.sh has llama-cpp-python, gguf-py and numpy; no torch.)

Writes into tests/fixtures/hf_tiny_llama_yarn/:
  model.gguf            the safetensors weights (read here with numpy) under llama.cpp's names,
                        Q and K rows permuted for llama.cpp's adjacent RoPE pairing as
                        convert_hf_to_gguf's LlamaModel does; rope.scaling.type yarn, factor,
                        original_context_length, yarn_beta_fast/slow from config.json (llama.cpp
                        derives the 1 + 0.1 ln(factor) attention factor itself); a byte vocabulary
                        <unk> <s> </s> <0x00> .. <0x7C> that gives the 128 tokens (ids are fed
                        directly, so the pieces do not matter)
  llamacpp_logits.json  llama.cpp's logits at every position of the fixture's 40 tokens (16 .. 39
                        lie past the original context) on its precise CPU path (flash_attn off,
                        F32 KV cache, logits_all), then 8 greedy ids, one token per step
The logits are checked here against transformers' float64 ones (reference_logits.json): a wrong
GGUF key or permutation fails before anything is written.
"""
import json
import os
import struct
import sys

import gguf
import llama_cpp
import numpy as np

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "hf_tiny_llama_yarn")
GREEDY = 8
TOLERANCE = 1e-3  # against transformers in float64


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", (name, info["dtype"])
        a, b = info["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dtype="<f4").reshape(info["shape"]).copy()
    return out


def permute_for_adjacent_pairs(w, n_heads):
    # Row 2j + h of each head is row h * d/2 + j of Hugging Face's (rotate_half) layout.
    d = w.shape[0] // n_heads
    return w.reshape(n_heads, 2, d // 2, -1).swapaxes(1, 2).reshape(w.shape)


def write_gguf(cfg, state, path):
    rope = cfg["rope_parameters"]
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("tiny random llama yarn")
    w.add_file_type(0)
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_rope_freq_base(rope["rope_theta"])
    w.add_rope_dimension_count(cfg["head_dim"])
    w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    w.add_rope_scaling_factor(rope["factor"])
    w.add_rope_scaling_orig_ctx_len(rope["original_max_position_embeddings"])
    w.add_rope_scaling_yarn_beta_fast(rope["beta_fast"])
    w.add_rope_scaling_yarn_beta_slow(rope["beta_slow"])
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(cfg["vocab_size"] - 3)]
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * len(tokens))
    w.add_token_types([2, 3, 3] + [6] * (len(tokens) - 3))
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    per_layer = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q",
                 "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
                 "self_attn.o_proj": "attn_output", "post_attention_layernorm": "ffn_norm",
                 "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
    for name, a in state.items():
        if name == "model.embed_tokens.weight":
            gname = "token_embd.weight"
        elif name == "model.norm.weight":
            gname = "output_norm.weight"
        elif name == "lm_head.weight":
            gname = "output.weight"
        else:
            parts = name.split(".")
            rest = ".".join(parts[3:-1])
            gname = f"blk.{parts[2]}.{per_layer[rest]}.weight"
            if rest == "self_attn.q_proj":
                a = permute_for_adjacent_pairs(a, cfg["num_attention_heads"])
            elif rest == "self_attn.k_proj":
                a = permute_for_adjacent_pairs(a, cfg["num_key_value_heads"])
        w.add_tensor(gname, np.ascontiguousarray(a, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    with open(os.path.join(FIXTURE, "config.json")) as f:
        cfg = json.load(f)
    with open(os.path.join(FIXTURE, "reference_logits.json")) as f:
        ref = json.load(f)
    state = read_safetensors(os.path.join(FIXTURE, "model.safetensors"))
    gguf_path = os.path.join(FIXTURE, "model.gguf")
    write_gguf(cfg, state, gguf_path)

    tokens = ref["tokens"]
    settings = dict(n_ctx=64, n_batch=64, n_threads=2, n_threads_batch=2, flash_attn=False,
                    type_k=0, type_v=0, logits_all=True, n_gpu_layers=0, seed=1234)
    llm = llama_cpp.Llama(gguf_path, verbose=False, **settings)
    llm.reset()
    llm.eval(tokens)
    logits = np.array(llm.scores[:len(tokens)], dtype=np.float64)
    ids, row = [], logits[-1]
    for i in range(GREEDY):
        tok = int(np.argmax(row))
        ids.append(tok)
        if i + 1 < GREEDY:
            llm.eval([tok])
            row = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)
    diff = float(np.abs(logits - np.array(ref["logits"])).max())
    print(f"max |llama.cpp - transformers| = {diff:.2e} (bound {TOLERANCE}), greedy {ids}")
    if not diff <= TOLERANCE:
        os.remove(gguf_path)
        sys.exit("gen_yarn_llamacpp_fixture: llama.cpp disagrees with transformers; nothing kept")
    with open(os.path.join(FIXTURE, "llamacpp_logits.json"), "w") as f:
        json.dump({"generator": "tools/gen_yarn_llamacpp_fixture.py",
                   "llama_cpp_python": llama_cpp.__version__,
                   "settings": {**settings, "eval": "tokens in one batch, then one per step"},
                   "max_abs_diff_vs_transformers": diff, "tokens": tokens, "greedy_ids": ids,
                   "logits": [[float(f"{x:.9g}") for x in r] for r in logits.tolist()]},
                  f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
