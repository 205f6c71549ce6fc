#!/usr/bin/env python3
"""Golden MXFP4 dequantization and quantization (src/quant/dequant.h, quantize_mxfp4.cpp).

The expected values come from gguf-py's `gguf.quants.MXFP4` (numpy), and every line is
cross-checked against ggml's C (dequantize_row_mxfp4 and quantize_row_mxfp4_ref of
ggml-quants.c) called through ctypes, when a ggml library is given or found:
  - llama-cpp-python's libggml-base.so (ref venv; found automatically), or
  - --ggml-lib PATH: any shared library exporting those two functions. One was built from
    the llama.cpp snapshot (github:unslothai/llama.cpp d32676d7) for the committed fixture:
        gcc -O2 -fPIC -ffp-contract=off -c -Iggml/include -Iggml/src ggml/src/ggml-quants.c
    plus a stub for ggml_abort, ggml_row_size, ggml_type_name, ggml_type_size (unused by
    these two functions), linked with -shared -lm.
The committed fixture was written with that snapshot library; llama-cpp-python 0.3.36's
libggml-base.so gives the same data lines (checked 2026-12-03).
Where gguf-py and ggml disagree the fixture follows ggml and the case is named in a
"# differs" comment (and on stderr); without a ggml library the script refuses to write.

Dequantization blocks: every E8M0 scale 0..255 (0 and 1 are ggml's denormal scales 2^-128,
2^-127; 253, 254 overflow to Inf at the largest levels; 255, NaN in the OCP spec, is 2^127 in
ggml and gguf-py, which the dequantizer follows), each with random nibbles, plus blocks of
all 16 levels, all index 8 (-0 in E2M1, an int8 0: +0.0), and multi-block rows.
Quantization rows: all zero, all -0, random normal rows at scales 1e-6 .. 1e6, huge (up to
float max), tiny (down to float subnormals, where ggml's (uint8_t) cast of a negative
exponent wraps), powers of two and values just below them (log2f rounding), level ties,
outliers, one-signed and sparse rows, 1- to 8-block rows.

Regenerate (the ref venv has gguf and numpy):
    ~/.cache/llmctl/ref-venv/bin/python tools/gen_mxfp4_fixture.py [--ggml-lib PATH] \
        > tests/fixtures/mxfp4_golden.txt

Format, one case per line:
  MXFP4 N HEX_BLOCKS HEX_F32       dequantization: N elements' blocks -> N float32 (LE)
  QUANT NAME N HEX_F32 HEX_BLOCKS  quantization: N float32 inputs -> their MXFP4 blocks
"""
import argparse
import ctypes
import pathlib
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants

f32 = np.float32
rng = np.random.default_rng(20261203)


def find_ggml(path):
    candidates = [path] if path else []
    try:
        import llama_cpp  # noqa: F401
        candidates.append(str(pathlib.Path(llama_cpp.__file__).parent / "lib" / "libggml-base.so"))
    except ImportError:
        pass
    for c in candidates:
        if c and pathlib.Path(c).exists():
            lib = ctypes.CDLL(c)
            for name in ("quantize_row_mxfp4_ref", "dequantize_row_mxfp4"):
                getattr(lib, name).restype = None
                getattr(lib, name).argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
            return c, lib
    return None, None


