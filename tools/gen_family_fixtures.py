#!/usr/bin/env python3
"""Tiny random-weight models of the families qwen3, olmo2, gemma2, gemma3, granite, phi3, mistral3,
qwen2 and llama (Llama 3.1 RoPE scaling),
each as a Hugging Face directory run by transformers and as a GGUF run by llama.cpp, for
tests/test_model_families.cpp. One place of knowledge, two steps in two virtual environments:

  # 1. transformers + gguf-py (pip install torch transformers safetensors gguf numpy):
  /work/venvs/hf/bin/python tools/gen_family_fixtures.py hf --out tests/fixtures
  # 2. llama.cpp (the venv of scripts/install-reference.sh: llama-cpp-python 0.3.36, numpy):
  ~/.cache/llmctl/ref-venv/bin/python tools/gen_family_fixtures.py llamacpp --out tests/fixtures

(--only FAMILY ... regenerates some families, the others' files untouched; the committed files
came from torch 2.15.0, transformers 5.24.0, gguf-py 0.19.0 and
llama-cpp-python 0.3.36, which vendors llama.cpp 0c1e570)

Step 1 writes, per family, tests/fixtures/family_<name>/:
  config.json, model.safetensors  the transformers model (float32), random weights (std 0.15;
                   norm weights 1 + 0.2 N(0,1), for Gemma the stored offset w so that 1 + w is)
  reference_logits.json  transformers in float64, eager attention: the logits at every position
                   of TOKENS, and GREEDY ids generated after them (argmax, whole recompute)
  model.gguf       the same weights written by gguf-py with llama.cpp's tensor names and
                   metadata keys (F32; a byte-level sentencepiece vocabulary of 3 + 256 tokens,
                   which sets vocab_size), mapped here as convert_hf_to_gguf.py maps them:
                   granite's, mistral3's and llama3's Q/K rows permuted for llama.cpp's adjacent RoPE
                   pairing, Gemma's norm weights stored as 1 + w, tied embeddings without
                   output.weight
It also prints how much each family's own feature moves the logits (the feature switched off on
the same weights), so that the tests' 1e-3 tolerance is known to be far below it.

Step 2 runs each model.gguf with llama.cpp on its precise CPU path (flash_attn off, F32 KV cache,
logits_all, 2 threads; the tokens in one batch, then one token per greedy step) and writes
llamacpp_logits.json (logits at every position, greedy ids), after checking them against
transformers' logits of step 1: a wrong GGUF mapping fails here, at generation time.

Families (hidden 32, 4 heads, 2 KV heads, n_ff 64, vocabulary 259, 24 tokens + 8 greedy):
  qwen3    head_dim 16 (explicit: q_dim 64 > hidden), QK-norm per head, untied (a tied tiny
           model only echoes its input under greedy decoding)
  olmo2    norms after attention and FFN only, QK-norm over the whole q and k, untied
  gemma2   4 layers, head_dim 16, sliding window 8 on layers 0 and 2 (24 tokens: 3 windows),
           attention soft-cap 4 and final soft-cap 6 (small, so that both bite), tanh-GELU GLU,
           embeddings times sqrt(32), query_pre_attn_scalar 16 (= head_dim, as llama.cpp's rule
           gives for a file without 46 layers), tied
  gemma3   6 layers (5 windowed, the 6th global, as Gemma 3's pattern), head_dim 16, QK-norm per
           head (1 + w), sliding window 8 with local RoPE base 10000, the global layer at base 1e6
           with linear scaling factor 4, tanh-GELU GLU, embeddings times sqrt(32),
           query_pre_attn_scalar 16 (= head_dim, llama.cpp's rule), tied
  granite  llama with embedding_multiplier 4, residual_multiplier 0.5, attention_multiplier
           0.25 (not 1/sqrt(8)), logits_scaling 2, untied
  phi3     fused qkv_proj and gate_up_proj (GGUF attn_qkv, ffn_up of 2 n_ff rows), sliding_window
           2047 as Phi-3-mini-4k has (never reached; llama.cpp ignores phi3's window), untied
  phi3_longrope  phi3 with rope_type longrope, original_max_position_embeddings 16 and
           max_position_embeddings 64 (factor 4, attention factor sqrt(1 + ln 4 / ln 16)): the
           24 tokens run past the original context, so every reference uses long_factor (GGUF:
           rope_factors_long/short.weight, rope.scaling.attn_factor, original_context_length,
           as convert_hf_to_gguf's Phi3MiniModel writes them)
  phi3_partial   phi3 with partial_rotary_factor 0.5 (Phi-4-mini): 4 of each head's 8 dims rotate
  mistral3 Ministral3ForCausalLM: llama with YaRN factor 4 over an original context of 16 (mscale
           and mscale_all_dim 1, as the released models: cos/sin unscaled) and the attention
           temperature llama_4_scaling_beta 0.5 (0.1 released; larger so that it bites): q times
           1 + 0.5 ln(1 + floor(pos / 16)), 1 up to position 15 and 1.347 from 16 on, so the
           24 tokens and 8 greedy steps run past both thresholds. GGUF as convert_hf_to_gguf's
           Mistral3Model writes it (yarn keys, yarn_log_multiplier = mscale_all_dim,
           attention.temperature_scale = beta), untied
  qwen2    Qwen2ForCausalLM: q, k and v projections with biases (GGUF attn_q/k/v.bias), Neox
           RoPE (no permutation, as convert_hf_to_gguf's Qwen2Model), rope base 1e6, untied
  llama3   LlamaForCausalLM, Llama 3.1's rope_type llama3 (factor 8, low/high_freq_factor 1/4)
           over an original context of 16 (24 tokens + 8 greedy past it): divisors [1.74, 8, 8,
           8]. GGUF as convert_hf_to_gguf's LlamaModel: Q/K permuted, no scaling keys,
           rope_freqs.weight by its formula, which reads the top-level
           original_max_position_embeddings (default 8192), so config.json has 16 there too
"""
import argparse
import json
import math
import os
import sys

