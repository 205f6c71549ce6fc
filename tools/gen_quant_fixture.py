#!/usr/bin/env python3
"""Golden values for llmctl's reference quantization (src/quant/quantize.h).

The expected bytes come from an independent implementation, gguf-py's `gguf.quants`
(numpy), applied to a deterministic set of float32 blocks with edge cases: all zero,
all -0.0, one large outlier of either sign, values exactly on rounding boundaries, all
equal, blocks where fused multiply-add would change q, tiny (float subnormal) values, values near and beyond fp16's max, and random
normal blocks at several scales.

Every quantized block is also computed by `c_ref_*` below, a scalar transcription of the
rules of ggml's C reference (quantize_row_{q8_0,q4_0,q4_1,q5_0,q5_1}_ref in ggml-quants.c) in
float32 arithmetic, one rounding per operation, no fused multiply-add. Where gguf-py and
the C rules disagree the fixture follows C and the line is counted in a "# differs"
comment; the script prints those cases to stderr.

Regenerate (needs `pip install gguf numpy`):
    python3 tools/gen_quant_fixture.py > tests/fixtures/quant_golden.txt

Format:
  IN  NAME N HEX      N float32 inputs (little-endian bit patterns), one row
  OUT TYPE NAME HEX   the row quantized to TYPE (F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1) in
                      ggml's layout
"""
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants

f32 = np.float32
rng = np.random.default_rng(20261129)


def block(values):
    a = np.zeros(32, dtype=f32)
    a[: len(values)] = np.array(values, dtype=f32)
    return a


