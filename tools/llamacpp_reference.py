#!/usr/bin/env python3
"""llama.cpp (the llama-cpp-python package) as an independent reference for llmctl.

For every prompt it records llama.cpp's tokenization (its default: BOS as the model says,
special tokens parsed) and the greedy continuation on llama.cpp's most precise CPU path
(F32 KV cache, no flash attention, 2 threads): per generated position the chosen id, the
margin between the two largest logits and the top-8 (id, logit) pairs, plus a compact view
of the last prompt position's logits (summary statistics, the top-32 pairs and every
STRIDE-th logit of the row). The output stays small enough to commit (< 200 KB per model).

It needs the reference venv from scripts/install-reference.sh; llmctl never needs it.

Regenerate the committed fixtures (tests/fixtures/llamacpp_*.json) with:

  V=${LLMCTL_REF_VENV:-$HOME/.cache/llmctl/ref-venv}
  $V/bin/python tools/llamacpp_reference.py ../shared/models/SmolLM2-135M-Instruct.Q4_1.gguf \\
      --prompts tests/fixtures/llamacpp_smollm2_prompts.json -n 24 \\
      --out tests/fixtures/llamacpp_smollm2.json
  $V/bin/python tools/llamacpp_reference.py ~/.cache/llmctl/models/gemma-3-270m-q4_k_m.gguf \\
      --prompts tests/fixtures/llamacpp_gemma3_270m_prompts.json -n 24 \\
      --out tests/fixtures/llamacpp_gemma3_270m.json

The prompts file is a JSON list of {"name": ..., "prompt": ...}.
"""

import argparse
import hashlib
import json
import math
import os
import platform
import sys

import numpy as np

try:
    import llama_cpp
except ImportError:  # pragma: no cover - a usage error, not a test
    sys.exit("llamacpp_reference: llama_cpp is missing; run scripts/install-reference.sh and use its venv's python")

# The llama.cpp commit each pinned llama-cpp-python release vendors (its CHANGELOG entry and
# the sdist's vendor/llama.cpp submodule pointer). The library itself does not expose it, and
# its build number is meaningless: the sdist's shallow submodule makes build-info count 1.
VENDORED_LLAMA_CPP = {"0.3.36": "0c1e57098bba43ac29e6e3b677cdceebdd22334f"}

SEED = 1234
TOP_N = 8
TOP_LAST = 32


def cpu_name():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def r4(x):
    # Four decimals are far below the tolerance any test applies to a logit (>= 1e-2).
    return round(float(x), 4)


def top_pairs(row, n):
    # Ties broken by the smaller id, as a stable argmax would.
    order = np.lexsort((np.arange(row.size), -row.astype(np.float64)))[:n]
    return [[int(i), r4(row[i])] for i in order]


def compact_logits(row, stride):
    r = row.astype(np.float64)
    return {
        "n_vocab": int(row.size),
        "mean": r4(r.mean()),
        "std": r4(r.std()),
        "max": r4(r.max()),
        "min": r4(r.min()),
        "argmax": int(np.argmax(row)),
        "top": top_pairs(row, TOP_LAST),
        "stride": stride,
        "sampled": [r4(v) for v in row[::stride]],
    }


def write_fixture(path, obj):
    # One compact line: the fixtures are committed, so every byte counts.
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {path} ({os.path.getsize(path)} bytes)", file=sys.stderr)


def run_case(llm, prompt, n_predict, add_bos, stride):
    ids = llm.tokenize(prompt.encode("utf-8"), add_bos=add_bos, special=True)
    llm.reset()
    llm.eval(ids)
    last = np.array(llm.scores[len(ids) - 1], dtype=np.float32)
    steps, generated = [], []
    row = last
    for i in range(n_predict):
        tok = int(np.argmax(row))  # first maximum: the smallest id among ties
        top = top_pairs(row, TOP_N)
        steps.append({"id": tok, "margin": round(float(top[0][1]) - float(top[1][1]), 5), "top": top})
        generated.append(tok)
        if i + 1 < n_predict:
            llm.eval([tok])
            row = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
    text = llm.detokenize(generated, special=True).decode("utf-8", errors="replace")
    return {
        "prompt": prompt,
        "add_bos": add_bos,
        "prompt_ids": [int(t) for t in ids],
        "generated_ids": generated,
        "generated_text": text,
        "steps": steps,
        "last_prompt_logits": compact_logits(last, stride),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--prompts", required=True, help="JSON list of {name, prompt}")
    ap.add_argument("-n", type=int, default=24, help="greedy tokens per prompt")
    ap.add_argument("--out", required=True)
    ap.add_argument("--samples", type=int, default=1536,
                    help="about how many logits of the last prompt row to keep (every ceil(n_vocab/S)-th)")
    args = ap.parse_args()

    with open(args.prompts, encoding="utf-8") as f:
        prompts = json.load(f)
    longest = 0
    settings = dict(n_threads=2, n_threads_batch=2, flash_attn=False, type_k=0, type_v=0,
                    logits_all=True, seed=SEED, n_gpu_layers=0)
    # Context: room for the longest prompt (tokenized by a throwaway vocab-only model) plus -n.
    probe = llama_cpp.Llama(args.model, vocab_only=True, verbose=False)
    add_bos = bool(probe._model.add_bos_token())
    for p in prompts:
        longest = max(longest, len(probe.tokenize(p["prompt"].encode("utf-8"), add_bos=add_bos, special=True)))
    del probe
    n_ctx = max(256, 64 * math.ceil((longest + args.n) / 64))
    llm = llama_cpp.Llama(args.model, n_ctx=n_ctx, n_batch=512, verbose=False, **settings)
    n_vocab = llm.n_vocab()
    stride = max(1, math.ceil(n_vocab / args.samples))

    cases = []
    for p in prompts:
        case = run_case(llm, p["prompt"], args.n, add_bos, stride)
        cases.append({"name": p["name"], **case})
        print(f"{p['name']}: {len(case['prompt_ids'])} prompt ids, min margin "
              f"{min(s['margin'] for s in case['steps']):.4f}: {case['generated_text']!r}", file=sys.stderr)

    version = llama_cpp.__version__
    out = {
        "generator": "tools/llamacpp_reference.py",
        "command": "python tools/llamacpp_reference.py " + " ".join(
            [os.path.basename(args.model), "--prompts", args.prompts, "-n", str(args.n), "--out", args.out]),
        "llama_cpp_python": version,
        "llama_cpp_commit": VENDORED_LLAMA_CPP.get(version, "unknown"),
        "cpu": cpu_name(),
        "system_info": llama_cpp.llama_print_system_info().decode("utf-8", errors="replace").strip(),
        "model": os.path.basename(args.model),
        "model_sha256": sha256_of(args.model),
        "settings": {**settings, "n_ctx": n_ctx, "n_batch": 512, "eval": "prompt in one batch, then one token per step",
                     "add_bos": add_bos, "tokenize": "special=True"},
        "n_predict": args.n,
        "cases": cases,
    }
    write_fixture(args.out, out)


if __name__ == "__main__":
    main()
