#!/usr/bin/env python3
"""Independent float64 reference of the forward pass, for the engine's reference-path tests.

Reads a GGUF file with gguf-py (pip install gguf numpy), dequantizes every tensor with gguf-py's
own numpy block decoders (gguf.quants; so a quantized file is judged as the function of its
dequantized weights), runs the prompt through a plain numpy float64 implementation written from
llama.cpp's and transformers' semantics (not from llmctl's C++), and writes the logits as JSON.

    # every logit of every position (tests/test_model_forward.cpp, stories260K in F32)
    python3 tools/reference_forward.py ../shared/models/stories260K.gguf \\
        --tokens 1 403 407 261 378 --out tests/fixtures/stories260K_logits.json
    # real files, compact: the listed positions, every STRIDE-th logit and the top 32
    # (tests/test_model_reference_real.cpp)
    python3 tools/reference_forward.py ../shared/models/SmolLM2-135M-Instruct.Q4_1.gguf \\
        --tokens-from tests/fixtures/llamacpp_smollm2.json --case chatml --positions 0 5 -1 --stride 61 \\
        --out tests/fixtures/reference_f64_smollm2.json
    python3 tools/reference_forward.py ~/.cache/llmctl/models/gemma-3-270m-q4_k_m.gguf \\
        --tokens-from tests/fixtures/llamacpp_gemma3_270m.json --case chat --positions 0 5 -1 --stride 331 \\
        --out tests/fixtures/reference_f64_gemma3_270m.json

Architectures (their llama.cpp semantics):
  llama   pre-norm, SwiGLU, RoPE pairing (2i, 2i+1) (convert scripts permute Q/K rows so this
          matches transformers' rotate_half), optional rope_freqs.weight divisors (Llama 3.1),
          linear rope scaling.
  qwen2   llama with q/k/v biases and NeoX pairing (i, i + n_rot/2).
  gemma3  embedding times sqrt(n_embd); norms before and after attention and FFN (weights in
          the file already hold 1 + w); per-head RMS norm of q and k; tanh-GELU GLU; NeoX
          pairing; layer il is global when (il + 1) % pattern == 0 (pattern 6), the others
          attend to positions p - j < sliding_window with RoPE base rope.freq_base_swa (10000)
          and no scaling; scores scaled by 1/sqrt(head_dim) (1/sqrt(n_embd/n_head) for the
          62-layer 27B); final_logit_softcapping when the file has it.
GGUF shapes are ggml order; gguf-py hands back numpy arrays with the dims reversed, so a weight
is W (n_out, n_in) and y = W @ x. GQA: query head h reads kv head h // (n_heads / n_kv_heads).
"""
import argparse
import json
import math
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize


def field(reader, key, default=None):
    f = reader.fields.get(key)
    if f is None:
        return default
    v = f.parts[f.data[0]]
    if f.types and f.types[0].name == "STRING":
        return bytes(v).decode()
    return v[0].item()


