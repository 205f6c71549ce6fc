"""Importance matrices for llama.cpp's llama_model_quantize through ctypes (llama-cpp-python).

llama_model_quantize_params.imatrix is a NULL-terminated array of llama_model_imatrix_data
(name, data, size): per weight tensor, the column weights llama-quantize would pass. Used by
tools/check_quantize_llamacpp.py and tools/gen_quant_mix_fixture.py (import it from there:
the scripts' directory is on sys.path when they run).
"""
import ctypes

import llama_cpp
import numpy as np
from gguf import GGUFReader


def c_imatrix(entries):
    """(name, float32 array) pairs -> (the C array, the arrays it points into: keep them)."""
    keep = [(name.encode(), np.ascontiguousarray(v, np.float32)) for name, v in entries]
    arr = (llama_cpp.llama_model_imatrix_data * (len(keep) + 1))()
    for i, (name, v) in enumerate(keep):
        arr[i].name = name
        arr[i].data = v.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
        arr[i].size = v.size
    arr[len(keep)].name = None
    return arr, keep


def set_imatrix(params, arr):
    """Points llama_model_quantize_params at a c_imatrix array."""
    params.imatrix = ctypes.cast(arr, ctypes.POINTER(llama_cpp.llama_model_imatrix_data))


def gguf_column_weights(path):
    """llama-quantize's column weights from an imatrix GGUF: X.in_sum2 / X.counts per expert
    row, in float32; 1 where the count is 0 (a tensor the calibration never reached)."""
    t = {x.name: x for x in GGUFReader(path).tensors}
    out = []
    for name in sorted(n[: -len(".in_sum2")] for n in t if n.endswith(".in_sum2")):
        sums = np.asarray(t[name + ".in_sum2"].data, np.float32).reshape(-1)
        counts = np.asarray(t[name + ".counts"].data, np.float32).reshape(-1)
        ne0 = sums.size // counts.size
        e = np.ones_like(sums)
        for j, c in enumerate(counts):
            if c > 0:
                e[j * ne0:(j + 1) * ne0] = sums[j * ne0:(j + 1) * ne0] / c  # float32 division
        out.append((name, e))
    return out
