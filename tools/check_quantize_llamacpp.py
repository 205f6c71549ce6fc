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

With --requantize, a real (already quantized) file instead, requantized under the given mixes
by both (llama.cpp with allow_requantize, llmctl with --allow-requantize), and with
--imatrix FILE both get the same importance matrix: llmctl reads the file, llama.cpp gets
the column weights llama-quantize would compute from it (in_sum2 / counts in float; 1 where
counts is 0), through llama_model_quantize_params.imatrix.

    ~/.cache/llmctl/ref-venv/bin/python tools/check_quantize_llamacpp.py build/llmctl \
        --requantize /work/shared/models/SmolLM2-135M-Instruct.Q4_1.gguf \
        --imatrix smol.imatrix Q4_0 Q5_1

(smol.imatrix: `llmctl eval -m FILE --builtin-text calibration --save-imatrix smol.imatrix`.)
Last run 2026-12-03: SmolLM2-135M-Instruct Q4_1 with that imatrix, Q4_0, Q5_0, Q5_1, Q4_K_M,
IQ4_XS (and Q4_1, Q8_0): 272 tensors each, 0 differing.
"""
import argparse
import ctypes
import subprocess
import sys
import tempfile

import llama_cpp
import numpy as np
from gguf import GGUFReader, GGUFWriter

from llamacpp_imatrix import c_imatrix, gguf_column_weights, set_imatrix

MIXES = {"Q4_K_M": 15, "Q4_K_S": 14, "Q5_K_M": 17, "Q5_K_S": 16, "Q6_K": 18, "Q3_K_S": 11,
         "Q3_K_M": 12, "Q3_K_L": 13, "Q2_K": 10, "IQ4_NL": 25, "IQ4_XS": 30}
LEGACY_MIXES = {"Q4_0": 2, "Q4_1": 3, "Q5_0": 8, "Q5_1": 9, "Q8_0": 7}  # llama_ftype values


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


def compare(name, ref, ours):
    a = {t.name: t for t in GGUFReader(ref).tensors}
    b = {t.name: t for t in GGUFReader(ours).tensors}
    assert a.keys() == b.keys(), (name, set(a) ^ set(b))
    differ = [k for k in a if a[k].tensor_type != b[k].tensor_type
              or a[k].data.tobytes() != b[k].data.tobytes()]
    types = sorted({a[k].tensor_type.name for k in a})
    print(f"{name}: {len(a)} tensors ({', '.join(types)}), {len(differ)} differ "
          f"{differ[:3]}", file=sys.stderr)
    return len(differ)


def requantize(llmctl, src, imatrix, mixes, d):
    bad = 0
    arr = keep = None
    if imatrix:
        arr, keep = c_imatrix(gguf_column_weights(imatrix))
    for name in mixes:
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = {**MIXES, **LEGACY_MIXES}[name]
        params.allow_requantize = True
        if arr is not None:
            set_imatrix(params, arr)
        ref, ours = f"{d}/ref_{name}.gguf", f"{d}/ours_{name}.gguf"
        rc = llama_cpp.llama_model_quantize(src.encode(), ref.encode(), ctypes.byref(params))
        assert rc == 0, f"llama_model_quantize {name}: {rc}"
        cmd = [llmctl, "quantize", src, ours, "--type", name, "--allow-requantize"]
        r = subprocess.run(cmd + (["--imatrix", imatrix] if imatrix else []),
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        bad += compare(f"{name}{' + imatrix' if imatrix else ''}", ref, ours)
    del keep
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("llmctl")
    ap.add_argument("vocab", nargs="?", help="GGUF whose vocabulary the random model takes")
    ap.add_argument("--requantize", metavar="FILE", help="a real file to requantize instead")
    ap.add_argument("--imatrix", metavar="FILE", help="importance matrix for both (--requantize)")
    ap.add_argument("mixes", nargs="*", help="mixes for --requantize (e.g. Q4_0 Q5_1 Q4_K_M)")
    a = ap.parse_intermixed_args()
    if a.requantize:
        # argparse puts the first mix into `vocab`: it is a mix here.
        mixes = ([a.vocab] if a.vocab else []) + a.mixes
        with tempfile.TemporaryDirectory() as d:
            bad = requantize(a.llmctl, a.requantize, a.imatrix, mixes, d)
        print(f"{'OK' if bad == 0 else 'FAIL'}: {bad} tensors differ", file=sys.stderr)
        sys.exit(1 if bad else 0)
    llmctl, vocab = a.llmctl, a.vocab
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
            bad += compare(name, ref, ours)
    print(f"{'OK' if bad == 0 else 'FAIL'}: {bad} tensors differ", file=sys.stderr)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