def config(r):
    arch = field(r, "general.architecture")
    if arch not in ("llama", "qwen2", "gemma3"):
        sys.exit(f"reference_forward: arch {arch} is not implemented (llama, qwen2, gemma3)")
    a = arch + "."
    c = {
        "arch": arch,
        "n_embd": field(r, a + "embedding_length"),
        "n_layers": field(r, a + "block_count"),
        "n_heads": field(r, a + "attention.head_count"),
        "eps": field(r, a + "attention.layer_norm_rms_epsilon", 1e-5),
        "base": field(r, a + "rope.freq_base", 10000.0),
        "neox": arch != "llama",
        "gemma": arch == "gemma3",
    }
    c["n_kv_heads"] = field(r, a + "attention.head_count_kv", c["n_heads"])
    c["head_dim"] = field(r, a + "attention.key_length", c["n_embd"] // c["n_heads"])
    c["n_rot"] = field(r, a + "rope.dimension_count", c["head_dim"])
    scaling = field(r, a + "rope.scaling.type", "none")
    if scaling not in ("none", "linear"):
        sys.exit(f"reference_forward: rope scaling {scaling} is not implemented")
    c["freq_scale"] = 1.0 / field(r, a + "rope.scaling.factor", 1.0) if scaling == "linear" else 1.0
    c["final_softcap"] = field(r, a + "final_logit_softcapping", 0.0)
    c["attn_scale"] = 1.0 / math.sqrt(c["head_dim"])
    n = c["n_layers"]
    c["window"] = [0] * n
    c["layer_base"] = [c["base"]] * n
    c["layer_freq_scale"] = [c["freq_scale"]] * n
    if arch == "gemma3":
        if n == 62:
            c["attn_scale"] = 1.0 / math.sqrt(c["n_embd"] // c["n_heads"])
        w = field(r, a + "attention.sliding_window", 0)
        pattern = field(r, a + "attention.sliding_window_pattern", 6)
        base_swa = field(r, a + "rope.freq_base_swa", 10000.0)
        for il in range(n):
            if w > 0 and (il + 1) % pattern != 0:
                c["window"][il] = w
                c["layer_base"][il] = base_swa
                c["layer_freq_scale"][il] = 1.0
    return c


def load(path):
    r = GGUFReader(path)
    c = config(r)
    w = {}
    for t in r.tensors:
        shape = [int(d) for d in reversed(t.shape)]  # numpy order
        data = dequantize(t.data, t.tensor_type)
        w[t.name] = np.asarray(data, dtype=np.float64).reshape(shape)
    if "output.weight" not in w:
        w["output.weight"] = w["token_embd.weight"]
    return c, w


def rmsnorm(x, g, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * g


def rope(x, n_heads, c, pos, base, freq_scale, factors):
    hd, n_rot = c["head_dim"], c["n_rot"]
    x = x.reshape(n_heads, hd).copy()
    i = np.arange(n_rot // 2, dtype=np.float64)
    theta = pos * freq_scale * base ** (-2.0 * i / n_rot)
    if factors is not None:
        theta = theta / factors
    cs, sn = np.cos(theta), np.sin(theta)
    if c["neox"]:
        i0, i1 = np.arange(n_rot // 2), np.arange(n_rot // 2) + n_rot // 2
    else:
        i0, i1 = np.arange(0, n_rot, 2), np.arange(1, n_rot, 2)
    a, b = x[:, i0].copy(), x[:, i1].copy()
    x[:, i0] = a * cs - b * sn
    x[:, i1] = a * sn + b * cs
    return x.reshape(-1)


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def forward(c, w, tokens):
    nh, nkv, hd, eps = c["n_heads"], c["n_kv_heads"], c["head_dim"], c["eps"]
    group = nh // nkv
    factors = w.get("rope_freqs.weight")
    ks = [[] for _ in range(c["n_layers"])]
    vs = [[] for _ in range(c["n_layers"])]
    out = []
    for pos, tok in enumerate(tokens):
        x = w["token_embd.weight"][tok].copy()
        if c["gemma"]:
            x *= math.sqrt(c["n_embd"])
        for il in range(c["n_layers"]):
            p = f"blk.{il}."
            h = rmsnorm(x, w[p + "attn_norm.weight"], eps)
            q = w[p + "attn_q.weight"] @ h
            k = w[p + "attn_k.weight"] @ h
            v = w[p + "attn_v.weight"] @ h
            if p + "attn_q.bias" in w:
                q, k, v = q + w[p + "attn_q.bias"], k + w[p + "attn_k.bias"], v + w[p + "attn_v.bias"]
            if p + "attn_q_norm.weight" in w:  # per head
                q = rmsnorm(q.reshape(nh, hd), w[p + "attn_q_norm.weight"], eps).reshape(-1)
                k = rmsnorm(k.reshape(nkv, hd), w[p + "attn_k_norm.weight"], eps).reshape(-1)
            base, fs = c["layer_base"][il], c["layer_freq_scale"][il]
            q = rope(q, nh, c, pos, base, fs, factors).reshape(nh, hd)
            k = rope(k, nkv, c, pos, base, fs, factors)
            ks[il].append(k.reshape(nkv, hd))
            vs[il].append(v.reshape(nkv, hd))
            first = max(0, pos - c["window"][il] + 1) if c["window"][il] > 0 else 0
            K = np.stack(ks[il][first:])  # (t, nkv, hd): the positions this layer sees
            V = np.stack(vs[il][first:])
            att = np.zeros((nh, hd))
            for hh in range(nh):
                g = hh // group
                s = K[:, g, :] @ q[hh] * c["attn_scale"]
                a = np.exp(s - s.max())
                a /= a.sum()
                att[hh] = a @ V[:, g, :]
            o = w[p + "attn_output.weight"] @ att.reshape(-1)
            if c["gemma"]:
                o = rmsnorm(o, w[p + "post_attention_norm.weight"], eps)
            x = x + o
            h = rmsnorm(x, w[p + "ffn_norm.weight"], eps)
            gt = w[p + "ffn_gate.weight"] @ h
            up = w[p + "ffn_up.weight"] @ h
            act = gelu_tanh(gt) if c["gemma"] else gt / (1.0 + np.exp(-gt))
            f = w[p + "ffn_down.weight"] @ (act * up)
            if c["gemma"]:
                f = rmsnorm(f, w[p + "post_ffw_norm.weight"], eps)
            x = x + f
        h = rmsnorm(x, w["output_norm.weight"], eps)
        logits = w["output.weight"] @ h
        if c["final_softcap"] > 0:
            logits = c["final_softcap"] * np.tanh(logits / c["final_softcap"])
        out.append(logits)
    return out


def compact_row(pos, logits, stride, top_n=32):
    top = np.argsort(-logits)[:top_n]
    return {
        "pos": pos,
        "argmax": int(np.argmax(logits)),
        "strided": [round(float(v), 6) for v in logits[::stride]],
        "top": [[int(i), round(float(logits[i]), 6)] for i in top],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--tokens", type=int, nargs="+")
    ap.add_argument("--tokens-from", help="a tools/llamacpp_reference.py output: a case's prompt ids")
    ap.add_argument("--case", help="with --tokens-from: the case's name (default: the first)")
    ap.add_argument("--positions", type=int, nargs="+",
                    help="compact output: only these positions (negative: from the end)")
    ap.add_argument("--stride", type=int, default=64, help="compact output: every STRIDE-th logit")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    if (args.tokens is None) == (args.tokens_from is None):
        ap.error("give exactly one of --tokens and --tokens-from")
    tokens = args.tokens
    if args.tokens_from:
        with open(args.tokens_from) as f:
            cases = json.load(f)["cases"]
        named = [k for k in cases if args.case in (None, k["name"])]
        if not named:
            ap.error(f"no case {args.case!r} in {args.tokens_from}")
        tokens = named[0]["prompt_ids"]
    c, w = load(args.model)
    logits = forward(c, w, tokens)
    doc = {
        "generator": "tools/reference_forward.py (numpy float64, gguf-py dequantization)",
        "model": args.model.split("/")[-1],
        "tokens": tokens,
    }
    if args.positions is None:
        doc["argmax"] = [int(np.argmax(l)) for l in logits]
        # rounded to 1e-7: far below the 1e-4 test tolerance, keeps the fixture small
        doc["logits"] = [[round(float(v), 7) for v in l] for l in logits]
    else:
        doc["stride"] = args.stride
        positions = sorted({p % len(tokens) for p in args.positions})
        doc["rows"] = [compact_row(p, logits[p], args.stride) for p in positions]
    with open(args.out, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
