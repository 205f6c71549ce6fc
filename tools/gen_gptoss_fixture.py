#!/usr/bin/env python3
"""A tiny random-weight gpt-oss GGUF and its reference logits, for tests/test_model_gptoss.cpp:

    V=~/.cache/llmctl/ref-venv/bin/python
    $V tools/gen_gptoss_fixture.py --out tests/fixtures                        # F32 experts
    $V tools/gen_gptoss_fixture.py --out tests/fixtures --expert-type MXFP4    # MXFP4 experts

(the venv of scripts/install-reference.sh: llama-cpp-python 0.3.36, gguf-py, numpy.)

Writes tests/fixtures/family_moe_gptoss/ (F32) or family_moe_gptoss_mxfp4/ (MXFP4):
  model.gguf            random weights (numpy, seeded) under the keys and tensor names
                        llama.cpp's gpt-oss loader reads (src/models/openai-moe.cpp): q/k/v and
                        output biases, blk.N.attn_sinks.weight, post_attention_norm.weight as
                        the norm before the FFN, the router ffn_gate_inp with its bias, 3-D
                        experts ffn_{gate,up,down}_exps with 2-D biases [n_ff_exp | n_embd,
                        n_expert], gpt-oss.attention.sliding_window, YaRN keys; a byte-level
                        sentencepiece vocabulary of 3 + 256 tokens. With --expert-type MXFP4
                        the three expert matrices are quantized by gguf-py's MXFP4 (the rest
                        F32), as the released gpt-oss files store them.
  llamacpp_logits.json  llama.cpp's logits at every position of TOKENS on its precise CPU path
                        (flash_attn off, F32 KV cache, logits_all; the tokens in one batch),
                        then GREEDY greedy ids, one token per step; and, for the MXFP4 file,
                        numpy_f64_logits / numpy_f64_greedy_ids: the float64 forward pass over
                        the dequantized weights, which is the judge there (llama.cpp rounds the
                        activations to Q8_0 in front of an MXFP4 matmul, 0.15 off here).
  llamacpp_quant.json   (F32 file) llama.cpp's Q8_0 and Q4_K_M of it: each tensor's type, sums of
                        its dequantized values and llama.cpp's logits on it (as
                        tools/gen_moe_fixtures.py records them; tests/test_cli_quantize_moe.cpp)
  README.md

Model (hidden 32, 4 heads, 2 KV heads, head_dim 8, 3 layers, 4 experts top-2 of expert FFN
32, untied output): layers 0 and 2 attend through a window of 8 positions (llama.cpp's
set_swa_pattern(2): even layers), layer 1 globally, over 24 prompt tokens; YaRN factor 4 over
an original context of 16 (context 64), NEOX pairs, base 150000; router top-2 by logit, then
a softmax over the two (SOFTMAX_WEIGHT); swiglu_oai (limit 7, alpha 1.702, (up + 1)).

Before writing, the generator runs its own float64 forward pass (the rules of llama.cpp's
openai-moe.cpp graph, build_moe_ffn and ggml's soft_max with sinks and swiglu_oai) and
  * redraws the weights until every token's gap between its k-th and (k+1)-th router logit
    is at least MIN_GAP in every layer (no float32 rounding can flip a routing decision);
  * prints how much each gpt-oss rule moves the logits (sinks dropped, window off, swiglu
    clamp off, softmax over all experts instead of over the k), all far above 1e-3;
  * checks llama.cpp's logits against it within CROSS_TOL (F32 experts): a wrong key or
    tensor layout fails here, at generation time.
"""
import argparse
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The other MoE fixtures' prompt, greedy length, vocabulary, RMSNorm and llama.cpp driver.
from gen_moe_fixtures import (GREEDY, N_VOCAB, TOKENS, add_byte_vocab, llamacpp_quantized,  # noqa: E402
                              llamacpp_run, rmsnorm)

