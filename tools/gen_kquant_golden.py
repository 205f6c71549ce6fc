#!/usr/bin/env python3
"""Golden K-quant, IQ4 and Q4_0..Q8_0 blocks from llama.cpp's own quantizer (tests/test_quantize_k.cpp).

The expected bytes come from ggml itself: ggml_quantize_chunk() of the libggml-base.so that
llama-cpp-python 0.3.36 ships (its vendored llama.cpp), called through ctypes. Without an
importance matrix that is quantize_row_<type>_ref (IQ4: the impl with no weights); with one,
quantize_row_<type>_impl (Q8_0 ignores it). The shipped ggml-base is built without FMA (no vfmadd in its
code: `objdump -d libggml-base.so | grep -c vfmadd` gives 0), so its float arithmetic is
the C source's, one rounding per operation, which is what llmctl's encoders compute.

Inputs are seeded random matrices with rows of different distributions (normal at several
scales, outliers, uniform, all zero, tiny values, constant rows, one-signed rows, ties of
the rounding, sparse rows), each quantized without and with an importance matrix (random
lognormal per column, some columns zero, in one matrix a whole super-block of them). A fourth
matrix has rows of 160 (5 blocks of 32), quantized only as the 32-element-block types.

A second, larger set is not stored but generated: tests/fixtures/kquant_golden_rows.json holds
only a 64-bit FNV-1a hash of each quantized row, for a 256 x 1024 matrix (and an importance
matrix) whose values the test computes itself from the same integer generator (splitmix64;
every value an integer times a power of two, so float32 holds it exactly in both languages).

Run with the reference engine's Python (it has numpy and llama_cpp):
    ~/.cache/llmctl/ref-venv/bin/python tools/gen_kquant_golden.py tests/fixtures

kquant_golden.bin (little endian): magic b"KQG1", u32 number of matrices, then per matrix
    u32 rows, u32 cols, f32 x[rows * cols] (row major), f32 imatrix[cols]
then u32 number of results, then per result
    u32 matrix index, u32 ggml type, u32 with_imatrix (0/1), u32 nbytes, bytes[nbytes].
"""
import ctypes
import json
import math
import pathlib
import struct
import sys

import numpy as np
import llama_cpp

TYPES = {"Q2_K": 10, "Q3_K": 11, "Q4_K": 12, "Q5_K": 13, "Q6_K": 14, "IQ4_NL": 20, "IQ4_XS": 23,
         "Q4_0": 2, "Q4_1": 3, "Q5_0": 6, "Q5_1": 7, "Q8_0": 8}
BLOCK = {10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210),
         20: (32, 18), 23: (256, 136), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24),
         8: (32, 34)}


def load_ggml():
    lib_dir = pathlib.Path(llama_cpp.__file__).parent / "lib"
    lib = ctypes.CDLL(str(lib_dir / "libggml-base.so"))
    f = lib.ggml_quantize_chunk
    f.restype = ctypes.c_size_t
    f.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                  ctypes.c_int64, ctypes.c_void_p]
    return f


