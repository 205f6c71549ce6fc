#!/usr/bin/env python3
"""llama-perplexity's perplexity, computed by llama.cpp itself, as a reference for `llmctl eval
--scoring llama-cpp`.

The llama-cpp-python package ships the llama.cpp library but not the llama-perplexity
program, so this script runs the program's default algorithm (tools/perplexity/perplexity.cpp,
function perplexity()) through the package's low-level API (llama_batch / llama_decode):

  - the text is read as its -f reads a file: one final newline dropped;
  - tokenized with add_special=True (BOS when the vocabulary wants it), parse_special=False;
  - cut into floor(n_tokens / n_ctx) chunks of n_ctx tokens; fewer than 2 * n_ctx tokens is
    an error, as there;
  - each chunk from an empty KV cache (llama_memory_clear), its first token replaced by BOS,
    logits asked for the positions >= n_ctx/2 only; positions n_ctx/2 .. n_ctx-2 are scored,
    each predicting the next token, with llama-perplexity's log-softmax (float max, float
    expf terms summed in double);
  - perplexity = exp(sum of NLL / count).

One difference in batching only: llama-perplexity packs n_batch / n_ctx chunks (2048 / n_ctx
by default) into one llama_decode as separate sequences; here each chunk is one decode of
n_ctx tokens (one sequence). Each sequence attends to its own tokens only in both, so the
math is the same; the kernels' rounding may differ in the last bits.

Precision: llama.cpp's most precise CPU path (no flash attention, F32 K and V cache, no GPU
layers, 2 threads), as tools/llamacpp_reference.py uses.

It needs the reference venv from scripts/install-reference.sh; llmctl never needs it.

Regenerate the committed fixture with (the second file holds the Q4_1 file's weights in F16,
so that neither engine rounds activations to 8 bits: tests/test_eval_llamacpp.cpp says why):

  V=${LLMCTL_REF_VENV:-$HOME/.cache/llmctl/ref-venv}
  build/llmctl quantize ../shared/models/SmolLM2-135M-Instruct.Q4_1.gguf \\
      /tmp/SmolLM2-135M-Instruct.F16-from-Q4_1.gguf --type f16 --allow-requantize
  $V/bin/python tools/llamacpp_perplexity.py ../shared/models/SmolLM2-135M-Instruct.Q4_1.gguf \\
      /tmp/SmolLM2-135M-Instruct.F16-from-Q4_1.gguf \\
      --text tests/fixtures/declaration_of_independence.txt --ctx 128,256 \\
      --text-source "United States Declaration of Independence (1776), public domain" \\
      --out tests/fixtures/llamacpp_perplexity_smollm2.json

and the long-text fixture (about 40,000 tokens: the noise of 8-bit activation rounding averages
out there, so the Q4_1 file itself is compared within 0.5 %) with

  L=/usr/share/common-licenses
  $V/bin/python tools/llamacpp_perplexity.py ../shared/models/SmolLM2-135M-Instruct.Q4_1.gguf \
      --text $L/GPL-3 --text $L/LGPL-2.1 --text $L/GFDL-1.3 --text $L/MPL-2.0 \
      --text $L/Apache-2.0 --text $L/GPL-2 --text $L/MPL-1.1 --text $L/LGPL-2 --ctx 512 \
      --text-source "Debian base-files /usr/share/common-licenses (licence texts), concatenated" \
      --out tests/fixtures/llamacpp_perplexity_smollm2_licenses.json
"""

import argparse
import ctypes
import hashlib
import json
import math
import os
import sys

import numpy as np

# The pinned llama.cpp commit table and the file hash live there (it also imports llama_cpp
# and says how to install it when it is missing).
from llamacpp_reference import VENDORED_LLAMA_CPP, llama_cpp, sha256_of, write_fixture

GGML_TYPE_F32 = 0
THREADS = 2


def tokenize(vocab, text):
    data = text.encode("utf-8")
    cap = len(data) + 16
    while True:
        buf = (llama_cpp.llama_token * cap)()
        n = llama_cpp.llama_tokenize(vocab, data, len(data), buf, cap, True, False)
        if n >= 0:
            return [int(buf[i]) for i in range(n)]
        cap = -n


def nll_of(row, target):
    # llama-perplexity's log_softmax(): the max in float, expf(logit - max) summed in double.
    max_logit = np.float32(row.max())
    terms = np.exp((row - max_logit).astype(np.float32), dtype=np.float32)
    sum_exp = float(np.sum(terms, dtype=np.float64))
    return -(float(row[target] - max_logit) - math.log(sum_exp))


