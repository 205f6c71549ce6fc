#!/usr/bin/env python3
"""Tiny random-weight mixture-of-experts GGUFs and llama.cpp's logits for them, for
tests/test_model_moe.cpp (and the --moe-stats tests):

    ~/.cache/llmctl/ref-venv/bin/python tools/gen_moe_fixtures.py --out tests/fixtures

(the venv of scripts/install-reference.sh: llama-cpp-python 0.3.36, which vendors llama.cpp
0c1e570, gguf-py and numpy; no torch.)

Writes, per family, tests/fixtures/family_moe_<name>/:
  model.gguf            random weights (numpy, seeded; std 0.15, router 0.5, norm weights
                        1 + 0.2 N(0,1)) written by gguf-py under llama.cpp's tensor names, the
                        expert tensors 3-D [n_embd, n_ff_exp, n_expert] ([n_ff_exp, n_embd,
                        n_expert] for down), F32; a byte-level sentencepiece vocabulary of
                        3 + 256 tokens
  llamacpp_logits.json  llama.cpp's logits at every position of TOKENS on its precise CPU path
                        (flash_attn off, F32 KV cache, logits_all, 2 threads; the tokens in one
                        batch), then GREEDY greedy ids, one token per step
  llamacpp_quant.json   per mix (Q8_0, Q4_K_M): the type llama.cpp's llama_model_quantize gives
                        each tensor of model.gguf, three sums of its dequantized values (x_i,
                        x_i^2, x_i * i / n: equal sums mean equal blocks), and llama.cpp's logits
                        and greedy ids on that quantized file (same settings; its quantized
                        matmuls round the activations to Q8_0 too, so these differ from an
                        exact product by some 0.05; the quantized files are not kept)
Families (hidden 32, 4 heads, 2 KV heads, head_dim 8, 2 layers, untied output):
  mixtral   GGUF arch llama with llama.expert_count 4, expert_used_count 2: every FFN routed,
            expert size feed_forward_length 64, top-2 softmax weights renormalised
  qwen2moe  4 experts top-2 of expert_feed_forward_length 32 (feed_forward_length 80, so that
            neither n_ff / k nor n_ff is the answer), weights NOT renormalised, q/k/v biases, a
            shared expert of expert_shared_feed_forward_length 48 scaled by
            sigmoid(ffn_gate_inp_shexp . x)
  qwen3moe  8 experts top-4 of expert_feed_forward_length 16 (feed_forward_length 96),
            renormalised, QK-norm per head
It prints how much each family's routing rule moves the logits (renormalisation flipped,
qwen2moe's shared expert ungated). Before writing anything the generator runs its own float64 numpy forward pass of each model
(the rules of llama.cpp's build_moe_ffn and src/models/{llama,qwen2moe,qwen3moe}.cpp), over the
prompt and its greedy continuation, and
  * redraws the weights (next seed) until the router's gap between each token's k-th and
    (k+1)-th expert logit is at least MIN_GAP in every layer, so that no float32 rounding can
    flip a routing decision between implementations (the minimum gap is printed and stored);
  * checks llama.cpp's logits against it (within CROSS_TOL) and its greedy ids equal: a wrong
    GGUF key or tensor layout fails here, at generation time.
"""
import argparse
import json
import os
import sys
import tempfile

import numpy as np

TOKENS = [1, 17, 42, 99, 3, 150, 7, 64, 200, 11, 128, 31, 77, 250, 5, 180, 23, 90, 141, 66, 219,
          48, 12, 170]