def cases():
    out = []
    out.append(("zeros", np.zeros(32, dtype=f32)))
    out.append(("neg_zeros", np.full(32, -0.0, dtype=f32)))
    mixed = np.zeros(32, dtype=f32)
    mixed[::2] = -0.0
    out.append(("mixed_zeros", mixed))
    base = (rng.standard_normal(32) * 0.02).astype(f32)
    for sign, name in [(1, "outlier_pos"), (-1, "outlier_neg")]:
        b = base.copy()
        b[7] = f32(sign * 1000.0)
        out.append((name, b))
    # Equal magnitudes of opposite sign: the first one found sets the sign of Q4_0's d.
    tie = base.copy(); tie[3] = f32(-5.0); tie[20] = f32(5.0)
    out.append(("tie_neg_first", tie))
    tie = base.copy(); tie[3] = f32(5.0); tie[20] = f32(-5.0)
    out.append(("tie_pos_first", tie))
    # Rounding boundaries with d = 1 exactly.
    # Q8_0: amax 127 -> d = 1, id = 1; x = k + 0.5 -> round half away from zero.
    q8 = [127.0, -127.0] + [k + 0.5 for k in range(-15, 15)]
    out.append(("q8_half", block(q8)))
    q8b = [-127.0, 126.5, -126.5, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5] + \
        [float(np.nextafter(f32(k + 0.5), f32(100))) for k in range(0, 11)] + \
        [float(np.nextafter(f32(k + 0.5), f32(-100))) for k in range(0, 12)]
    out.append(("q8_half_near", block(q8b)))
    # Q4_0: max -8 -> d = 1, id = 1: x*id + 8.5 lands on integers for x = k + 0.5.
    q40 = [-8.0] + [k + 0.5 for k in range(-8, 8)] + [float(k) for k in range(-7, 8)]
    out.append(("q4_0_half_dpos", block(q40)))
    # max +8 -> d = -1, id = -1.
    q40n = [8.0] + [k + 0.5 for k in range(-8, 8)] + [float(k) for k in range(-7, 8)]
    out.append(("q4_0_half_dneg", block(q40n)))
    q40x = [-8.0] + [float(np.nextafter(f32(k + 0.5), f32(dirn)))
                     for k in range(-8, 7) for dirn in (100,)] + \
        [float(np.nextafter(f32(k + 0.5), f32(-100))) for k in range(-8, 8)]
    out.append(("q4_0_half_near", block(q40x)))
    # Q4_1: min 0, max 15 -> d = 1: (x - min)*id + 0.5 lands on integers for x = k + 0.5.
    q41 = [0.0, 15.0] + [k + 0.5 for k in range(0, 15)] + [float(k) for k in range(1, 15)]
    out.append(("q4_1_half", block(q41 + [7.25])))
    # Blocks where a fused multiply-add (one rounding of x*id + 8.5, or (x-min)*id + 0.5) gives a
    # different q than ggml's reference arithmetic (x*id rounded to float first): with max -7,
    # x = -3.9375 has x*id just above -4.5 exactly, rounded to -4.5, so q = 4 (FMA: 3).
    out.append(("q4_0_fma_sensitive", block([-7.0, -3.9375, -0.4375002086162567, 0.4374995529651642])))
    out.append(("q4_1_fma_sensitive", block([0.0, 5.3, 0.17666666209697723])))
    out.append(("all_equal_pos", np.full(32, 0.7, dtype=f32)))
    out.append(("all_equal_neg", np.full(32, -3.25, dtype=f32)))
    # Tiny values: fp16 subnormal range, float32 subnormals (1/d overflows to inf).
    out.append(("fp16_subnormal", (rng.standard_normal(32) * 1e-6).astype(f32)))
    out.append(("f32_tiny", (rng.standard_normal(32) * 1e-36).astype(f32)))
    out.append(("f32_subnormal", (rng.standard_normal(32) * 1e-40).astype(f32)))
    sub = np.zeros(32, dtype=f32); sub[5] = np.array([1], dtype=np.uint32).view(f32)[0]
    out.append(("f32_min_subnormal", sub))
    # Large values: near fp16 max, and beyond (d or m overflowing fp16).
    out.append(("near_fp16_max", (rng.uniform(-1, 1, 32) * 65504).astype(f32)))
    big = (rng.uniform(-1, 1, 32) * 65504).astype(f32); big[0] = f32(65504.0); big[1] = f32(65520.0)
    out.append(("fp16_max_edge", big))
    out.append(("beyond_q4_0", (rng.uniform(-1, 1, 32) * 1e6).astype(f32)))
    out.append(("beyond_q8_0", (rng.uniform(-1, 1, 32) * 1e7).astype(f32)))
    huge = (rng.uniform(-1, 1, 32) * 1e30).astype(f32); huge[2] = f32(3e38); huge[9] = f32(-3e38)
    out.append(("float_max_range", huge))  # Q4_1: max - min overflows float
    for scale in [1e-3, 0.02, 1.0, 37.0, 3000.0]:
        for i in range(3):
            out.append((f"normal_{scale:g}_{i}", (rng.standard_normal(32) * scale).astype(f32)))
    offset = (rng.standard_normal(32) * 0.1 + 2.0).astype(f32)
    out.append(("normal_offset", offset))
    out.append(("uniform_pos", rng.uniform(0, 1, 32).astype(f32)))
    out.append(("row_4_blocks", (rng.standard_normal(128) * 0.05).astype(f32)))
    return out


# ---- scalar transcription of ggml's C rules ------------------------------------------------

def to_int_x86(v):
    """(int8_t) of a float as x86 computes it: truncation; non-finite or out of int32 range
    gives INT_MIN, whose low byte is 0 (undefined behaviour in C, but what ggml's x86 build does)."""
    if not np.isfinite(v) or abs(float(v)) >= 2.0**31:
        return 0
    i = int(np.trunc(float(v)))
    return ((i + 128) % 256) - 128


def half_bytes(v):
    with np.errstate(over="ignore"):
        return np.array([v], dtype=f32).astype(np.float16).tobytes()


def c_ref_q8_0(x):
    out = b""
    for b in x.reshape(-1, 32):
        amax = f32(0)
        for v in b:
            amax = max(amax, abs(v))
        d = f32(amax / f32(127))
        with np.errstate(divide="ignore", over="ignore"):
            idv = f32(f32(1) / d) if d != 0 else f32(0)
        qs = []
        for v in b:
            with np.errstate(over="ignore", invalid="ignore"):
                p = f32(v * idv)
            # roundf: half away from zero
            r = np.copysign(np.floor(abs(float(p)) + 0.5), float(p)) if np.isfinite(p) else p
            qs.append(to_int_x86(r) & 0xFF)
        out += half_bytes(d) + bytes(qs)
    return out


def pack4(q):
    return bytes(q[j] | (q[j + 16] << 4) for j in range(16))