import numpy as np

TOKENS = [1, 17, 42, 99, 3, 150, 7, 64, 200, 11, 128, 31, 77, 250, 5, 180, 23, 90, 141, 66, 219,
          48, 12, 170]
GREEDY = 8
N_VOCAB = 3 + 256
FAMILIES = ["qwen3", "olmo2", "gemma2", "gemma3", "granite", "phi3", "phi3_longrope", "phi3_partial",
            "mistral3", "qwen2", "llama3"]
GEMMA = ("gemma2", "gemma3")  # norm weights hold w for a scale of 1 + w
PERMUTED = ("granite", "mistral3", "llama3")  # converted like llama: Q/K rows for adjacent pairing
# The GGUF architecture of a fixture family (its name unless listed).
GGUF_ARCH = {"phi3_longrope": "phi3", "phi3_partial": "phi3", "llama3": "llama"}
LONG_FACTOR = [1.0, 1.5, 3.0, 6.0]
SHORT_FACTOR = [1.0, 1.05, 1.1, 1.2]
# llama.cpp against transformers on the same weights. llama.cpp's CPU GELU rounds its input to
# F16 and reads a table (ggml-cpu vec.h GGML_GELU_FP16), so gemma2 gets a looser bound: 1.8e-3
# measured, and 3.3e-4 when transformers' GELU is replaced by that table (checked by hand).
CROSS_TOL = {"qwen3": 1e-3, "olmo2": 1e-3, "gemma2": 3e-3, "gemma3": 3e-3, "granite": 1e-3,
             "phi3": 1e-3, "phi3_longrope": 1e-3, "phi3_partial": 1e-3, "mistral3": 1e-3,
             "qwen2": 1e-3, "llama3": 1e-3}
MISTRAL3_ROPE = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                 "original_max_position_embeddings": 16, "beta_fast": 32.0, "beta_slow": 1.0,
                 "mscale": 1.0, "mscale_all_dim": 1.0, "llama_4_scaling_beta": 0.5}
