#!/usr/bin/env python3
"""Writes tests/fixtures/quant_mix_llamacpp.json: the tensor types llama.cpp's quantizer gives
tiny random models under each of its mixes (Q4_K_M, Q3_K_M, IQ4_XS, ...), the golden for
llmctl's mix rules (src/quant/quant_mix.cpp, tests/test_quant_mix.cpp).

Independent reference: llama.cpp as the PyPI package llama-cpp-python 0.3.36 builds it
(scripts/install-reference.sh), called through its llama_model_quantize. The models are written
with gguf-py (F16 matrices, random values; only their names and shapes matter to the rules) and
cover: grouped KV (n_head / n_head_kv = 4) and none, tied and untied output, rows of 320 that a
256-element super-block does not divide (the fallbacks), and 80 layers with grouped KV
(llama.cpp's 70B rule). The fixture records each model's metadata, its tensors (name, shape)
and, per mix, the type of every tensor in file order; "mixes_imatrix" the same with an
importance matrix given (all ones: only its presence matters to the rules, llama.cpp's
has_imatrix).

  ~/.cache/llmctl/ref-venv/bin/python tools/gen_quant_mix_fixture.py [--out FILE]
"""
import argparse
import ctypes
import json
import os
import tempfile

import numpy as np
import gguf
import llama_cpp

from llamacpp_imatrix import c_imatrix, set_imatrix

# llama_ftype numbers (llama.h). Q2_K_S is left out: llama.cpp requires an importance matrix
# for it.
MIXES = {
    "F16": 1, "Q8_0": 7, "Q6_K": 18, "Q5_K_M": 17, "Q5_K_S": 16, "Q5_1": 9, "Q5_0": 8,
    "Q4_K_M": 15, "Q4_K_S": 14, "Q4_1": 3, "Q4_0": 2, "IQ4_NL": 25, "IQ4_XS": 30,
    "Q3_K_L": 13, "Q3_K_M": 12, "Q3_K_S": 11, "Q2_K": 10,
}

# name, n_embd, n_ff, n_layer, n_head, n_head_kv, tied output
MODELS = [
    ("gqa4_untied_16_layers", 256, 512, 16, 4, 1, False),
    ("gqa1_tied_8_layers", 256, 768, 8, 4, 4, True),
    ("rows320_gqa2_untied_4_layers", 320, 640, 4, 4, 2, False),
    ("llama_80_layers_gqa4", 256, 256, 80, 4, 1, False),
]

N_VOCAB = 259  # <unk> <s> </s> and 256 byte tokens


def write_model(path, n_embd, n_ff, n_layer, n_head, n_head_kv, tied, rng):
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("tiny random llama for quantization mixes")
    w.add_file_type(1)  # MOSTLY_F16
    w.add_context_length(256)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_rope_dimension_count(n_embd // n_head)
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * len(tokens))
    w.add_token_types([2, 3, 3] + [6] * 256)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)

    head_dim = n_embd // n_head
    tensors = []

    def add(name, rows, cols):  # numpy shape (rows, cols): ggml shape [cols, rows]
        if cols == 0:
            a = np.ones(rows, dtype=np.float32)
        else:
            a = (rng.standard_normal((rows, cols)) * 0.02).astype(np.float16)
        w.add_tensor(name, a)
        tensors.append([name, [cols, rows] if cols else [rows]])

    add("token_embd.weight", N_VOCAB, n_embd)
    for i in range(n_layer):
        add(f"blk.{i}.attn_norm.weight", n_embd, 0)
        add(f"blk.{i}.attn_q.weight", n_embd, n_embd)
        add(f"blk.{i}.attn_k.weight", head_dim * n_head_kv, n_embd)
        add(f"blk.{i}.attn_v.weight", head_dim * n_head_kv, n_embd)
        add(f"blk.{i}.attn_output.weight", n_embd, n_embd)
        add(f"blk.{i}.ffn_norm.weight", n_embd, 0)
        add(f"blk.{i}.ffn_gate.weight", n_ff, n_embd)
        add(f"blk.{i}.ffn_up.weight", n_ff, n_embd)
        add(f"blk.{i}.ffn_down.weight", n_embd, n_ff)
    add("output_norm.weight", n_embd, 0)
    if not tied:
        add("output.weight", N_VOCAB, n_embd)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return tensors


def ones_imatrix(tensors):
    """An importance matrix of ones for every matrix (only its presence matters here)."""
    return c_imatrix([(name, np.ones(shape[0], np.float32)) for name, shape in tensors
                      if len(shape) == 2])


def quantize(src, dst, ftype, imatrix=None):
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.nthread = 2
    if imatrix is not None:
        set_imatrix(params, imatrix)
    rc = llama_cpp.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(params))
    if rc != 0:
        raise SystemExit(f"llama_model_quantize({src}, ftype {ftype}) failed: {rc}")
    r = gguf.GGUFReader(dst)
    return {t.name: t.tensor_type.name for t in r.tensors}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "..", "tests", "fixtures",
                                                  "quant_mix_llamacpp.json"))
    args = ap.parse_args()
    rng = np.random.default_rng(7)
    out = {"reference": f"llama-cpp-python {llama_cpp.__version__} (llama_model_quantize)",
           "generator": "tools/gen_quant_mix_fixture.py", "models": []}
    with tempfile.TemporaryDirectory() as tmp:
        for name, n_embd, n_ff, n_layer, n_head, n_head_kv, tied in MODELS:
            src = os.path.join(tmp, f"{name}.gguf")
            tensors = write_model(src, n_embd, n_ff, n_layer, n_head, n_head_kv, tied, rng)
            model = {"name": name, "arch": "llama", "n_layer": n_layer, "n_head": n_head,
                     "n_head_kv": n_head_kv, "n_expert": 0, "tensors": tensors, "mixes": {},
                     "mixes_imatrix": {}}
            imatrix, keep = ones_imatrix(tensors)
            for mix, ftype in MIXES.items():
                for key, im in (("mixes", None), ("mixes_imatrix", imatrix)):
                    dst = os.path.join(tmp, f"{name}.{mix}.gguf")
                    types = quantize(src, dst, ftype, im)
                    os.remove(dst)
                    model[key][mix] = [types[t[0]] for t in tensors]
                    print(f"{name} {mix}{' + imatrix' if im else ''}: "
                          + ", ".join(sorted(set(model[key][mix]))))
            del keep
            out["models"].append(model)
    with open(args.out, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {args.out} ({os.path.getsize(args.out)} bytes)")


if __name__ == "__main__":
    main()
