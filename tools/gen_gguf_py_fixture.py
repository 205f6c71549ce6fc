#!/usr/bin/env python3
"""Golden files for `llmctl quantize`, written by an independent implementation: gguf-py
(llama.cpp's Python GGUF package) and its numpy quantizers `gguf.quants`.

  tests/fixtures/gguf_py_input.gguf   a small Llama-like GGUF written by gguf.GGUFWriter: F32 and
                                      F16 matrices, a matrix with rows of 172 (not a multiple of
                                      32), a 1-D norm; random normal weights, fixed seed.
  tests/fixtures/gguf_py_q8_0.gguf    what `llmctl quantize IN OUT --type q8_0` must write,
  tests/fixtures/gguf_py_q4_0.gguf    tensor by tensor: quants.quantize() of the (decoded) input
                                      for matrices, F16 for the 172-row one (llmctl's fallback),
                                      F32 for 1-D tensors.

Regenerate (needs `pip install gguf numpy`):
    python3 tools/gen_gguf_py_fixture.py tests/fixtures

Check that gguf-py reads a file llmctl wrote and decodes it as llmctl does (prints one line per
tensor; exit 1 on a mismatch). Not run by CTest (CI has no Python packages):
    python3 tools/gen_gguf_py_fixture.py --check OUT.gguf IN.gguf
"""
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf import quants

rng = np.random.default_rng(20261129)


def input_tensors():
    # numpy shapes are (rows, row_len); GGUF stores them reversed (row_len first).
    return [
        ("token_embd.weight", (rng.standard_normal((16, 64)) * 0.05).astype(np.float32)),
        ("output_norm.weight", (1.0 + 0.1 * rng.standard_normal(64)).astype(np.float32)),
        ("blk.0.attn_q.weight", (rng.standard_normal((64, 64)) * 0.02).astype(np.float32)),
        ("blk.0.ffn_up.weight", (rng.standard_normal((32, 64)) * 0.02).astype(np.float16)),
        ("blk.0.ffn_down.weight", (rng.standard_normal((64, 172)) * 0.02).astype(np.float32)),
    ]


def write(path, tensors, file_type):
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("gguf-py fixture")
    w.add_context_length(64)
    w.add_embedding_length(64)
    if file_type is not None:
        w.add_file_type(file_type)
    for name, data, raw in tensors:
        if raw is None:
            w.add_tensor(name, data)
        else:
            w.add_tensor(name, data, raw_dtype=raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def expected(tensors, qtype):
    out = []
    for name, data in tensors:
        x = data.astype(np.float32)
        if x.ndim == 1:
            out.append((name, x, None))
        elif x.shape[-1] % 32 != 0:
            out.append((name, x.astype(np.float16), None))
        else:
            out.append((name, quants.quantize(x, qtype), qtype))
    return out


def generate(outdir):
    tensors = input_tensors()
    write(os.path.join(outdir, "gguf_py_input.gguf"), [(n, d, None) for n, d in tensors], None)
    write(os.path.join(outdir, "gguf_py_q8_0.gguf"), expected(tensors, T.Q8_0), 7)
    write(os.path.join(outdir, "gguf_py_q4_0.gguf"), expected(tensors, T.Q4_0), 2)


def check(out_path, in_path):
    out = gguf.GGUFReader(out_path)
    src = {t.name: t for t in gguf.GGUFReader(in_path).tensors}
    bad = 0
    for t in out.tensors:
        ours = quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        x = quants.dequantize(src[t.name].data, src[t.name].tensor_type).astype(np.float32)
        status = "ok"
        if t.tensor_type in (T.Q8_0, T.Q4_0, T.Q4_1):
            # gguf-py's own quantization of the same input must give our bytes (on random
            # weights; quant_golden.txt covers the edge cases where gguf-py and ggml's C differ).
            if not np.array_equal(quants.quantize(x, t.tensor_type), np.asarray(t.data)):
                status, bad = "BYTES DIFFER", bad + 1
        err = float(np.sqrt(np.mean((x.reshape(ours.shape) - ours) ** 2)))
        print(f"{t.name:32s} {t.tensor_type.name:5s} rmse={err:.3e} {status}")
    print(f"{len(out.tensors)} tensors, {bad} mismatches")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--check":
        sys.exit(check(sys.argv[2], sys.argv[3]))
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    generate(sys.argv[1])
