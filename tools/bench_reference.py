#!/usr/bin/env python3
"""Times llmctl and the reference engine (llama.cpp, as llama-cpp-python builds it) on the same
GGUF files, interleaved, and prints the medians side by side with their ratio.

  python tools/bench_reference.py --llmctl build/llmctl -m A.gguf -m B.gguf [-p 512] [-n 128]
                                  [-r 3] [-t 2] [--json]

Run through scripts/bench-reference.sh, which installs the reference first. For each file and
repetition the reference runs once, then `llmctl bench -r 1` once, so slow and fast phases of
a shared machine hit both alike. The reference is timed around each llama_decode +
llama_synchronize call of its C API, nothing else (its llama_perf_context counters read zero
through this binding in 0.3.36, so they cannot be used); its prefill is one llama_decode of P
tokens (n_batch = n_ubatch = P) and its decode N single-token llama_decode calls from an empty
cache, as llama-bench's ppP and tgN, and as `llmctl bench -p P -n N`. Both engines use their default paths (llama.cpp:
its default flash-attention and KV settings; llmctl: f16 KV).
"""
import argparse
import json
import statistics
import subprocess
import sys
import time

import llama_cpp


def token_ids(n, n_vocab):
    # Deterministic ids away from the specials at the start of most vocabularies.
    return [(1000 + 7919 * i) % (n_vocab - 300) + 300 for i in range(n)]


class Reference:
    def __init__(self, path, n_prompt, n_gen, threads):
        self.llm = llama_cpp.Llama(model_path=path, n_ctx=max(n_prompt, n_gen) + 16,
                                   n_batch=max(n_prompt, 1), n_ubatch=max(n_prompt, 1),
                                   n_threads=threads, n_threads_batch=threads, verbose=False)
        self.ctx = self.llm._ctx.ctx
        self.n_vocab = self.llm.n_vocab()

    def _decode(self, tokens):
        arr = (llama_cpp.llama_token * len(tokens))(*tokens)
        t0 = time.perf_counter()
        rc = llama_cpp.llama_decode(self.ctx, llama_cpp.llama_batch_get_one(arr, len(tokens)))
        llama_cpp.llama_synchronize(self.ctx)
        dt = time.perf_counter() - t0
        if rc != 0:
            raise SystemExit(f"bench-reference: llama_decode failed ({rc})")
        return dt

    def _clear(self):
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(self.ctx), True)

    def pp(self, n):
        self._clear()
        return n / self._decode(token_ids(n, self.n_vocab))

    def tg(self, n):
        self._clear()
        return n / sum(self._decode([t]) for t in token_ids(n, self.n_vocab))


def llmctl_once(exe, path, n_prompt, n_gen, threads):
    out = subprocess.run([exe, "bench", "-m", path, "-p", str(n_prompt), "-n", str(n_gen), "-r", "1",
                          "-t", str(threads), "--probe-mib", "0", "--json"],
                         check=True, capture_output=True, text=True).stdout
    rows = json.loads(out)["rows"]
    return {r["test"][:2]: (r["tok_s"], r["type"]) for r in rows}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--llmctl", default="build/llmctl")
    ap.add_argument("-m", "--model", action="append", required=True)
    ap.add_argument("-p", "--n-prompt", type=int, default=512)
    ap.add_argument("-n", "--n-gen", type=int, default=128)
    ap.add_argument("-r", "--repetitions", type=int, default=3)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()

    results = []
    for path in a.model:
        print(f"bench-reference: {path}", file=sys.stderr)
        ref = Reference(path, a.n_prompt, a.n_gen, a.threads)
        ref.pp(min(a.n_prompt, 32))  # warm-up, as llmctl bench does
        rates = {("ref", "pp"): [], ("ref", "tg"): [], ("llmctl", "pp"): [], ("llmctl", "tg"): []}
        wtype = "?"
        for _ in range(a.repetitions):
            if a.n_prompt > 0:
                rates[("ref", "pp")].append(ref.pp(a.n_prompt))
            if a.n_gen > 0:
                rates[("ref", "tg")].append(ref.tg(a.n_gen))
            ours = llmctl_once(a.llmctl, path, a.n_prompt, a.n_gen, a.threads)
            for test, (tok_s, wtype) in ours.items():
                rates[("llmctl", test)].append(tok_s)
        del ref
        for test, n in (("pp", a.n_prompt), ("tg", a.n_gen)):
            if n <= 0:
                continue
            r = statistics.median(rates[("ref", test)])
            o = statistics.median(rates[("llmctl", test)])
            results.append({"model": path, "type": wtype, "test": f"{test}{n}", "threads": a.threads,
                            "reference_tok_s": r, "llmctl_tok_s": o, "ratio": o / r,
                            "reference_runs": rates[("ref", test)],
                            "llmctl_runs": rates[("llmctl", test)]})

    if a.json:
        print(json.dumps({"reference": f"llama-cpp-python {llama_cpp.__version__}",
                          "repetitions": a.repetitions, "rows": results}, indent=2))
        return
    print(f"reference: llama-cpp-python {llama_cpp.__version__}; medians of {a.repetitions} "
          f"interleaved runs, {a.threads} threads\n")
    print("| file | main type | test | reference t/s | llmctl t/s | llmctl / reference |")
    print("|---|---|---|---:|---:|---:|")
    for r in results:
        print(f"| {r['model'].rsplit('/', 1)[-1]} | {r['type']} | {r['test']} | "
              f"{r['reference_tok_s']:.2f} | {r['llmctl_tok_s']:.2f} | **{r['ratio']:.2f}** |")


if __name__ == "__main__":
    main()
