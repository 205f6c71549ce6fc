#!/usr/bin/env python3
"""Golden values for `llmctl svd-embed` and `llmctl tokenize --norms`, computed independently:
gguf-py reads and dequantizes the tensor, numpy computes a float64 SVD (LAPACK gesdd through
numpy.linalg.svd) and the norm statistics.

  tests/fixtures/svd_embed_stories260K.json
      {"token_embd": {...}, "output": {...}} with, per matrix:
      sigma (all, descending), rank_90/99/999, effective_rank, stable_rank, condition_number,
      norms (per token), norm_mean, norm_sd (n-1), norm_deciles (numpy linear percentiles),
      pearson, spearman (average ranks for ties), slope_per_1000_ids.

Regenerate (needs `pip install gguf numpy`; the model is in the shared test data):
    python3 tools/gen_svd_embed_fixture.py /work/shared/models/stories260K.gguf tests/fixtures
"""
import json
import os
import sys

import numpy as np
import gguf
from gguf import quants


def matrix(reader, name):
    for t in reader.tensors:
        if t.name == name:
            a = quants.dequantize(t.data, t.tensor_type)
            n_embd, n_vocab = int(t.shape[0]), int(t.shape[1])
            return np.asarray(a, dtype=np.float64).reshape(n_vocab, n_embd)
    return None


def ranks(v):
    order = np.argsort(v, kind="stable")
    r = np.empty(len(v))
    r[order] = np.arange(1, len(v) + 1)
    # average ranks over ties
    vals, inv = np.unique(v, return_inverse=True)
    sums = np.bincount(inv, weights=r)
    counts = np.bincount(inv)
    return (sums / counts)[inv]


def rank_at(cum, p):
    return int(np.argmax(cum >= p * (1 - 1e-12)) + 1)


def stats(e):
    s = np.linalg.svd(e, compute_uv=False)
    e2 = s**2
    cum = np.cumsum(e2) / e2.sum()
    p = s / s.sum()
    p = p[p > 0]
    norms = np.linalg.norm(e, axis=1)
    ids = np.arange(len(norms), dtype=np.float64)
    pearson = float(np.corrcoef(ids, norms)[0, 1])
    spearman = float(np.corrcoef(ranks(ids), ranks(norms))[0, 1])
    slope = float(np.polyfit(ids, norms, 1)[0]) * 1000
    return {
        "sigma": s.tolist(),
        "rank_90": rank_at(cum, 0.90),
        "rank_99": rank_at(cum, 0.99),
        "rank_999": rank_at(cum, 0.999),
        "effective_rank": float(np.exp(-(p * np.log(p)).sum())),
        "stable_rank": float(e2.sum() / s[0] ** 2),
        "condition_number": float(s[0] / s[-1]),
        "norms": norms.tolist(),
        "norm_mean": float(norms.mean()),
        "norm_sd": float(norms.std(ddof=1)),
        "norm_deciles": np.percentile(norms, np.arange(0, 101, 10)).tolist(),
        "pearson": pearson,
        "spearman": spearman,
        "slope_per_1000_ids": slope,
    }


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    model, outdir = sys.argv[1], sys.argv[2]
    reader = gguf.GGUFReader(model)
    out = {"model": os.path.basename(model)}
    for key in ("token_embd", "output"):
        e = matrix(reader, key + ".weight")
        if e is not None:
            out[key] = stats(e)
    path = os.path.join(outdir, "svd_embed_" + os.path.splitext(os.path.basename(model))[0] + ".json")
    with open(path, "w") as f:
        json.dump(out, f)
    print(path)


if __name__ == "__main__":
    main()