LLAMA3_ROPE = {"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 16}
GEMMA3_ROPE = {"full_attention": {"rope_type": "linear", "factor": 4.0, "rope_theta": 1000000.0},
               "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}


def fixture_dir(out, family):
    return os.path.join(out, f"family_{family}")


# ---- step 1: transformers and gguf-py ---------------------------------------------------------

def hf_configs(transformers):
    common = dict(vocab_size=N_VOCAB, hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                  intermediate_size=64, max_position_embeddings=256, rms_norm_eps=1e-5,
                  bos_token_id=1, eos_token_id=2, pad_token_id=None, attn_implementation="eager")
    return {
        "qwen3": (transformers.Qwen3ForCausalLM, transformers.Qwen3Config(
            num_hidden_layers=2, head_dim=16, tie_word_embeddings=False, use_sliding_window=False,
            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, **common)),
        "olmo2": (transformers.Olmo2ForCausalLM, transformers.Olmo2Config(
            num_hidden_layers=2, tie_word_embeddings=False,
            rope_parameters={"rope_type": "default", "rope_theta": 500000.0}, **common)),
        "gemma2": (transformers.Gemma2ForCausalLM, transformers.Gemma2Config(
            num_hidden_layers=4, head_dim=16, tie_word_embeddings=True, sliding_window=8,
            query_pre_attn_scalar=16, attn_logit_softcapping=4.0, final_logit_softcapping=6.0,
            hidden_activation="gelu_pytorch_tanh",
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, **common)),
        "granite": (transformers.GraniteForCausalLM, transformers.GraniteConfig(
            num_hidden_layers=2, tie_word_embeddings=False, embedding_multiplier=4.0,
            residual_multiplier=0.5, attention_multiplier=0.25, logits_scaling=2.0,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, **common)),
        "phi3": (transformers.Phi3ForCausalLM, transformers.Phi3Config(
            num_hidden_layers=2, tie_word_embeddings=False, sliding_window=2047,
            original_max_position_embeddings=256,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, **common)),
        "phi3_longrope": (transformers.Phi3ForCausalLM, transformers.Phi3Config(
            num_hidden_layers=2, tie_word_embeddings=False, sliding_window=None,
            original_max_position_embeddings=16,
            rope_parameters={"rope_type": "longrope", "rope_theta": 10000.0,
                             "original_max_position_embeddings": 16,
                             "short_factor": SHORT_FACTOR, "long_factor": LONG_FACTOR},
            **{**common, "max_position_embeddings": 64})),
        "phi3_partial": (transformers.Phi3ForCausalLM, transformers.Phi3Config(
            num_hidden_layers=2, tie_word_embeddings=False, sliding_window=None,
            original_max_position_embeddings=256,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                             "partial_rotary_factor": 0.5}, **common)),
        "mistral3": (transformers.Ministral3ForCausalLM, transformers.Ministral3Config(
            num_hidden_layers=2, head_dim=8, tie_word_embeddings=False, sliding_window=None,
            rope_parameters=MISTRAL3_ROPE, **{**common, "max_position_embeddings": 64})),
        "gemma3": (transformers.Gemma3ForCausalLM, transformers.Gemma3TextConfig(
            num_hidden_layers=6, head_dim=16, tie_word_embeddings=True, sliding_window=8,
            query_pre_attn_scalar=16, hidden_activation="gelu_pytorch_tanh",
            rope_parameters=GEMMA3_ROPE, **common)),
        "qwen2": (transformers.Qwen2ForCausalLM, transformers.Qwen2Config(
            num_hidden_layers=2, tie_word_embeddings=False, use_sliding_window=False,
            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, **common)),
        "llama3": (transformers.LlamaForCausalLM, transformers.LlamaConfig(
            num_hidden_layers=2, tie_word_embeddings=False, rope_parameters=LLAMA3_ROPE,
            original_max_position_embeddings=16, **{**common, "max_position_embeddings": 128})),
    }


def zeroed(suffix):
    """A feature switched off by zeroing the parameters named ...suffix (qwen2's biases are
    not a config option)."""
    def edit(model):
        for name, p in model.named_parameters():
            if name.endswith(suffix):
                p.data.zero_()
    return edit


# What each family's features are, switched off one at a time on the same weights (the
# config edit, or a function that edits the loaded model), to print how far the logits move
# without them.
FEATURES = {
    "qwen3": {},
    "olmo2": {},
    "gemma2": {"attention soft-cap": {"attn_logit_softcapping": None},
               "final soft-cap": {"final_logit_softcapping": None},
               "sliding window": {"sliding_window": 1 << 20}},
    "gemma3": {"sliding window": {"sliding_window": 1 << 20},
               "linear scaling": {"rope_parameters": {**GEMMA3_ROPE, "full_attention": {
                   "rope_type": "default", "rope_theta": 1000000.0}}},
               "local RoPE base": {"rope_parameters": {**GEMMA3_ROPE, "sliding_attention": {
                   "rope_type": "default", "rope_theta": 1000000.0}}}},
    "granite": {"embedding_multiplier": {"embedding_multiplier": 1.0},
                "residual_multiplier": {"residual_multiplier": 1.0},
                "attention_multiplier": {"attention_multiplier": 8 ** -0.5},
                "logits_scaling": {"logits_scaling": 1.0}},
    "phi3": {},
    "phi3_longrope": {"longrope": {"rope_parameters": {"rope_type": "default",
                                                       "rope_theta": 10000.0}}},
    "phi3_partial": {"partial rotary": {"rope_parameters": {"rope_type": "default",
                                                            "rope_theta": 10000.0}}},
    "mistral3": {"attention temperature": {"rope_parameters": {**MISTRAL3_ROPE,
                                                               "llama_4_scaling_beta": 0.0}},
                 "YaRN": {"rope_parameters": {**MISTRAL3_ROPE, "factor": 1.0}}},
    "qwen2": {"q bias": zeroed("q_proj.bias"), "k bias": zeroed("k_proj.bias"),
              "v bias": zeroed("v_proj.bias")},
    "llama3": {"llama3 scaling": {"rope_parameters": {"rope_type": "default",
                                                      "rope_theta": 10000.0}}},
}


def randomize(torch, model, seed, norm_offset):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if name.endswith("norm.weight"):
                w = 1.0 + 0.2 * torch.randn(p.shape, generator=g)
                p.copy_(w - 1.0 if norm_offset else w)  # Gemma scales by 1 + w
            else:
                p.copy_(0.15 * torch.randn(p.shape, generator=g))


def forward_logits(torch, model, tokens):
    with torch.no_grad():
        return model(torch.tensor([tokens]), use_cache=False).logits[0]


def greedy(torch, model, tokens, n):
    ids = list(tokens)
    for _ in range(n):
        ids.append(int(torch.argmax(forward_logits(torch, model, ids)[-1])))
    return ids[len(tokens):]


def rows(logits):
    return [[float(f"{x:.9g}") for x in row.tolist()] for row in logits]


def permute_for_adjacent_pairs(w, n_heads):
    # Within each head of d rows, row 2j + h of the result is row h * d/2 + j of w: what
    # convert_hf_to_gguf's LlamaModel.permute does, so that llama.cpp's adjacent (NORMAL) RoPE
    # pairing computes Hugging Face's rotate_half.
    d = w.shape[0] // n_heads
    out = np.empty_like(w)
    for head in range(n_heads):
        for j in range(d // 2):
            for half in range(2):
                out[head * d + 2 * j + half] = w[head * d + half * (d // 2) + j]
    return out


def gguf_tensors(family, cfg, state):
    """(name, float32 array) pairs with llama.cpp's names, from the HF state dict."""
    gemma = family in GEMMA
    per_layer = {
        "input_layernorm.weight": "attn_norm.weight",
        "self_attn.q_proj.weight": "attn_q.weight",
        "self_attn.k_proj.weight": "attn_k.weight",
        "self_attn.v_proj.weight": "attn_v.weight",
        "self_attn.o_proj.weight": "attn_output.weight",
        "self_attn.q_proj.bias": "attn_q.bias",
        "self_attn.k_proj.bias": "attn_k.bias",
        "self_attn.v_proj.bias": "attn_v.bias",
        "self_attn.q_norm.weight": "attn_q_norm.weight",
        "self_attn.k_norm.weight": "attn_k_norm.weight",
        # With real post-attention norms (gemma2, olmo2) the name means what it says; in
        # llama-style layers it is the norm before the FFN.
        "post_attention_layernorm.weight":
            "post_attention_norm.weight" if family in (*GEMMA, "olmo2") else "ffn_norm.weight",
        "pre_feedforward_layernorm.weight": "ffn_norm.weight",
        "post_feedforward_layernorm.weight": "post_ffw_norm.weight",
        "mlp.gate_proj.weight": "ffn_gate.weight",
        "mlp.up_proj.weight": "ffn_up.weight",
        "mlp.down_proj.weight": "ffn_down.weight",
        # phi3's fused projections: rows q, k, v and gate, up, kept as they are.
        "self_attn.qkv_proj.weight": "attn_qkv.weight",
        "mlp.gate_up_proj.weight": "ffn_up.weight",
    }
    out = []
    for name, t in state.items():
        a = t.detach().to("cpu").double().numpy()
        if name.endswith("norm.weight") and gemma:
            a = a + 1.0
        if name == "model.embed_tokens.weight":
            gname = "token_embd.weight"
        elif name == "model.norm.weight":
            gname = "output_norm.weight"
        elif name == "lm_head.weight":
            if cfg.tie_word_embeddings:
                continue
            gname = "output.weight"
        else:
            parts = name.split(".")
            assert parts[0] == "model" and parts[1] == "layers", name
            rest = ".".join(parts[3:])
            gname = f"blk.{parts[2]}.{per_layer[rest]}"
            if family in PERMUTED and rest == "self_attn.q_proj.weight":
                a = permute_for_adjacent_pairs(a, cfg.num_attention_heads)
            if family in PERMUTED and rest == "self_attn.k_proj.weight":
                a = permute_for_adjacent_pairs(a, cfg.num_key_value_heads)
        out.append((gname, a.astype(np.float32)))
    return out


def llama3_rope_freqs(cfg, rope, dim):
    # convert_hf_to_gguf's LlamaModel.generate_extra_tensors: per pair, the divisor of the
    # frequency (1 / the factor transformers multiplies inv_freq by). Its context is the
    # top-level original_max_position_embeddings (8192 when absent), not rope_scaling's.
    base = rope["rope_theta"]
    factor, low, high = rope["factor"], rope["low_freq_factor"], rope["high_freq_factor"]
    old_ctx = getattr(cfg, "original_max_position_embeddings", 8192)
    freqs = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float32) / dim))
    out = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < old_ctx / high:
            out.append(1.0)
        elif wavelen > old_ctx / low:
            out.append(factor)
        else:
            smooth = (old_ctx / wavelen - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, np.float32)


def write_gguf(gguf, path, family, cfg):
    w = gguf.GGUFWriter(path, GGUF_ARCH.get(family, family))
    # (not "phi3": llama.cpp's vocabulary loader gives tokens of a model named phi3 or phi-3
    # attributes by text, and this vocabulary has no <|endoftext|>)
    w.add_name(f"tiny random {family}".replace("phi3", "Phi 3"))
    w.add_file_type(0)  # ALL_F32
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    rope = cfg.rope_parameters.get("full_attention", cfg.rope_parameters)  # gemma3: per layer type
    w.add_rope_freq_base(rope["rope_theta"])
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    w.add_rope_dimension_count(int(rope.get("partial_rotary_factor", 1.0) * head_dim))
    if head_dim * cfg.num_attention_heads != cfg.hidden_size or family in GEMMA:
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
    if family == "gemma2":
        w.add_attn_logit_softcapping(cfg.attn_logit_softcapping)
        w.add_final_logit_softcapping(cfg.final_logit_softcapping)
        w.add_sliding_window(cfg.sliding_window)
    if family == "gemma3":  # as convert_hf_to_gguf's Gemma3Model
        w.add_sliding_window(cfg.sliding_window)
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(rope["factor"])
        w.add_rope_freq_base_swa(cfg.rope_parameters["sliding_attention"]["rope_theta"])
    if family == "mistral3":  # as convert_hf_to_gguf's Mistral3Model (LlamaModel's YaRN keys)
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(rope["factor"])
        w.add_rope_scaling_orig_ctx_len(rope["original_max_position_embeddings"])
        w.add_rope_scaling_yarn_beta_fast(rope["beta_fast"])
        w.add_rope_scaling_yarn_beta_slow(rope["beta_slow"])
        w.add_rope_scaling_yarn_log_mul(rope["mscale_all_dim"])
        w.add_attn_temperature_scale(rope["llama_4_scaling_beta"])
    if family.startswith("phi3"):  # as convert_hf_to_gguf's Phi3MiniModel
        orig = cfg.original_max_position_embeddings
        w.add_rope_scaling_orig_ctx_len(orig)
        w.add_sliding_window(cfg.sliding_window or 0)
        if rope["rope_type"] == "longrope":
            scale = cfg.max_position_embeddings / orig
            w.add_rope_scaling_attn_factors(math.sqrt(1 + math.log(scale) / math.log(orig)))
            w.add_tensor("rope_factors_long.weight", np.array(rope["long_factor"], np.float32))
            w.add_tensor("rope_factors_short.weight", np.array(rope["short_factor"], np.float32))
    if rope["rope_type"] == "llama3":  # convert_hf_to_gguf's LlamaModel: only the tensor
        w.add_tensor("rope_freqs.weight", llama3_rope_freqs(cfg, rope, head_dim))
    if family == "granite":
        w.add_embedding_scale(cfg.embedding_multiplier)
        w.add_residual_scale(cfg.residual_multiplier)
        w.add_attention_scale(cfg.attention_multiplier)
        w.add_logit_scale(cfg.logits_scaling)
    # A byte-level sentencepiece vocabulary: <unk> <s> </s>, then <0x00> .. <0xFF>.
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * len(tokens))
    w.add_token_types([2, 3, 3] + [6] * 256)  # UNKNOWN, CONTROL, CONTROL, BYTE
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    return w