def pack5(q):
    """Q5_0/Q5_1 quants: qh (bit j = bit 4 of q[j], a little-endian u32), then the nibbles."""
    qh = 0
    for j, v in enumerate(q):
        qh |= ((v >> 4) & 1) << j
    return qh.to_bytes(4, "little") + bytes((q[j] & 15) | ((q[j + 16] & 15) << 4) for j in range(16))


def c_ref_symmetric(x, half, pack):
    """quantize_row_q4_0_ref (half 8) / q5_0_ref (half 16): d = max / -half,
    q = MIN(2 half - 1, (int8)(x*id + half + 0.5))."""
    out = b""
    for b in x.reshape(-1, 32):
        amax = f32(0); mx = f32(0)
        for v in b:
            if amax < abs(v):
                amax = abs(v); mx = v
        d = f32(mx / f32(-half))
        with np.errstate(divide="ignore", over="ignore"):
            idv = f32(f32(1) / d) if d != 0 else f32(0)
        q = []
        for v in b:
            with np.errstate(over="ignore", invalid="ignore"):
                s = f32(f32(v * idv) + f32(half + 0.5))
            q.append(min(2 * half - 1, to_int_x86(s)) & 0xFF)
        out += half_bytes(d) + pack(q)
    return out


def c_ref_affine(x, qmax, clamp, pack):
    """quantize_row_q4_1_ref (qmax 15, MIN(15, ...)) / q5_1_ref (qmax 31, no clamp):
    d = (max - min) / qmax, q = (int)((x - min)*id + 0.5)."""
    out = b""
    for b in x.reshape(-1, 32):
        mn = f32(np.finfo(f32).max); mx = f32(-np.finfo(f32).max)
        for v in b:
            if v < mn: mn = v
            if v > mx: mx = v
        with np.errstate(over="ignore"):
            d = f32(f32(mx - mn) / f32(qmax))
            idv = f32(f32(1) / d) if d != 0 else f32(0)
        q = []
        for v in b:
            with np.errstate(over="ignore", invalid="ignore"):
                s = f32(f32(f32(v - mn) * idv) + f32(0.5))
            q.append((min(qmax, to_int_x86(s)) if clamp else to_int_x86(s)) & 0xFF)
        out += half_bytes(d) + half_bytes(mn) + pack(q)
    return out


def c_ref_q4_0(x):
    return c_ref_symmetric(x, 8, pack4)


def c_ref_q5_0(x):
    return c_ref_symmetric(x, 16, pack5)


def c_ref_q4_1(x):
    return c_ref_affine(x, 15, True, pack4)


def c_ref_q5_1(x):
    return c_ref_affine(x, 31, False, pack5)


C_REF = {"Q8_0": c_ref_q8_0, "Q4_0": c_ref_q4_0, "Q4_1": c_ref_q4_1, "Q5_0": c_ref_q5_0,
         "Q5_1": c_ref_q5_1}
TYPES = [("F32", T.F32), ("F16", T.F16), ("BF16", T.BF16), ("Q8_0", T.Q8_0), ("Q4_0", T.Q4_0),
         ("Q4_1", T.Q4_1), ("Q5_0", T.Q5_0), ("Q5_1", T.Q5_1)]


def main():
    lines, differs = [], []
    for name, x in cases():
        assert x.dtype == f32 and x.size % 32 == 0
        lines.append(f"IN {name} {x.size} {x.tobytes().hex()}")
        for tname, qtype in TYPES:
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                py = np.asarray(quants.quantize(x.copy(), qtype)).tobytes()
            got = py
            if tname in C_REF:
                c = C_REF[tname](x)
                if c != py:
                    differs.append(f"{tname} {name}")
                    print(f"differs: {tname} {name}\n  gguf-py {py.hex()}\n  C rules {c.hex()}",
                          file=sys.stderr)
                    got = c
            lines.append(f"OUT {tname} {name} {got.hex()}")
    print("# Golden quantization bytes: gguf-py (gguf.quants), cross-checked against ggml's C")
    print("# rules; generated by tools/gen_quant_fixture.py, do not edit. Format: see that script.")
    print(f"# differs (fixture follows C): {', '.join(differs) if differs else 'none'}")
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