def ggml_quant(lib, x):
    x = np.ascontiguousarray(x, dtype=f32)
    out = ctypes.create_string_buffer(len(x) // 32 * 17)
    lib.quantize_row_mxfp4_ref(x.ctypes.data, out, len(x))
    return out.raw


def ggml_dequant(lib, blocks):
    n = len(blocks) // 17 * 32
    out = np.zeros(n, dtype=f32)
    buf = ctypes.create_string_buffer(blocks, len(blocks))
    lib.dequantize_row_mxfp4(buf, out.ctypes.data, n)
    return out.tobytes()


def py_quant(x):
    with np.errstate(over="ignore", invalid="ignore"):
        return quants.quantize(np.asarray(x, dtype=f32).reshape(1, -1), T.MXFP4).tobytes()


def py_dequant(blocks):
    with np.errstate(over="ignore", invalid="ignore"):
        return quants.dequantize(np.frombuffer(blocks, dtype=np.uint8), T.MXFP4).astype(f32).tobytes()


def dequant_blocks():
    out = []
    for e in range(256):
        out.append(bytes([e]) + rng.integers(0, 256, 16, dtype=np.uint8).tobytes())
    levels = bytes(j | ((15 - j) << 4) for j in range(16))  # every level, low and high nibble
    for e in (0, 1, 2, 126, 127, 128, 200, 252, 253, 254, 255):
        out.append(bytes([e]) + levels)
        out.append(bytes([e]) + bytes([0x88] * 16))  # index 8 everywhere: -0 in E2M1
    out.append(bytes(17))
    out.append(bytes([0xFF] * 17))
    return out


def quant_rows():
    rows = []
    add = lambda name, v: rows.append((name, np.asarray(v, dtype=f32)))
    add("zeros", np.zeros(32))
    add("neg_zeros", np.full(32, -0.0))
    for s in (1e-6, 1e-3, 0.02, 1.0, 37.0, 1e3, 1e6):
        add(f"normal_{s:g}", rng.standard_normal(64) * s)
    add("huge", rng.standard_normal(32) * 1e37)
    add("float_max", np.array([3.4028235e38, -3.4028235e38] + list(rng.standard_normal(30) * 1e38)))
    add("big_exp", np.full(32, 2.0 ** 127))
    add("tiny_1e-30", rng.standard_normal(32) * 1e-30)
    add("tiny_2^-120", rng.standard_normal(32) * 2.0 ** -120)
    add("tiny_2^-125", np.full(32, 2.0 ** -125))
    add("tiny_2^-126", rng.standard_normal(32) * 2.0 ** -126)
    add("subnormal", rng.standard_normal(32) * 1e-40)
    add("min_subnormal", np.array([1.4e-45, -1.4e-45] + [0.0] * 30))
    p2 = np.array([2.0 ** k for k in range(-8, 24)])
    add("powers_of_two", p2 * np.where(np.arange(32) % 2, -1, 1))
    below = np.nextafter(p2.astype(f32), f32(0))
    for k in range(0, 32, 8):  # one amax per block: below 2^k, for log2f's rounding
        b = rng.uniform(-0.5, 0.5, 32) * below[k]
        b[5] = below[k]
        add(f"below_2^{k - 8}", b)
    # amax 12 -> e = 128 - 2 + 127 - 128 ... h = 1: levels 0, .5, 1, 1.5, 2, 3, 4, 6 doubled
    ties = [12.0] + [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 7.0, 10.0, -0.25, -0.75, -1.25,
                     -1.75, -2.5, -3.5, -5.0, -7.0, -10.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                     8.0, -12.0, -8.0, -6.0, 0.0, -0.0]
    add("level_ties", ties)
    b = rng.standard_normal(32) * 0.01; b[9] = 500.0; add("outlier_pos", b)
    b = rng.standard_normal(32) * 0.01; b[30] = -500.0; add("outlier_neg", b)
    add("positive", np.abs(rng.standard_normal(32)) + 1.0)
    add("negative", -np.abs(rng.standard_normal(32)))
    b = rng.standard_normal(96); b[rng.random(96) < 0.85] = 0.0; add("sparse", b)
    add("constant", np.full(32, 0.37))
    for nb in range(1, 9):
        add(f"random_{nb}", rng.standard_normal(32 * nb) * rng.uniform(0.001, 10.0))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ggml-lib", default="")
    args = ap.parse_args()
    path, lib = find_ggml(args.ggml_lib)
    if lib is None:
        sys.exit("no ggml library (llama_cpp's libggml-base.so or --ggml-lib): refusing to "
                 "write a fixture without the cross-check")
    lines, differs = [], []
    blocks = dequant_blocks()
    for b in blocks + [b"".join(blocks[-6:]), b"".join(blocks[100:108])]:
        py, c = py_dequant(b), ggml_dequant(lib, b)
        if py != c:
            differs.append(f"dequant {b.hex()}")
        lines.append(f"MXFP4 {len(b) // 17 * 32} {b.hex()} {c.hex()}")
    for name, x in quant_rows():
        py, c = py_quant(x), ggml_quant(lib, x)
        if py != c:
            differs.append(name)
        lines.append(f"QUANT {name} {len(x)} {x.astype(f32).tobytes().hex()} {c.hex()}")
    print("# Golden MXFP4 dequantization and quantization: gguf-py (gguf.quants.MXFP4) and ggml's C")
    print(f"# ({pathlib.Path(path).name}); generated by tools/gen_mxfp4_fixture.py, do not edit.")
    print(f"# differs (fixture follows ggml): {', '.join(differs) if differs else 'none'}")
    for d in differs:
        print(f"gguf-py and ggml differ: {d}", file=sys.stderr)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