GREEDY = 8
N_VOCAB = 3 + 256
MIN_GAP = 1e-2      # router logits, k-th best minus (k+1)-th
CROSS_TOL = 1e-3    # llama.cpp (float32) against the numpy float64 forward pass
COMMON = dict(n_embd=32, n_heads=4, n_kv_heads=2, n_layers=2, eps=1e-6, rope_base=10000.0, n_ctx=64)
FAMILIES = {
    "mixtral": dict(arch="llama", neox=False, n_expert=4, k=2, n_ff=64, n_ff_exp=None,
                    n_ff_shexp=None, norm_w=True, qkv_bias=False, qk_norm=False, seed=100),
    "qwen2moe": dict(arch="qwen2moe", neox=True, n_expert=4, k=2, n_ff=80, n_ff_exp=32,
                     n_ff_shexp=48, norm_w=False, qkv_bias=True, qk_norm=False, seed=200),
    "qwen3moe": dict(arch="qwen3moe", neox=True, n_expert=8, k=4, n_ff=96, n_ff_exp=16,
                     n_ff_shexp=None, norm_w=True, qkv_bias=False, qk_norm=True, seed=300),
}


def expert_ff(f):
    return f["n_ff_exp"] or f["n_ff"]


def random_weights(f, seed):
    """name -> float64 array in numpy (rows, cols) order; experts (n_expert, rows, cols)."""
    rng = np.random.default_rng(seed)
    d, hd = COMMON["n_embd"], COMMON["n_embd"] // COMMON["n_heads"]
    q_dim, kv_dim = COMMON["n_heads"] * hd, COMMON["n_kv_heads"] * hd
    e, ff = f["n_expert"], expert_ff(f)
    mat = lambda *shape, std=0.15: rng.normal(0.0, std, shape)
    norm = lambda n: 1.0 + 0.2 * rng.normal(0.0, 1.0, n)
    w = {"token_embd.weight": mat(N_VOCAB, d, std=1.0), "output_norm.weight": norm(d),
         "output.weight": mat(N_VOCAB, d)}
    for il in range(COMMON["n_layers"]):
        b = f"blk.{il}."
        w[b + "attn_norm.weight"] = norm(d)
        w[b + "attn_q.weight"] = mat(q_dim, d)
        w[b + "attn_k.weight"] = mat(kv_dim, d)
        w[b + "attn_v.weight"] = mat(kv_dim, d)
        w[b + "attn_output.weight"] = mat(d, q_dim)
        if f["qkv_bias"]:
            w[b + "attn_q.bias"] = mat(q_dim)
            w[b + "attn_k.bias"] = mat(kv_dim)
            w[b + "attn_v.bias"] = mat(kv_dim)
        if f["qk_norm"]:
            w[b + "attn_q_norm.weight"] = norm(hd)
            w[b + "attn_k_norm.weight"] = norm(hd)
        w[b + "ffn_norm.weight"] = norm(d)
        w[b + "ffn_gate_inp.weight"] = mat(e, d, std=0.5)
        w[b + "ffn_gate_exps.weight"] = mat(e, ff, d)
        w[b + "ffn_up_exps.weight"] = mat(e, ff, d)
        w[b + "ffn_down_exps.weight"] = mat(e, d, ff)
        if f["n_ff_shexp"]:
            w[b + "ffn_gate_inp_shexp.weight"] = mat(d, std=0.5)
            w[b + "ffn_gate_shexp.weight"] = mat(f["n_ff_shexp"], d)
            w[b + "ffn_up_shexp.weight"] = mat(f["n_ff_shexp"], d)
            w[b + "ffn_down_shexp.weight"] = mat(d, f["n_ff_shexp"])
    # The writer stores float32: the reference computes with exactly those values.
    return {k: v.astype(np.float32).astype(np.float64) for k, v in w.items()}


# ---- the float64 reference forward pass ---------------------------------------------------------

def rmsnorm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope(x, n_heads, neox):
    t, hd = x.shape[0], x.shape[1] // n_heads
    x = x.reshape(t, n_heads, hd)
    inv = COMMON["rope_base"] ** (-np.arange(0, hd, 2) / hd)
    ang = np.arange(t)[:, None] * inv[None, :]
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    if neox:  # pairs (i, i + hd/2)
        a, b = x[..., :hd // 2], x[..., hd // 2:]
        out = np.concatenate([a * c - b * s, a * s + b * c], axis=-1)
    else:     # adjacent pairs (2i, 2i + 1)
        a, b = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2], out[..., 1::2] = a * c - b * s, a * s + b * c
    return out.reshape(t, -1)