MIN_GAP = 1e-2
CROSS_TOL = 1e-3
M = dict(n_embd=32, n_heads=4, n_kv_heads=2, head_dim=8, n_layers=3, n_expert=4, k=2,
         n_ff_exp=32, window=8, eps=1e-5, rope_base=150000.0, n_ctx=64, yarn_factor=4.0,
         yarn_orig_ctx=16, beta_fast=32.0, beta_slow=1.0, seed=500)
ALPHA, LIMIT = 1.702, 7.0


def random_weights(seed):
    """name -> float64 array in numpy (rows, cols) order; experts (n_expert, rows, cols)."""
    rng = np.random.default_rng(seed)
    d, hd = M["n_embd"], M["head_dim"]
    q_dim, kv_dim = M["n_heads"] * hd, M["n_kv_heads"] * hd
    e, ff = M["n_expert"], M["n_ff_exp"]
    mat = lambda *shape, std=0.15: rng.normal(0.0, std, shape)
    norm = lambda n: 1.0 + 0.2 * rng.normal(0.0, 1.0, n)
    w = {"token_embd.weight": mat(N_VOCAB, d, std=1.0), "output_norm.weight": norm(d),
         "output.weight": mat(N_VOCAB, d)}
    for il in range(M["n_layers"]):
        b = f"blk.{il}."
        w[b + "attn_norm.weight"] = norm(d)
        w[b + "attn_q.weight"], w[b + "attn_q.bias"] = mat(q_dim, d, std=0.3), mat(q_dim)
        w[b + "attn_k.weight"], w[b + "attn_k.bias"] = mat(kv_dim, d, std=0.3), mat(kv_dim)
        w[b + "attn_v.weight"], w[b + "attn_v.bias"] = mat(kv_dim, d), mat(kv_dim)
        w[b + "attn_output.weight"], w[b + "attn_output.bias"] = mat(d, q_dim), mat(d)
        w[b + "attn_sinks.weight"] = rng.normal(1.0, 1.0, M["n_heads"])
        w[b + "post_attention_norm.weight"] = norm(d)
        w[b + "ffn_gate_inp.weight"], w[b + "ffn_gate_inp.bias"] = mat(e, d, std=0.5), mat(e, std=0.5)
        # gate/up large enough that swiglu_oai's clamps at 7 act on some elements
        w[b + "ffn_gate_exps.weight"], w[b + "ffn_gate_exps.bias"] = mat(e, ff, d, std=0.7), mat(e, ff)
        w[b + "ffn_up_exps.weight"], w[b + "ffn_up_exps.bias"] = mat(e, ff, d, std=0.7), mat(e, ff)
        w[b + "ffn_down_exps.weight"], w[b + "ffn_down_exps.bias"] = mat(e, d, ff, std=0.05), mat(e, d)
    return {k: v.astype(np.float32).astype(np.float64) for k, v in w.items()}


EXPERT_MATRICES = ("ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight")


def mxfp4_roundtrip(gguf, w):
    """The weights as the MXFP4 file holds them: the expert matrices through gguf-py's MXFP4."""
    import gguf.quants
    out = dict(w)
    for name, a in w.items():
        if name.endswith(EXPERT_MATRICES):
            q = gguf.quants.quantize(a.astype(np.float32), gguf.GGMLQuantizationType.MXFP4)
            out[name] = gguf.quants.dequantize(q, gguf.GGMLQuantizationType.MXFP4).astype(
                np.float64).reshape(a.shape)
    return out


# ---- the float64 reference forward pass ---------------------------------------------------------