def perplexity(model, vocab, tokens, n_ctx, add_bos):
    if len(tokens) < 2 * n_ctx:
        sys.exit(f"llamacpp_perplexity: {len(tokens)} tokens; n_ctx {n_ctx} needs at least {2 * n_ctx}")
    cp = llama_cpp.llama_context_default_params()
    cp.n_ctx = n_ctx
    cp.n_batch = n_ctx
    cp.n_ubatch = n_ctx
    cp.n_seq_max = 1
    cp.n_threads = THREADS
    cp.n_threads_batch = THREADS
    cp.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
    cp.type_k = GGML_TYPE_F32
    cp.type_v = GGML_TYPE_F32
    ctx = llama_cpp.llama_init_from_model(model, cp)
    if not ctx:
        sys.exit("llamacpp_perplexity: llama_init_from_model failed")
    n_vocab = llama_cpp.llama_vocab_n_tokens(vocab)
    bos = llama_cpp.llama_vocab_bos(vocab)
    first = n_ctx // 2
    n_chunk = len(tokens) // n_ctx
    batch = llama_cpp.llama_batch_init(n_ctx, 0, 1)
    nll, count, running, per_token = 0.0, 0, [], []
    try:
        for i in range(n_chunk):
            start = i * n_ctx
            chunk = list(tokens[start:start + n_ctx])
            if add_bos:
                chunk[0] = bos
            llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(ctx), True)
            batch.n_tokens = n_ctx
            for k, tok in enumerate(chunk):
                batch.token[k] = tok
                batch.pos[k] = k
                batch.n_seq_id[k] = 1
                batch.seq_id[k][0] = 0
                batch.logits[k] = 1 if k >= first else 0
            if llama_cpp.llama_decode(ctx, batch) != 0:
                sys.exit(f"llamacpp_perplexity: llama_decode failed on chunk {i}")
            for j in range(first, n_ctx - 1):
                ptr = llama_cpp.llama_get_logits_ith(ctx, j)
                row = np.ctypeslib.as_array(ctypes.cast(ptr, ctypes.POINTER(ctypes.c_float)), shape=(n_vocab,))
                per_token.append(nll_of(row.copy(), chunk[j + 1]))
                nll += per_token[-1]
                count += 1
            running.append(round(math.exp(nll / count), 4))  # as its "[i]ppl," progress line
    finally:
        llama_cpp.llama_batch_free(batch)
        llama_cpp.llama_free(ctx)
    return {"n_ctx": n_ctx, "n_chunks": n_chunk, "n_scored": count, "mean_nll": nll / count,
            "ppl": math.exp(nll / count), "running_ppl": running}, per_token


def run_model(path, text, ctx_values):
    """(add_bos, token ids, results per n_ctx) of one GGUF file."""
    mp = llama_cpp.llama_model_default_params()
    mp.n_gpu_layers = 0
    model = llama_cpp.llama_model_load_from_file(path.encode("utf-8"), mp)
    if not model:
        sys.exit(f"llamacpp_perplexity: cannot load {path}")
    vocab = llama_cpp.llama_model_get_vocab(model)
    add_bos = bool(llama_cpp.llama_vocab_get_add_bos(vocab))
    if llama_cpp.llama_vocab_get_add_eos(vocab):
        sys.exit("llamacpp_perplexity: the vocabulary adds EOS; llama-perplexity refuses such a model")
    tokens = tokenize(vocab, text)
    results, per_token = [], {}
    for n_ctx in ctx_values:
        r, per_token[n_ctx] = perplexity(model, vocab, tokens, n_ctx, add_bos)
        print(f"{os.path.basename(path)} n_ctx {n_ctx}: {r['n_chunks']} chunks, {r['n_scored']} scored, "
              f"PPL = {r['ppl']:.4f}", file=sys.stderr)
        results.append(r)
    llama_cpp.llama_model_free(model)
    return add_bos, tokens, results, per_token


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="+", help="GGUF files of one vocabulary")
    ap.add_argument("--text", required=True, action="append",
                    help="UTF-8 text file (read as llama-perplexity -f reads it); given more than once, "
                         "the files are concatenated in order, as `cat A B > F` would")
    ap.add_argument("--text-source", default="", help="where the text comes from, for the record")
    ap.add_argument("--ctx", default="512", help="comma-separated n_ctx values (llama-perplexity -c; default 512)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--nll-out", help="also write every scored token's NLL (JSON: model -> n_ctx -> list), "
                                      "to compare engines token by token; not part of the fixture")
    args = ap.parse_args()

    raw = b""
    for path in args.text:
        with open(path, "rb") as f:
            raw += f.read()
    text = raw.decode("utf-8")
    if text.endswith("\n"):
        text = text[:-1]
    llama_cpp.llama_backend_init()
    ctx_values = [int(c) for c in args.ctx.split(",")]
    models, tokens, add_bos, nll_by_model = [], None, None, {}
    for path in args.models:
        bos, ids, results, nll_by_model[os.path.basename(path)] = run_model(path, text, ctx_values)
        if tokens is not None and (ids != tokens or bos != add_bos):
            sys.exit(f"llamacpp_perplexity: {path} tokenizes the text differently from {args.models[0]}")
        tokens, add_bos = ids, bos
        models.append({"model": os.path.basename(path), "model_sha256": sha256_of(path), "results": results})

    version = llama_cpp.__version__
    out = {
        "generator": "tools/llamacpp_perplexity.py",
        "command": "python tools/llamacpp_perplexity.py " + " ".join(
            [os.path.basename(m) for m in args.models] +
            [a for t in args.text for a in ("--text", t)] + ["--ctx", args.ctx, "--out", args.out]),
        "llama_cpp_python": version,
        "llama_cpp_commit": VENDORED_LLAMA_CPP.get(version, "unknown"),
        "system_info": llama_cpp.llama_print_system_info().decode("utf-8", errors="replace").strip(),
        "text": args.text[0] if len(args.text) == 1 else args.text,
        "text_sha256": hashlib.sha256(raw).hexdigest(),  # of the files as read, concatenated
        "text_source": args.text_source,
        "settings": {"flash_attn": False, "type_k": "f32", "type_v": "f32", "n_gpu_layers": 0,
                     "n_threads": THREADS, "one chunk per llama_decode": True,
                     "tokenize": "add_special=True, parse_special=False, one final newline dropped"},
        "add_bos": add_bos,
        "n_tokens": len(tokens),
        "token_ids": tokens,
        "models": models,
    }
    write_fixture(args.out, out)
    if args.nll_out:
        with open(args.nll_out, "w", encoding="utf-8") as f:
            json.dump(nll_by_model, f)


if __name__ == "__main__":
    main()