def silu(x):
    return x / (1.0 + np.exp(-x))


def forward(f, w, tokens):
    """Logits (T, n_vocab) of the whole sequence, and the smallest routing gap."""
    nh, nkv = COMMON["n_heads"], COMMON["n_kv_heads"]
    hd, eps = COMMON["n_embd"] // nh, COMMON["eps"]
    t = len(tokens)
    x = w["token_embd.weight"][tokens]
    min_gap = np.inf
    mask = np.triu(np.full((t, t), -np.inf), 1)
    for il in range(COMMON["n_layers"]):
        g = lambda name: w[f"blk.{il}.{name}"]
        h = rmsnorm(x, g("attn_norm.weight"), eps)
        q, k, v = h @ g("attn_q.weight").T, h @ g("attn_k.weight").T, h @ g("attn_v.weight").T
        if f["qkv_bias"]:
            q, k, v = q + g("attn_q.bias"), k + g("attn_k.bias"), v + g("attn_v.bias")
        if f["qk_norm"]:
            q = rmsnorm(q.reshape(t, nh, hd), g("attn_q_norm.weight"), eps).reshape(t, -1)
            k = rmsnorm(k.reshape(t, nkv, hd), g("attn_k_norm.weight"), eps).reshape(t, -1)
        q, k = rope(q, nh, f["neox"]), rope(k, nkv, f["neox"])
        att = np.empty_like(q)
        for head in range(nh):
            kvh = head // (nh // nkv)
            qs, ks = q[:, head * hd:(head + 1) * hd], k[:, kvh * hd:(kvh + 1) * hd]
            s = qs @ ks.T / np.sqrt(hd) + mask
            p = np.exp(s - s.max(axis=1, keepdims=True))
            p /= p.sum(axis=1, keepdims=True)
            att[:, head * hd:(head + 1) * hd] = p @ v[:, kvh * hd:(kvh + 1) * hd]
        x = x + att @ g("attn_output.weight").T
        h = rmsnorm(x, g("ffn_norm.weight"), eps)
        # build_moe_ffn: softmax probabilities, the k largest, (renormalised), weighted sum.
        logits = h @ g("ffn_gate_inp.weight").T
        srt = np.sort(logits, axis=1)[:, ::-1]
        min_gap = min(min_gap, float((srt[:, f["k"] - 1] - srt[:, f["k"]]).min()))
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        out = np.zeros_like(x)
        for tok in range(t):
            top = np.argsort(-p[tok], kind="stable")[:f["k"]]
            wt = p[tok, top]
            if f["norm_w"]:
                wt = wt / wt.sum()
            for r, e in enumerate(top):
                a = silu(g("ffn_gate_exps.weight")[e] @ h[tok]) * (g("ffn_up_exps.weight")[e] @ h[tok])
                out[tok] += wt[r] * (g("ffn_down_exps.weight")[e] @ a)
        if f["n_ff_shexp"]:
            a = silu(h @ g("ffn_gate_shexp.weight").T) * (h @ g("ffn_up_shexp.weight").T)
            gate = 1.0 / (1.0 + np.exp(-(h @ g("ffn_gate_inp_shexp.weight"))))
            if f.get("ungated"):
                gate = np.ones_like(gate)
            out = out + (a @ g("ffn_down_shexp.weight").T) * gate[:, None]
        x = x + out
    x = rmsnorm(x, w["output_norm.weight"], eps)
    return x @ w["output.weight"].T, min_gap


def reference(f, w):
    """Prompt logits, greedy ids, and the smallest routing gap over prompt and continuation."""
    seq = list(TOKENS)
    for _ in range(GREEDY):
        logits, _ = forward(f, w, seq)
        seq.append(int(np.argmax(logits[-1])))
    logits, gap = forward(f, w, seq[:-1])  # every position that chose a token
    return logits[:len(TOKENS)], seq[len(TOKENS):], gap


