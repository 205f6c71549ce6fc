#!/usr/bin/env python3
"""Whole-file check: llmctl quantize against llama.cpp's llama_model_quantize, tensor by tensor.

Writes a random F32 Llama of width 256 (4 layers, 8 heads, 2 KV heads, n_ff 512, stories260K's
vocabulary: every matrix row a whole number of 256-element super-blocks) to a temporary
directory, quantizes it under each mix with llama.cpp (llama-cpp-python's
llama_model_quantize, no importance matrix) and with `llmctl quantize --type MIX`, and
compares every tensor's type and bytes. Exit 1 on any difference.

    ~/.cache/llmctl/ref-venv/bin/python tools/check_quantize_llamacpp.py build/llmctl \\
        /work/shared/models/stories260K.gguf

Last run 2026-12-03: 11 mixes x 39 tensors, 0 differing.
"""
import ctypes
import subprocess
import sys
import tempfile

import llama_cpp
import numpy as np
from gguf import GGUFReader, GGUFWriter

MIXES = {"Q4_K_M": 15, "Q4_K_S": 14, "Q5_K_M": 17, "Q5_K_S": 16, "Q6_K": 18, "Q3_K_S": 11,
         "Q3_K_M": 12, "Q3_K_L": 13, "Q2_K": 10, "IQ4_NL": 25, "IQ4_XS": 30}


def write_model(path, vocab_path):
    src = GGUFReader(vocab_path)

    def arr(name):
        f = src.fields[name]
        return [f.parts[i] for i in f.data]

    tokens = [bytes(p).decode("utf-8") for p in arr("tokenizer.ggml.tokens")]
    scores = [float(p[0]) for p in arr("tokenizer.ggml.scores")]
    ttypes = [int(p[0]) for p in arr("tokenizer.ggml.token_type")]
    rng = np.random.default_rng(7)
    n_embd, n_layer, n_head, n_head_kv, n_ff = 256, 4, 8, 2, 512
    w = GGUFWriter(path, "llama")
    w.add_block_count(n_layer)
    w.add_context_length(256)
    w.add_embedding_length(n_embd)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(n_embd // n_head)
    w.add_file_type(0)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(ttypes)

    def mat(rows, cols):
        x = rng.normal(0, 0.02, (rows, cols)).astype(np.float32)
        x[rng.random(x.shape) < 0.001] *= 20  # a few outliers
        return x

    ones = np.ones(n_embd, np.float32)
    kv = n_embd * n_head_kv // n_head
    w.add_tensor("token_embd.weight", mat(len(tokens), n_embd))
    for i in range(n_layer):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", ones)
        w.add_tensor(p + "attn_q.weight", mat(n_embd, n_embd))
        w.add_tensor(p + "attn_k.weight", mat(kv, n_embd))
        w.add_tensor(p + "attn_v.weight", mat(kv, n_embd))
        w.add_tensor(p + "attn_output.weight", mat(n_embd, n_embd))
        w.add_tensor(p + "ffn_norm.weight", ones)
        w.add_tensor(p + "ffn_gate.weight", mat(n_ff, n_embd))
        w.add_tensor(p + "ffn_up.weight", mat(n_ff, n_embd))
        w.add_tensor(p + "ffn_down.weight", mat(n_embd, n_ff))
    w.add_tensor("output_norm.weight", ones)
    w.add_tensor("output.weight", mat(len(tokens), n_embd))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    llmctl, vocab = sys.argv[1], sys.argv[2]
    bad = 0
    with tempfile.TemporaryDirectory() as d:
        src = f"{d}/in.gguf"
        write_model(src, vocab)
        for name, ftype in MIXES.items():
            params = llama_cpp.llama_model_quantize_default_params()
            params.ftype = ftype
            ref, ours = f"{d}/ref_{name}.gguf", f"{d}/ours_{name}.gguf"
            rc = llama_cpp.llama_model_quantize(src.encode(), ref.encode(), ctypes.byref(params))
            assert rc == 0, f"llama_model_quantize {name}: {rc}"
            r = subprocess.run([llmctl, "quantize", src, ours, "--type", name],
                               capture_output=True, text=True)
            assert r.returncode == 0, r.stderr
            a = {t.name: t for t in GGUFReader(ref).tensors}
            b = {t.name: t for t in GGUFReader(ours).tensors}
            assert a.keys() == b.keys(), (name, set(a) ^ set(b))
            differ = [k for k in a if a[k].tensor_type != b[k].tensor_type
                      or a[k].data.tobytes() != b[k].data.tobytes()]
            types = sorted({a[k].tensor_type.name for k in a})
            print(f"{name}: {len(a)} tensors ({', '.join(types)}), {len(differ)} differ "
                  f"{differ[:3]}", file=sys.stderr)
            bad += len(differ)
    print(f"{'OK' if bad == 0 else 'FAIL'}: {bad} tensors differ", file=sys.stderr)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
