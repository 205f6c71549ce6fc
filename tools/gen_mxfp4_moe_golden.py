#!/usr/bin/env python3
"""llama.cpp's MXFP4_MOE quantization of the MoE fixtures, for tests/test_cli_quantize_mxfp4.cpp.

For each of tests/fixtures/family_moe_{mixtral,qwen3moe}/model.gguf (F32, written by
tools/gen_moe_fixtures.py), llama-cpp-python's llama_model_quantize with
LLAMA_FTYPE_MOSTLY_MXFP4_MOE (38; no importance matrix, 2 threads) writes a quantized file,
and this script stores per tensor its ggml type name and a 64-bit FNV-1a hash of its bytes
(equal hashes: identical bytes), plus the tensor count, and llama.cpp's logits on that
quantized file at every position of gen_moe_fixtures.py's TOKENS (its precise CPU path and
settings, the tokens in one batch; its MXFP4 and Q8_0 matmuls round the activations to Q8_0),
in tests/fixtures/quant_mxfp4_moe_llamacpp.json.
(qwen3moe's ffn_down_exps has rows of 16, which MXFP4's 32-element block does not divide:
llama.cpp 0.3.36 warns and writes them F16, as llmctl does.) A family llama.cpp refuses would
be stored as {"error": "..."}.

    ~/.cache/llmctl/ref-venv/bin/python tools/gen_mxfp4_moe_golden.py tests/fixtures
"""
import ctypes
import json
import os
import sys
import tempfile

FAMILIES = ["mixtral", "qwen3moe"]


def fnv1a_64(data: bytes) -> str:
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def main():
    import gguf
    import llama_cpp

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from gen_moe_fixtures import COMMON, TOKENS, llamacpp_run
    settings = dict(n_ctx=COMMON["n_ctx"], n_batch=64, n_threads=2, n_threads_batch=2,
                    flash_attn=False, type_k=0, type_v=0, logits_all=True, n_gpu_layers=0,
                    seed=1234)

    out_dir = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures"
    golden = {"generator": "tools/gen_mxfp4_moe_golden.py",
              "llama_cpp_python": llama_cpp.__version__, "ftype": 38, "families": {}}
    for family in FAMILIES:
        src = os.path.join(out_dir, f"family_moe_{family}", "model.gguf")
        with tempfile.TemporaryDirectory() as tmp:
            dst = os.path.join(tmp, "q.gguf")
            params = llama_cpp.llama_model_quantize_default_params()
            params.ftype = 38  # LLAMA_FTYPE_MOSTLY_MXFP4_MOE
            params.nthread = 2
            try:
                rc = llama_cpp.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(params))
            except Exception as e:  # llama.cpp throws through the C API as an error code
                rc, msg = 1, str(e)
            else:
                msg = f"llama_model_quantize returned {rc}"
            if rc != 0:
                golden["families"][family] = {"error": msg}
                print(f"{family}: {msg}", file=sys.stderr)
                continue
            r = gguf.GGUFReader(dst)
            tensors = {t.name: {"type": t.tensor_type.name, "fnv1a": fnv1a_64(bytes(t.data.tobytes()))}
                       for t in r.tensors}
            logits, _ = llamacpp_run(llama_cpp, dst, settings)
            golden["families"][family] = {
                "n_tensors": len(tensors), "tensors": tensors, "tokens": TOKENS,
                "logits": [[float(f"{x:.7g}") for x in r] for r in logits.tolist()]}
            print(f"{family}: {len(tensors)} tensors, types "
                  f"{sorted(set(v['type'] for v in tensors.values()))}", file=sys.stderr)
    with open(os.path.join(out_dir, "quant_mxfp4_moe_llamacpp.json"), "w") as f:
        json.dump(golden, f, sort_keys=True, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