# ---- GGUF and llama.cpp -------------------------------------------------------------------------

def add_byte_vocab(g):
    """A byte-level sentencepiece vocabulary of N_VOCAB tokens (<unk>, <s>, </s>, 256 bytes)."""
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    g.add_tokenizer_model("llama")
    g.add_token_list(tokens)
    g.add_token_scores([0.0] * len(tokens))
    g.add_token_types([2, 3, 3] + [6] * 256)  # UNKNOWN, CONTROL, CONTROL, BYTE
    g.add_unk_token_id(0)
    g.add_bos_token_id(1)
    g.add_eos_token_id(2)


def write_gguf(gguf, path, family, f, w):
    g = gguf.GGUFWriter(path, f["arch"])
    g.add_name(f"tiny random moe {family}")
    g.add_file_type(0)  # ALL_F32
    g.add_context_length(COMMON["n_ctx"])
    g.add_embedding_length(COMMON["n_embd"])
    g.add_block_count(COMMON["n_layers"])
    g.add_feed_forward_length(f["n_ff"])
    g.add_head_count(COMMON["n_heads"])
    g.add_head_count_kv(COMMON["n_kv_heads"])
    g.add_layer_norm_rms_eps(COMMON["eps"])
    g.add_rope_freq_base(COMMON["rope_base"])
    g.add_expert_count(f["n_expert"])
    g.add_expert_used_count(f["k"])
    if f["n_ff_exp"]:
        g.add_expert_feed_forward_length(f["n_ff_exp"])
    if f["n_ff_shexp"]:
        g.add_expert_shared_feed_forward_length(f["n_ff_shexp"])
    add_byte_vocab(g)
    for name, a in w.items():  # numpy (.., rows, cols) is ggml [cols, rows, ..]
        g.add_tensor(name, np.ascontiguousarray(a, dtype=np.float32))
    g.write_header_to_file()
    g.write_kv_data_to_file()
    g.write_tensors_to_file()
    g.close()


def llamacpp_run(llama_cpp, path, settings):
    llm = llama_cpp.Llama(path, verbose=False, **settings)
    llm.reset()
    llm.eval(TOKENS)
    logits = np.array(llm.scores[:len(TOKENS)], dtype=np.float64)
    ids, row = [], logits[-1]
    for i in range(GREEDY):
        ids.append(int(np.argmax(row)))
        if i + 1 < GREEDY:
            llm.eval([ids[-1]])
            row = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)
    del llm
    return logits, ids


QUANT_MIXES = {"q8_0": "LLAMA_FTYPE_MOSTLY_Q8_0", "q4_k_m": "LLAMA_FTYPE_MOSTLY_Q4_K_M"}


def llamacpp_quantized(llama_cpp, gguf, path, tmp, settings):
    """mix -> {types, logits, greedy_ids} of llama.cpp's own quantization of `path`."""
    import ctypes
    out = {}
    for mix, ftype in QUANT_MIXES.items():
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = getattr(llama_cpp, ftype)
        params.nthread = 2
        qpath = os.path.join(tmp, f"{mix}.gguf")
        if llama_cpp.llama_model_quantize(path.encode(), qpath.encode(), ctypes.byref(params)) != 0:
            sys.exit(f"gen_moe_fixtures: llama_model_quantize {mix} of {path} failed")
        types, values = {}, {}
        for t in gguf.GGUFReader(qpath).tensors:
            types[t.name] = t.tensor_type.name
            x = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float64).ravel()
            i = np.arange(x.size, dtype=np.float64) / x.size
            values[t.name] = [float(x.sum()), float((x * x).sum()), float((i * x).sum())]
        logits, ids = llamacpp_run(llama_cpp, qpath, settings)
        out[mix] = {"types": types, "dequantized_sums": values, "greedy_ids": ids,
                    "logits": [[float(f"{x:.9g}") for x in r] for r in logits.tolist()]}
        os.remove(qpath)
    return out