def step_hf(args):
    import gguf
    import torch
    import transformers

    torch.manual_seed(0)
    # Seeds by order in hf_configs (new families go last, so the others keep their weights).
    for seed, (family, (cls, cfg)) in enumerate(hf_configs(transformers).items(), start=10):
        if args.only and family not in args.only:
            continue
        d = fixture_dir(args.out, family)
        os.makedirs(d, exist_ok=True)
        model = cls(cfg)
        randomize(torch, model, seed, norm_offset=family in GEMMA)
        model.save_pretrained(d, safe_serialization=True)
        gen = os.path.join(d, "generation_config.json")
        if os.path.exists(gen):
            os.remove(gen)
        ref = cls(cfg).to(torch.float64).eval()
        ref.load_state_dict(model.state_dict())
        logits = forward_logits(torch, ref, TOKENS)
        ids = greedy(torch, ref, TOKENS, GREEDY)
        for what, edit in FEATURES[family].items():
            off_cfg = cfg
            if not callable(edit):
                off_cfg = cfg.__class__.from_dict({**cfg.to_dict(), **edit})
                off_cfg._attn_implementation = "eager"
            off = cls(off_cfg).to(torch.float64).eval()
            off.load_state_dict(model.state_dict())
            if callable(edit):
                edit(off)
            delta = (forward_logits(torch, off, TOKENS) - logits).abs().max().item()
            print(f"{family}: max |logit change| without {what}: {delta:.4f}")
        extra = {}
        if family == "phi3_longrope":
            # Within the original context transformers uses short_factor (llama.cpp pads its
            # context to 256 cells, past 16, so it has no such case at this size).
            short = TOKENS[:cfg.original_max_position_embeddings]
            extra["short_context"] = {"tokens": short,
                                      "logits": rows(forward_logits(torch, ref, short))}
        with open(os.path.join(d, "reference_logits.json"), "w") as f:
            json.dump({"generator": "tools/gen_family_fixtures.py hf",
                       "transformers": transformers.__version__, "torch": torch.__version__,
                       "dtype": "float64", "attn_implementation": "eager", "tokens": TOKENS,
                       "greedy_ids": ids, "logits": rows(logits), **extra}, f,
                      separators=(",", ":"))
            f.write("\n")
        w = write_gguf(gguf, os.path.join(d, "model.gguf"), family, cfg)
        for name, a in gguf_tensors(family, cfg, model.state_dict()):
            w.add_tensor(name, a)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        with open(os.path.join(d, "README.md"), "w") as f:
            f.write(f"# family_{family}\n\nA tiny random {cls.__name__} (config.json, model.safetensors) with "
                    "transformers' float64 logits\n(reference_logits.json), the same weights as a GGUF "
                    "written by gguf-py (model.gguf) and\nllama.cpp's logits for it (llamacpp_logits.json). "
                    "Generated by the two steps in\ntools/gen_family_fixtures.py's docstring; tested in "
                    "tests/test_model_families.cpp.\n")
        for name in os.listdir(d):
            os.chmod(os.path.join(d, name), 0o644)
        size = sum(os.path.getsize(os.path.join(d, n)) for n in os.listdir(d))
        print(f"{family}: logits std {logits.std().item():.3f}, greedy {ids}, {size} bytes in {d}")