def yarn_angles(t):
    """cos, sin (t, hd/2) of ggml's rope_yarn: ext_factor 1, ramp over ggml_rope_yarn_corr_dims,
    cos/sin times 1 + 0.1 ln(factor) (llama.cpp's yarn_attn_factor cancels its own mscale)."""
    hd, base = M["head_dim"], M["rope_base"]
    corr = lambda beta: hd * math.log(M["yarn_orig_ctx"] / (beta * 2 * math.pi)) / (2 * math.log(base))
    low = max(0.0, math.floor(corr(M["beta_fast"])))
    high = min(hd - 1.0, math.ceil(corr(M["beta_slow"])))
    i = np.arange(hd // 2)
    extrap = np.arange(t)[:, None] * base ** (-2.0 * i / hd)[None, :]
    interp = extrap / M["yarn_factor"]
    ramp = 1.0 - np.clip((i - low) / max(0.001, high - low), 0.0, 1.0)
    theta = interp * (1 - ramp) + extrap * ramp
    mscale = 1.0 + 0.1 * math.log(M["yarn_factor"])
    return np.cos(theta) * mscale, np.sin(theta) * mscale


def rope_neox(x, n_heads, cs):
    t, hd = x.shape[0], M["head_dim"]
    x = x.reshape(t, n_heads, hd)
    c, s = cs[0][:t, None, :], cs[1][:t, None, :]
    a, b = x[..., :hd // 2], x[..., hd // 2:]
    return np.concatenate([a * c - b * s, a * s + b * c], axis=-1).reshape(t, -1)


def swiglu_oai(gate, up, clamp=True):
    x = np.minimum(gate, LIMIT) if clamp else gate
    y = np.clip(up, -LIMIT, LIMIT) if clamp else up
    return x / (1.0 + np.exp(-ALPHA * x)) * (y + 1.0)


def forward(w, tokens, sinks=True, window=True, clamp=True, softmax_over_k=True, stats=None):
    """Logits (T, n_vocab) of the whole sequence, and the smallest routing gap."""
    nh, nkv, hd, eps = M["n_heads"], M["n_kv_heads"], M["head_dim"], M["eps"]
    t = len(tokens)
    x = w["token_embd.weight"][tokens]
    cs = yarn_angles(t)
    min_gap = np.inf
    pos = np.arange(t)
    for il in range(M["n_layers"]):
        g = lambda name: w[f"blk.{il}.{name}"]
        masked = pos[None, :] > pos[:, None]
        if window and il % 2 == 0:  # llama.cpp: windowed when p - j >= n_swa is masked
            masked |= pos[:, None] - pos[None, :] >= M["window"]
        h = rmsnorm(x, g("attn_norm.weight"), eps)
        q = h @ g("attn_q.weight").T + g("attn_q.bias")
        k = h @ g("attn_k.weight").T + g("attn_k.bias")
        v = h @ g("attn_v.weight").T + g("attn_v.bias")
        q, k = rope_neox(q, nh, cs), rope_neox(k, nkv, cs)
        att = np.empty_like(q)
        for head in range(nh):
            kvh = head // (nh // nkv)
            qs, ks = q[:, head * hd:(head + 1) * hd], k[:, kvh * hd:(kvh + 1) * hd]
            s = np.where(masked, -np.inf, qs @ ks.T / np.sqrt(hd))
            sink = g("attn_sinks.weight")[head] if sinks else -np.inf
            m = np.maximum(s.max(axis=1, keepdims=True), sink)
            p = np.exp(s - m)
            p /= p.sum(axis=1, keepdims=True) + np.exp(sink - m)
            att[:, head * hd:(head + 1) * hd] = p @ v[:, kvh * hd:(kvh + 1) * hd]
        x = x + att @ g("attn_output.weight").T + g("attn_output.bias")
        h = rmsnorm(x, g("post_attention_norm.weight"), eps)
        logits = h @ g("ffn_gate_inp.weight").T + g("ffn_gate_inp.bias")
        srt = np.sort(logits, axis=1)[:, ::-1]
        min_gap = min(min_gap, float((srt[:, M["k"] - 1] - srt[:, M["k"]]).min()))
        out = np.zeros_like(x)
        for tok in range(t):
            top = np.argsort(-logits[tok], kind="stable")[:M["k"]]
            z = logits[tok, top] if softmax_over_k else logits[tok]
            p = np.exp(z - z.max())
            p /= p.sum()
            wt = p if softmax_over_k else p[top]
            for r, e in enumerate(top):
                gate = g("ffn_gate_exps.weight")[e] @ h[tok] + g("ffn_gate_exps.bias")[e]
                up = g("ffn_up_exps.weight")[e] @ h[tok] + g("ffn_up_exps.bias")[e]
                if stats is not None:
                    stats["clamped"] += int((gate > LIMIT).sum() + (np.abs(up) > LIMIT).sum())
                    stats["elements"] += 2 * gate.size
                a = swiglu_oai(gate, up, clamp)
                out[tok] += wt[r] * (g("ffn_down_exps.weight")[e] @ a + g("ffn_down_exps.bias")[e])
        x = x + out
    x = rmsnorm(x, w["output_norm.weight"], eps)
    return x @ w["output.weight"].T, min_gap


def reference(w):
    """Prompt logits, greedy ids, and the smallest routing gap over prompt and continuation."""
    seq = list(TOKENS)
    for _ in range(GREEDY):
        logits, _ = forward(w, seq)
        seq.append(int(np.argmax(logits[-1])))
    logits, gap = forward(w, seq[:-1])
    return logits[:len(TOKENS)], seq[len(TOKENS):], gap


# ---- GGUF and llama.cpp -------------------------------------------------------------------------

def write_gguf(gguf, path, w, expert_type):
    g = gguf.GGUFWriter(path, "gpt-oss")
    g.add_name("tiny random gpt-oss")
    g.add_file_type(38 if expert_type == "MXFP4" else 0)  # MOSTLY_MXFP4_MOE, ALL_F32
    g.add_context_length(M["n_ctx"])
    g.add_embedding_length(M["n_embd"])
    g.add_block_count(M["n_layers"])
    g.add_feed_forward_length(M["n_ff_exp"])
    g.add_head_count(M["n_heads"])
    g.add_head_count_kv(M["n_kv_heads"])
    g.add_key_length(M["head_dim"])
    g.add_value_length(M["head_dim"])
    g.add_layer_norm_rms_eps(M["eps"])
    g.add_rope_freq_base(M["rope_base"])
    g.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    g.add_rope_scaling_factor(M["yarn_factor"])
    g.add_rope_scaling_orig_ctx_len(M["yarn_orig_ctx"])
    g.add_sliding_window(M["window"])
    g.add_expert_count(M["n_expert"])
    g.add_expert_used_count(M["k"])
    g.add_expert_feed_forward_length(M["n_ff_exp"])
    add_byte_vocab(g)
    for name, a in w.items():  # numpy (.., rows, cols) is ggml [cols, rows, ..]
        a = np.ascontiguousarray(a, dtype=np.float32)
        if expert_type == "MXFP4" and name.endswith(EXPERT_MATRICES):
            qt = gguf.GGMLQuantizationType.MXFP4
            g.add_tensor(name, gguf.quants.quantize(a, qt), raw_dtype=qt)  # shape from the bytes
        else:
            g.add_tensor(name, a)
    g.write_header_to_file()
    g.write_kv_data_to_file()
    g.write_tensors_to_file()
    g.close()


def rounded(logits):
    return [[float(f"{x:.9g}") for x in r] for r in logits.tolist()]


def main():
    import gguf
    import gguf.quants

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="tests/fixtures")
    ap.add_argument("--expert-type", choices=["F32", "MXFP4"], default="F32")
    ap.add_argument("--no-llamacpp", action="store_true",
                    help="write model.gguf and the numpy logits only (no llama.cpp in the venv)")
    args = ap.parse_args()
    mxfp4 = args.expert_type == "MXFP4"
    seed = M["seed"]
    while True:
        w = random_weights(seed)
        wq = mxfp4_roundtrip(gguf, w) if mxfp4 else w
        ref, ref_ids, gap = reference(wq)
        if gap >= MIN_GAP:
            break
        print(f"gptoss: seed {seed}: routing gap {gap:.2e} < {MIN_GAP}, redrawing")
        seed += 1
    stats = {"clamped": 0, "elements": 0}
    forward(wq, TOKENS, stats=stats)
    print(f"gptoss: swiglu_oai clamps {stats['clamped']} of {stats['elements']} gate/up values")
    for what, edit in {"sinks dropped": dict(sinks=False), "window off": dict(window=False),
                       "swiglu clamp off": dict(clamp=False),
                       "softmax over all experts": dict(softmax_over_k=False)}.items():
        delta = np.abs(forward(wq, TOKENS, **edit)[0] - ref).max()
        print(f"gptoss: max |logit change| with {what}: {delta:.4f}")
    d = os.path.join(args.out, "family_moe_gptoss" + ("_mxfp4" if mxfp4 else ""))
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "model.gguf")
    write_gguf(gguf, path, w, args.expert_type)
    settings = dict(n_ctx=M["n_ctx"], n_batch=64, n_threads=2, n_threads_batch=2,
                    flash_attn=False, type_k=0, type_v=0, logits_all=True, n_gpu_layers=0,
                    seed=1234)
    record = {"generator": "tools/gen_gptoss_fixture.py", "expert_type": args.expert_type,
              "seed": seed, "min_routing_gap": gap, "n_expert": M["n_expert"],
              "n_expert_used": M["k"], "sliding_window": M["window"], "tokens": TOKENS}
    failed = False
    if args.no_llamacpp:
        record["logits"], record["greedy_ids"] = rounded(ref), ref_ids
        record["judge"] = "numpy_f64 (llama.cpp not run)"
    else:
        import llama_cpp
        logits, ids = llamacpp_run(llama_cpp, path, settings)
        diff = float(np.abs(logits - ref).max())
        record.update({"llama_cpp_python": llama_cpp.__version__,
                       "settings": {**settings, "eval": "tokens in one batch, then one per step"},
                       "max_abs_diff_vs_numpy_f64": diff, "greedy_ids": ids,
                       "logits": rounded(logits)})
        same = ids == ref_ids
        print(f"gptoss {args.expert_type}: seed {seed}, min routing gap {gap:.3e}, max |llama.cpp "
              f"- numpy f64| = {diff:.2e}, greedy {ids} {'==' if same else '!='} numpy's "
              f"{ref_ids}, logits std {ref.std():.3f}")
        failed = not mxfp4 and (diff > CROSS_TOL or not same)
        if not mxfp4:  # llama.cpp's own Q8_0 and Q4_K_M of it (gen_moe_fixtures' record)
            import tempfile
            with tempfile.TemporaryDirectory() as tmp:
                quant = llamacpp_quantized(llama_cpp, gguf, path, tmp, settings)
            with open(os.path.join(d, "llamacpp_quant.json"), "w") as out:
                json.dump({"generator": "tools/gen_gptoss_fixture.py",
                           "llama_cpp_python": llama_cpp.__version__, "tokens": TOKENS, **quant},
                          out, separators=(",", ":"))
                out.write("\n")
    if mxfp4:
        record["numpy_f64_logits"], record["numpy_f64_greedy_ids"] = rounded(ref), ref_ids
    with open(os.path.join(d, "llamacpp_logits.json"), "w") as out:
        json.dump(record, out, separators=(",", ":"))
        out.write("\n")
    with open(os.path.join(d, "README.md"), "w") as out:
        out.write(f"# {os.path.basename(d)}\n\nA tiny random gpt-oss GGUF ({M['n_layers']} layers, "
                  f"{M['n_expert']} experts top-{M['k']}, window {M['window']} on even layers, "
                  f"attention sinks, YaRN; expert matrices {args.expert_type}) written by gguf-py "
                  "(model.gguf) and its reference logits (llamacpp_logits.json: llama.cpp's"
                  + ("; numpy_f64_logits, the float64 pass over the dequantized weights, is the "
                     "judge" if mxfp4 else "") +
                  "). Generated by `tools/gen_gptoss_fixture.py"
                  + (" --expert-type MXFP4" if mxfp4 else "") +
                  "`; tested in tests/test_model_gptoss.cpp.\n")
    for name in os.listdir(d):
        os.chmod(os.path.join(d, name), 0o644)
    if failed:
        sys.exit("gen_gptoss_fixture: llama.cpp disagrees with the float64 reference (see above)")


if __name__ == "__main__":
    main()
