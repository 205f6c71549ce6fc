#!/usr/bin/env python3
"""An importance-matrix file laid out as llama.cpp's llama-imatrix writes it (GGUF output,
tools/imatrix/imatrix.cpp), written by an independent implementation: gguf-py's GGUFWriter.

  tests/fixtures/llamacpp_imatrix.gguf
    general.type = "imatrix" (no general.architecture, as llama-imatrix)
    imatrix.datasets = ["wiki.train.raw"], imatrix.chunk_count = 7, imatrix.chunk_size = 512
    per weight W: "W.in_sum2" F32 ggml [n_cols, 1] (numpy (1, n_cols)) and "W.counts" F32
    ggml [1, 1]: blk.0.attn_q.weight (64 columns, 3584 rows), blk.0.ffn_down.weight (172
    columns, 3584 rows). Sums: sum over rows of x_j^2 of fixed-seed normal activations with a
    per-column scale, so the values are neither round nor equal.

tests/test_imatrix.cpp loads it and compares with tests/fixtures/llamacpp_imatrix.json
(the same numbers as text, written here).

Regenerate (needs `pip install gguf numpy`):
    python3 tools/gen_imatrix_fixture.py tests/fixtures

Check that gguf-py reads a file `llmctl eval --save-imatrix` wrote, in the layout llama.cpp's
quantize expects (prints one line per entry; exit 1 on a problem). Not run by CTest:
    python3 tools/gen_imatrix_fixture.py --check FILE.imatrix.gguf
"""
import json
import os
import sys

import numpy as np
import gguf

rng = np.random.default_rng(20261130)


class IMatrixWriter(gguf.GGUFWriter):
    def add_architecture(self) -> None:  # llama-imatrix stores no architecture
        pass


def write(out_dir: str) -> None:
    rows = 3584
    entries = {}
    for name, n_cols in (("blk.0.attn_q.weight", 64), ("blk.0.ffn_down.weight", 172)):
        scale = rng.uniform(0.1, 3.0, size=n_cols)
        x = rng.normal(size=(rows, n_cols)) * scale
        entries[name] = (np.sum(x * x, axis=0).astype(np.float32), rows)
    path = os.path.join(out_dir, "llamacpp_imatrix.gguf")
    w = IMatrixWriter(path, arch="")
    w.add_type("imatrix")
    w.add_array("imatrix.datasets", ["wiki.train.raw"])
    w.add_uint32("imatrix.chunk_count", 7)
    w.add_uint32("imatrix.chunk_size", 512)
    for name, (sums, count) in entries.items():
        w.add_tensor(name + ".in_sum2", sums.reshape(1, -1))
        w.add_tensor(name + ".counts", np.array([[count]], dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with open(os.path.join(out_dir, "llamacpp_imatrix.json"), "w") as f:
        json.dump({n: {"sums": [float(v) for v in s], "count": c} for n, (s, c) in entries.items()},
                  f, indent=1)
        f.write("\n")


def check(path: str) -> int:
    r = gguf.GGUFReader(path)
    status = 0
    t = r.fields.get("general.type")
    if t is None or bytes(t.parts[t.data[0]]).decode() != "imatrix":
        print("general.type is not 'imatrix'")
        status = 1
    tensors = {t.name: t for t in r.tensors}
    for name, t in tensors.items():
        if not name.endswith(".in_sum2"):
            continue
        base = name[: -len(".in_sum2")]
        c = tensors.get(base + ".counts")
        ok = (c is not None and t.tensor_type == gguf.GGMLQuantizationType.F32
              and c.tensor_type == gguf.GGMLQuantizationType.F32 and list(c.shape) == [1, 1]
              and len(t.shape) == 2 and t.shape[1] == 1 and np.all(np.isfinite(t.data))
              and np.all(t.data >= 0))
        print(f"{base}: {int(t.shape[0])} columns, {float(c.data.ravel()[0]) if c is not None else '?'} rows, "
              f"{'ok' if ok else 'BAD'}")
        status |= 0 if ok else 1
    return status


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        sys.exit(check(sys.argv[2]))
    write(sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures")