# ---- step 2: llama.cpp ------------------------------------------------------------------------

def step_llamacpp(args):
    import llama_cpp

    settings = dict(n_ctx=64, n_batch=64, n_threads=2, n_threads_batch=2, flash_attn=False,
                    type_k=0, type_v=0, logits_all=True, n_gpu_layers=0, seed=1234)
    failed = False
    for family in FAMILIES:
        if args.only and family not in args.only:
            continue
        d = fixture_dir(args.out, family)
        with open(os.path.join(d, "reference_logits.json")) as f:
            ref = json.load(f)
        llm = llama_cpp.Llama(os.path.join(d, "model.gguf"), verbose=False, **settings)
        llm.reset()
        llm.eval(TOKENS)
        logits = np.array(llm.scores[:len(TOKENS)], dtype=np.float64)
        ids = []
        row = logits[-1]
        for i in range(GREEDY):
            tok = int(np.argmax(row))  # first maximum
            ids.append(tok)
            if i + 1 < GREEDY:
                llm.eval([tok])
                row = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)
        diff = float(np.abs(logits - np.array(ref["logits"])).max())
        ok = diff <= CROSS_TOL[family] and ids == ref["greedy_ids"]
        failed = failed or not ok
        print(f"{family}: max |llama.cpp - transformers| = {diff:.2e} (bound {CROSS_TOL[family]}), "
              f"greedy {ids} {'==' if ids == ref['greedy_ids'] else '!='} transformers' "
              f"{ref['greedy_ids']}{'' if ok else '  FAILED'}")
        with open(os.path.join(d, "llamacpp_logits.json"), "w") as f:
            json.dump({"generator": "tools/gen_family_fixtures.py llamacpp",
                       "llama_cpp_python": llama_cpp.__version__,
                       "settings": {**settings, "eval": "tokens in one batch, then one per step"},
                       "max_abs_diff_vs_transformers": diff, "tokens": TOKENS, "greedy_ids": ids,
                       "logits": rows(logits)}, f, separators=(",", ":"))
            f.write("\n")
        os.chmod(os.path.join(d, "llamacpp_logits.json"), 0o644)
        del llm
    if failed:
        sys.exit("gen_family_fixtures: llama.cpp disagrees with transformers (see above)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("step", choices=["hf", "llamacpp"])
    ap.add_argument("--out", default="tests/fixtures")
    ap.add_argument("--only", choices=FAMILIES, nargs="+", help="these families only")
    args = ap.parse_args()
    step_hf(args) if args.step == "hf" else step_llamacpp(args)


if __name__ == "__main__":
    main()