def main():
    import gguf
    import gguf.quants
    import llama_cpp

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="tests/fixtures")
    ap.add_argument("--only", choices=list(FAMILIES))
    args = ap.parse_args()
    settings = dict(n_ctx=COMMON["n_ctx"], n_batch=64, n_threads=2, n_threads_batch=2,
                    flash_attn=False, type_k=0, type_v=0, logits_all=True, n_gpu_layers=0,
                    seed=1234)
    failed = False
    for family, f in FAMILIES.items():
        if args.only and family != args.only:
            continue
        seed = f["seed"]
        while True:
            w = random_weights(f, seed)
            ref, ref_ids, gap = reference(f, w)
            if gap >= MIN_GAP:
                break
            print(f"{family}: seed {seed}: routing gap {gap:.2e} < {MIN_GAP}, redrawing")
            seed += 1
        # How much each rule moves the logits: far above the tests' 1e-3.
        edits = {"renormalisation flipped": {"norm_w": not f["norm_w"]}}
        if f["n_ff_shexp"]:
            edits["the shared expert's gate"] = {"ungated": True}
        for what, edit in edits.items():
            delta = np.abs(forward({**f, **edit}, w, TOKENS)[0] - ref).max()
            print(f"{family}: max |logit change| with {what}: {delta:.4f}")
        d = os.path.join(args.out, f"family_moe_{family}")
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "model.gguf")
        write_gguf(gguf, path, family, f, w)
        logits, ids = llamacpp_run(llama_cpp, path, settings)
        diff = float(np.abs(logits - ref).max())
        ok = diff <= CROSS_TOL and ids == ref_ids
        failed = failed or not ok
        print(f"{family}: seed {seed}, min routing gap {gap:.3e}, max |llama.cpp - numpy f64| = "
              f"{diff:.2e} (bound {CROSS_TOL}), greedy {ids} {'==' if ids == ref_ids else '!='} "
              f"numpy's {ref_ids}, logits std {ref.std():.3f}{'' if ok else '  FAILED'}")
        with open(os.path.join(d, "llamacpp_logits.json"), "w") as out:
            json.dump({"generator": "tools/gen_moe_fixtures.py",
                       "llama_cpp_python": llama_cpp.__version__,
                       "settings": {**settings, "eval": "tokens in one batch, then one per step"},
                       "seed": seed, "min_routing_gap": gap, "max_abs_diff_vs_numpy_f64": diff,
                       "n_expert": f["n_expert"], "n_expert_used": f["k"], "tokens": TOKENS,
                       "greedy_ids": ids,
                       "logits": [[float(f"{x:.9g}") for x in r] for r in logits.tolist()]},
                      out, separators=(",", ":"))
            out.write("\n")
        with tempfile.TemporaryDirectory() as tmp:
            quant = llamacpp_quantized(llama_cpp, gguf, path, tmp, settings)
        with open(os.path.join(d, "llamacpp_quant.json"), "w") as out:
            json.dump({"generator": "tools/gen_moe_fixtures.py",
                       "llama_cpp_python": llama_cpp.__version__, "tokens": TOKENS, **quant},
                      out, separators=(",", ":"))
            out.write("\n")
        with open(os.path.join(d, "README.md"), "w") as out:
            out.write(f"# family_moe_{family}\n\nA tiny random mixture-of-experts GGUF "
                      f"(architecture {f['arch']}, {f['n_expert']} experts, top-{f['k']}) written "
                      "by gguf-py (model.gguf), llama.cpp's logits for it\n"
                      "(llamacpp_logits.json) and for its own Q8_0 and Q4_K_M quantizations of it "
                      "(llamacpp_quant.json). Generated by tools/gen_moe_fixtures.py; tested in "
                      "tests/test_model_moe.cpp.\n")
        for name in os.listdir(d):
            os.chmod(os.path.join(d, name), 0o644)
    if failed:
        sys.exit("gen_moe_fixtures: llama.cpp disagrees with the float64 reference (see above)")


if __name__ == "__main__":
    main()