def row_kinds(rng, n):
    """One row of each distribution, n elements each."""
    rows = []
    rows.append(rng.normal(0, 0.02, n))                                # typical weights
    r = rng.normal(0, 1.0, n); r[rng.integers(0, n, 6)] *= 40.0; rows.append(r)  # outliers
    rows.append(rng.uniform(-1, 1, n))
    rows.append(np.zeros(n))                                           # all zero
    rows.append(rng.normal(0, 1e-6, n))                                # tiny
    rows.append(rng.normal(0, 1e-12, n))                               # below fp16 scales
    rows.append(rng.normal(3.0, 0.5, n))                               # all positive
    rows.append(-np.abs(rng.normal(0, 0.1, n)))                        # all <= 0
    rows.append(rng.laplace(0, 0.05, n))                               # heavy tails
    rows.append(np.full(n, 0.37))                                      # constant
    r = rng.normal(0, 0.3, n); r[: n // 2] = 0.0; rows.append(r)       # zero super-blocks
    rows.append(rng.normal(0, 1000.0, n))                              # large
    r = rng.normal(0, 0.1, n); r[rng.random(n) < 0.9] = 0.0; rows.append(r)  # sparse
    r = rng.normal(0, 0.01, n); r[rng.integers(0, n)] = 1e4; rows.append(r)   # one huge
    rows.append(np.round(rng.normal(0, 2.0, n) * 4) / 4)               # rounding ties
    r = rng.normal(0, 0.05, n)
    for b in range(0, n, 32):                                          # constant sub-blocks
        if (b // 32) % 3 == 0:
            r[b:b + 32] = r[b]
    rows.append(r)
    return np.array(rows, dtype=np.float32)


MASK64 = (1 << 64) - 1


class SplitMix64:
    """splitmix64, as tests/test_quantize_k.cpp's GoldenRng."""

    def __init__(self, seed):
        self.state = seed & MASK64

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)

    def u22(self):
        return self.next() >> 42


def generated_matrix(rows, cols, seed):
    """The generated rows (kinds by row % 8) and importance matrix; see GoldenRng's users."""
    g = SplitMix64(seed)
    x = np.zeros((rows, cols), dtype=np.float64)
    for r in range(rows):
        kind, e = r % 8, 23 + (r // 8) % 12
        for c in range(cols):
            bell = g.u22() + g.u22() + g.u22() + g.u22() - (1 << 23)  # Irwin-Hall, |.| < 2^23
            u = g.u22()
            if kind == 0:
                v = math.ldexp(bell, -e)
            elif kind == 1:
                v = math.ldexp(u - (1 << 21), -e + 2)
            elif kind == 2:
                v = math.ldexp(bell, -e) if (u & 7) == 0 else 0.0
            elif kind == 3:
                v = math.ldexp(u % 9 - 4, -((r // 8) % 5))       # small integers: rounding ties
            elif kind == 4:
                v = math.ldexp(bell, -e + (6 if (u & 255) == 0 else 0))  # outliers
            elif kind == 5:
                v = math.ldexp(abs(bell), -e)                      # one-signed
            elif kind == 6:
                v = math.ldexp(u % 33 - 16, -4)                    # sixteenths
            else:
                v = math.ldexp(bell, -e - (c // 32) % 6)           # sub-block scales 2^-k
            x[r, c] = v
    w = np.zeros(cols, dtype=np.float64)
    for c in range(cols):
        u, k = g.u22(), g.u22()
        w[c] = 0.0 if (k & 15) == 0 else math.ldexp(u + 1, -22 + (k >> 4) % 8)
    x32, w32 = x.astype(np.float32), w.astype(np.float32)
    assert (x32.astype(np.float64) == x).all() and (w32.astype(np.float64) == w).all()
    return x32, w32


def fnv1a64(data):
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & MASK64
    return h


def quantize_all(quantize, x, w):
    x = np.ascontiguousarray(x, dtype=np.float32)
    rows, cols = x.shape
    for name, t in TYPES.items():
        bs, ts = BLOCK[t]
        if cols % bs:
            continue  # rows of whole 32-blocks only: the types with 32-element blocks
        nbytes = rows * cols // bs * ts
        for with_w in (0, 1):
            dst = (ctypes.c_uint8 * nbytes)()
            n = quantize(t, x.ctypes.data, ctypes.addressof(dst), 0, rows, cols,
                         w.ctypes.data if with_w else None)
            assert n == nbytes, (name, n, nbytes)
            yield name, t, with_w, bytes(dst)


def main():
    out_dir = pathlib.Path(sys.argv[1])
    rng = np.random.default_rng(20261203)
    quantize = load_ggml()
    matrices = []
    a = row_kinds(rng, 512)
    wa = rng.lognormal(0, 1.5, 512).astype(np.float32)
    wa[rng.integers(0, 512, 40)] = 0.0
    matrices.append((a, wa))
    scales = np.exp(rng.uniform(np.log(1e-3), np.log(1.0), (8, 1)))
    b = (rng.standard_t(5, (8, 1024)) * scales).astype(np.float32)
    wb = (rng.lognormal(0, 1.0, 1024) * 1e-3).astype(np.float32)
    matrices.append((b, wb))
    # Typical weights at per-row scales; the importance matrix zero over one 32-column block
    # and over a whole 256-column super-block (where ggml's weighted fits see no weight).
    scales = np.exp(rng.uniform(np.log(1e-2), np.log(0.2), (16, 1)))
    c = (rng.normal(0, 1, (16, 768)) * scales).astype(np.float32)
    wc = rng.lognormal(0, 2.0, 768).astype(np.float32)
    wc[0:32] = 0.0
    wc[512:768] = 0.0
    matrices.append((c, wc))

    # Rows of 5 blocks of 32 (not whole super-blocks: the 32-element types only), each row at
    # its own scale, with an all-zero block and an importance matrix with a zero block; the
    # legacy types' weights use the mean x^2 of the whole row.
    scales = np.exp(rng.uniform(np.log(1e-3), np.log(1.0), (8, 1)))
    d = (rng.normal(0, 1, (8, 160)) * scales).astype(np.float32)
    d[2, 64:96] = 0.0
    d[5, 7] *= 30.0
    wd = rng.lognormal(0, 1.0, 160).astype(np.float32)
    wd[96:128] = 0.0
    matrices.append((d, wd))

    results = []
    for mi, (x, w) in enumerate(matrices):
        for name, t, with_w, data in quantize_all(quantize, x, w):
            results.append((mi, t, with_w, data))
    blob = bytearray(b"KQG1")
    blob += struct.pack("<I", len(matrices))
    for x, w in matrices:
        blob += struct.pack("<II", *x.shape) + x.astype("<f4").tobytes() + w.astype("<f4").tobytes()
    blob += struct.pack("<I", len(results))
    for mi, t, with_w, data in results:
        blob += struct.pack("<IIII", mi, t, with_w, len(data)) + data
    (out_dir / "kquant_golden.bin").write_bytes(bytes(blob))
    print(f"kquant_golden.bin: {len(blob)} bytes, {len(results)} results", file=sys.stderr)

    rows, cols, seed = 256, 1024, 20261203
    x, w = generated_matrix(rows, cols, seed)
    doc = {"generator": "tools/gen_kquant_golden.py", "rows": rows, "cols": cols, "seed": seed,
           "hashes": {}}
    for name, t, with_w, data in quantize_all(quantize, x, w):
        row_bytes = len(data) // rows
        key = f"{name}{'+imatrix' if with_w else ''}"
        doc["hashes"][key] = [f"{fnv1a64(data[r * row_bytes:(r + 1) * row_bytes]):016x}"
                              for r in range(rows)]
    text = json.dumps(doc, indent=0)
    (out_dir / "kquant_golden_rows.json").write_text(text + "\n")
    print(f"kquant_golden_rows.json: {len(text)} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
