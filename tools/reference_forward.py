#!/usr/bin/env python3
"""Independent float64 reference of the Llama forward pass, for tests/test_model_forward.cpp.

Reads the tensors with gguf-py (pip install gguf numpy), runs the prompt through a plain numpy
float64 implementation written from the Llama paper / llama.cpp semantics (not from llmctl's
C++), and writes the logits at every prompt position as JSON.

    python3 tools/reference_forward.py ../shared/models/stories260K.gguf \
        --tokens 1 403 407 261 378 --out tests/fixtures/stories260K_logits.json

Conventions (those of llama.cpp for arch "llama"):
  * GGUF shapes are ggml order; gguf-py hands back numpy arrays with the dims reversed, so a
    weight is W (n_out, n_in) and y = W @ x.
  * RoPE "normal" pairing: dims (2i, 2i+1) of each head rotate by p * base^(-2i / n_rot).
    (convert scripts permute Q/K rows so this matches the Hugging Face "rotate_half" model.)
  * GQA: query head h reads kv head h // (n_heads / n_kv_heads).
"""
import argparse
import json
import sys

import numpy as np
from gguf import GGUFReader


def field(reader, key, default=None):
    f = reader.fields.get(key)
    if f is None:
        return default
    v = f.parts[f.data[0]]
    if f.types and f.types[0].name == "STRING":
        return bytes(v).decode()
    return v[0].item()


def load(path):
    r = GGUFReader(path)
    arch = field(r, "general.architecture")
    if arch != "llama":
        sys.exit(f"reference_forward: only arch llama is implemented, got {arch}")
    cfg = {
        "n_embd": field(r, "llama.embedding_length"),
        "n_layers": field(r, "llama.block_count"),
        "n_heads": field(r, "llama.attention.head_count"),
        "n_kv_heads": field(r, "llama.attention.head_count_kv"),
        "eps": field(r, "llama.attention.layer_norm_rms_epsilon", 1e-5),
        "base": field(r, "llama.rope.freq_base", 10000.0),
    }
    cfg["head_dim"] = cfg["n_embd"] // cfg["n_heads"]
    cfg["n_rot"] = field(r, "llama.rope.dimension_count", cfg["head_dim"])
    w = {}
    for t in r.tensors:
        if t.tensor_type.name != "F32":
            sys.exit(f"reference_forward: tensor {t.name} is {t.tensor_type.name}; F32 only")
        shape = [int(d) for d in reversed(t.shape)]  # numpy order
        w[t.name] = np.array(t.data, dtype=np.float64).reshape(shape)
    if "output.weight" not in w:
        w["output.weight"] = w["token_embd.weight"]
    return cfg, w


def rmsnorm(x, g, eps):
    return x / np.sqrt(np.mean(x * x) + eps) * g


def rope(x, n_heads, head_dim, n_rot, pos, base):
    x = x.reshape(n_heads, head_dim).copy()
    i = np.arange(n_rot // 2, dtype=np.float64)
    theta = pos * base ** (-2.0 * i / n_rot)
    c, s = np.cos(theta), np.sin(theta)
    a, b = x[:, 0:n_rot:2].copy(), x[:, 1:n_rot:2].copy()
    x[:, 0:n_rot:2] = a * c - b * s
    x[:, 1:n_rot:2] = a * s + b * c
    return x.reshape(-1)


def forward(cfg, w, tokens):
    nh, nkv, hd = cfg["n_heads"], cfg["n_kv_heads"], cfg["head_dim"]
    group = nh // nkv
    ks = [[] for _ in range(cfg["n_layers"])]
    vs = [[] for _ in range(cfg["n_layers"])]
    out = []
    for pos, tok in enumerate(tokens):
        x = w["token_embd.weight"][tok].copy()
        for l in range(cfg["n_layers"]):
            p = f"blk.{l}."
            h = rmsnorm(x, w[p + "attn_norm.weight"], cfg["eps"])
            q = rope(w[p + "attn_q.weight"] @ h, nh, hd, cfg["n_rot"], pos, cfg["base"])
            k = rope(w[p + "attn_k.weight"] @ h, nkv, hd, cfg["n_rot"], pos, cfg["base"])
            v = w[p + "attn_v.weight"] @ h
            ks[l].append(k.reshape(nkv, hd))
            vs[l].append(v.reshape(nkv, hd))
            K = np.stack(ks[l])  # (t, nkv, hd)
            V = np.stack(vs[l])
            q = q.reshape(nh, hd)
            att = np.zeros((nh, hd))
            for hh in range(nh):
                g = hh // group
                s = K[:, g, :] @ q[hh] / np.sqrt(hd)
                a = np.exp(s - s.max())
                a /= a.sum()
                att[hh] = a @ V[:, g, :]
            x = x + w[p + "attn_output.weight"] @ att.reshape(-1)
            h = rmsnorm(x, w[p + "ffn_norm.weight"], cfg["eps"])
            gt = w[p + "ffn_gate.weight"] @ h
            up = w[p + "ffn_up.weight"] @ h
            x = x + w[p + "ffn_down.weight"] @ (gt / (1.0 + np.exp(-gt)) * up)
        h = rmsnorm(x, w["output_norm.weight"], cfg["eps"])
        out.append(w["output.weight"] @ h)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--tokens", type=int, nargs="+", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    cfg, w = load(args.model)
    logits = forward(cfg, w, args.tokens)
    doc = {
        "generator": "tools/reference_forward.py (numpy float64)",
        "model": args.model.split("/")[-1],
        "tokens": args.tokens,
        "argmax": [int(np.argmax(l)) for l in logits],
        # rounded to 1e-7: far below the 1e-4 test tolerance, keeps the fixture small
        "logits": [[round(float(v), 7) for v in l] for l in logits],
    }
    with open(args.out, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
