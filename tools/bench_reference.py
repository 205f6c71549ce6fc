#!/usr/bin/env python3
"""Times llmctl and the reference engine (llama.cpp, as llama-cpp-python builds it) on the same
GGUF files, interleaved, and prints the medians side by side with their ratio.

  python tools/bench_reference.py --llmctl build/llmctl -m A.gguf -m B.gguf [-p 512] [-n 128]
                                  [-d 0] [-ctk f16] [-ctv f16] [-r 3] [-t 2] [--json]

Run through scripts/bench-reference.sh, which installs the reference first. For each file and
repetition the reference runs once, then `llmctl bench -r 1` once, so slow and fast phases of
a shared machine hit both alike. The reference is timed around each llama_decode +
llama_synchronize call of its C API, nothing else (its llama_perf_context counters read zero
through this binding in 0.3.36, so they cannot be used); its prefill is one llama_decode of P
tokens (n_batch = n_ubatch = P) and its decode N single-token llama_decode calls from an empty
cache, as llama-bench's ppP and tgN, and as `llmctl bench -p P -n N`.

With -d D, each test first fills D positions of the KV cache (untimed; llama_decode calls of
up to 512 tokens) and then times its P or N tokens after them: llama-bench's -d ("pp512 @
d4096"; it too refills, or restores, the D positions before every repetition), and what
`llmctl bench -d D` measures. -ctk / -ctv set the K and V cache types of both engines
(llama.cpp's type_k / type_v, llmctl bench's -ctk / -ctv): f32, f16 (the default), q8_0,
q4_0. llama.cpp runs without flash attention (llama-cpp-python's default) unless V is
quantized, which llama.cpp only supports with flash attention; then it runs with it, and
--flash-attn turns it on for every run. llmctl uses its default path.

llmctl's probes run in every `llmctl bench` call, just before its timed tests: the memory
read bandwidth and the compute peaks at -t threads. A shared machine's bandwidth can move by
half within minutes (31 and 55 GB/s in one hour on the 2-core EPYC), so each run's figures are
divided by the probes of its own call and the table gives the median of those shares: beside
the ratios, llmctl's decode GB/s and its share of the bandwidth probe (tg rows), and its
prefill share of the compute peak its matmul kernels run at (pp rows: f32 FMA or int8 dot
products, as `llmctl bench` picks per main type). The probe line under the table gives the
probes' medians and ranges over all calls. With --no-probes, or a binary without the compute
probe, those cells stay empty.
"""
import argparse
import json
import statistics
import subprocess
import sys
import time

import llama_cpp


KV_TYPES = {"f32": llama_cpp.GGML_TYPE_F32, "f16": llama_cpp.GGML_TYPE_F16,
            "q8_0": llama_cpp.GGML_TYPE_Q8_0, "q4_0": llama_cpp.GGML_TYPE_Q4_0}
FILL_CHUNK = 512  # tokens per llama_decode call of the untimed depth fill (n_ubatch default)


def token_ids(n, n_vocab):
    # Deterministic ids away from the specials at the start of most vocabularies.
    return [(1000 + 7919 * i) % (n_vocab - 300) + 300 for i in range(n)]


class Reference:
    def __init__(self, path, n_prompt, n_gen, threads, depth=0, type_k="f16", type_v="f16",
                 flash_attn=False):
        # One ubatch holds the whole prompt (the ppP test is one pass) and a fill chunk.
        batch = max(n_prompt, min(depth, FILL_CHUNK), 1)
        self.llm = llama_cpp.Llama(model_path=path, n_ctx=depth + max(n_prompt, n_gen) + 16,
                                   n_batch=batch, n_ubatch=batch, n_threads=threads,
                                   n_threads_batch=threads, type_k=KV_TYPES[type_k],
                                   type_v=KV_TYPES[type_v], flash_attn=flash_attn, verbose=False)
        self.ctx = self.llm._ctx.ctx
        self.n_vocab = self.llm.n_vocab()
        self.depth = depth
        self.batch = batch

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
        """An empty cache, then the -d positions (untimed), as llama-bench before each run."""
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(self.ctx), True)
        fill = token_ids(self.depth, self.n_vocab)
        for i in range(0, len(fill), self.batch):
            self._decode(fill[i:i + self.batch])

    def pp(self, n):
        self._clear()
        return n / self._decode(token_ids(n, self.n_vocab))

    def tg(self, n):
        self._clear()
        return n / sum(self._decode([t]) for t in token_ids(n, self.n_vocab))


PROBE_KEYS = ("probe_gb_s", "peak_gflop_s_f32", "peak_gop_s_int8")


def llmctl_once(exe, path, n_prompt, n_gen, threads, depth=0, type_k="f16", type_v="f16",
                probes=False):
    """{"pp"/"tg": row} of one `llmctl bench -r 1`, and its probes (PROBE_KEYS; None where it
    did not measure one: probes off, or a binary without the compute probe)."""
    out = subprocess.run([exe, "bench", "-m", path, "-p", str(n_prompt), "-n", str(n_gen), "-r", "1",
                          "-d", str(depth), "-ctk", type_k, "-ctv", type_v, "-t", str(threads)]
                         + ([] if probes else ["--probe-mib", "0"]) + ["--json"],
                         check=True, capture_output=True, text=True).stdout
    j = json.loads(out)
    return ({r["test"][:2]: r for r in j["rows"]},
            {k: (j.get(k) or None) if probes else None for k in PROBE_KEYS})


def probe_shares(test, rows, probes):
    """llmctl's runs against the probes of their own calls (rows[i] with probes[i]): (median
    GB/s, median % of the bandwidth probe, median % of the compute peak, the peak's kind);
    None where the rows or the probes lack the figure."""
    def median(values):
        v = list(values)
        return statistics.median(v) if v and all(isinstance(x, (int, float)) for x in v) else None

    def share(key, probe_key):
        return median(100 * r[key] / p[probe_key] if r.get(key) and p.get(probe_key) else None
                      for r, p in zip(rows, probes))

    if test == "tg":
        return median(r.get("gb_s") for r in rows), share("gb_s", "probe_gb_s"), None, None
    kind = rows[0].get("peak_kind") if rows else None
    key = {"f32": "peak_gflop_s_f32", "int8": "peak_gop_s_int8"}.get(kind)
    return None, None, (share("gflop_s", key) if key else None), kind


def probe_summary(values):
    """{median, min, max} of one probe over the calls that measured it, or None."""
    v = [x for x in values if isinstance(x, (int, float))]
    return {"median": statistics.median(v), "min": min(v), "max": max(v)} if v else None


def cell(x, fmt):
    return "" if x is None else fmt.format(x)


def main():
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()),
                                 epilog="Method and the meaning of -d, -ctk, -ctv: this file's "
                                        "docstring (tools/bench_reference.py).")
    ap.add_argument("--llmctl", default="build/llmctl")
    ap.add_argument("-m", "--model", action="append", required=True)
    ap.add_argument("-p", "--n-prompt", type=int, default=512)
    ap.add_argument("-n", "--n-gen", type=int, default=128)
    ap.add_argument("-d", "--n-depth", type=int, default=0,
                    help="KV cache positions filled (untimed) before each test, as llama-bench's "
                         "-d: pp512 @ d4096 is 512 prompt tokens after 4096 (default 0)")
    ap.add_argument("-ctk", "--cache-type-k", choices=sorted(KV_TYPES), default="f16",
                    help="K cache type of both engines (llama.cpp's type_k; default f16)")
    ap.add_argument("-ctv", "--cache-type-v", choices=sorted(KV_TYPES), default="f16",
                    help="V cache type of both engines (llama.cpp's type_v; default f16). A "
                         "quantized V turns on llama.cpp's flash attention, which it requires")
    ap.add_argument("--flash-attn", action="store_true",
                    help="run llama.cpp with flash attention even when V is not quantized")
    ap.add_argument("-r", "--repetitions", type=int, default=3)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--no-probes", action="store_true",
                    help="skip llmctl's bandwidth and compute-peak probes (their columns stay "
                         "empty)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.n_depth < 0:
        ap.error("-d must be >= 0")
    flash_attn = a.flash_attn or a.cache_type_v not in ("f32", "f16")
    kv = (a.n_depth, a.cache_type_k, a.cache_type_v)
    suffix = f" @ d{a.n_depth}" if a.n_depth > 0 else ""

    results = []
    all_probes = []  # every llmctl call's probes (none with --no-probes)
    for path in a.model:
        print(f"bench-reference: {path}", file=sys.stderr)
        ref = Reference(path, a.n_prompt, a.n_gen, a.threads, *kv, flash_attn=flash_attn)
        ref.pp(min(max(a.n_prompt, 1), 32))  # warm-up as llmctl bench (-p 0: one token)
        rates = {("ref", "pp"): [], ("ref", "tg"): [], ("llmctl", "pp"): [], ("llmctl", "tg"): []}
        ours_rows = {"pp": [], "tg": []}
        ours_probes = {"pp": [], "tg": []}  # the probes of each row's own call
        wtype = "?"
        for _ in range(a.repetitions):
            if a.n_prompt > 0:
                rates[("ref", "pp")].append(ref.pp(a.n_prompt))
            if a.n_gen > 0:
                rates[("ref", "tg")].append(ref.tg(a.n_gen))
            ours, measured = llmctl_once(a.llmctl, path, a.n_prompt, a.n_gen, a.threads, *kv,
                                         probes=not a.no_probes)
            if not a.no_probes:
                all_probes.append(measured)
            for test, row in ours.items():
                rates[("llmctl", test)].append(row["tok_s"])
                ours_rows[test].append(row)
                ours_probes[test].append(measured)
                wtype = row["type"]
        del ref
        for test, n in (("pp", a.n_prompt), ("tg", a.n_gen)):
            if n <= 0:
                continue
            r = statistics.median(rates[("ref", test)])
            o = statistics.median(rates[("llmctl", test)])
            gb_s, bw_pct, peak_pct, peak_kind = probe_shares(test, ours_rows[test],
                                                              ours_probes[test])
            results.append({"model": path, "type": wtype, "test": f"{test}{n}{suffix}",
                            "threads": a.threads, "depth": a.n_depth,
                            "cache_type_k": a.cache_type_k, "cache_type_v": a.cache_type_v,
                            "reference_flash_attn": flash_attn,
                            "reference_tok_s": r, "llmctl_tok_s": o, "ratio": o / r,
                            "llmctl_gb_s": gb_s, "llmctl_bw_pct": bw_pct,
                            "llmctl_peak_pct": peak_pct, "llmctl_peak_kind": peak_kind,
                            "reference_runs": rates[("ref", test)],
                            "llmctl_runs": rates[("llmctl", test)]})

    probes = {k: probe_summary([p[k] for p in all_probes]) for k in PROBE_KEYS}
    if a.json:
        print(json.dumps({"reference": f"llama-cpp-python {llama_cpp.__version__}",
                          "repetitions": a.repetitions, "llmctl_probes": probes,
                          "rows": results}, indent=2))
        return
    kv_note = (f", KV {a.cache_type_k}/{a.cache_type_v}"
               if (a.cache_type_k, a.cache_type_v) != ("f16", "f16") else "")
    fa_note = ", reference with flash attention" if flash_attn else ""
    print(f"reference: llama-cpp-python {llama_cpp.__version__}; medians of {a.repetitions} "
          f"interleaved runs, {a.threads} threads{kv_note}{fa_note}\n")
    print("| file | main type | test | reference t/s | llmctl t/s | llmctl / reference | "
          "llmctl GB/s | % of bandwidth probe | % of compute peak |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for r in results:
        peak = cell(r["llmctl_peak_pct"], "{:.0f}%")
        print(f"| {r['model'].rsplit('/', 1)[-1]} | {r['type']} | {r['test']} | "
              f"{r['reference_tok_s']:.2f} | {r['llmctl_tok_s']:.2f} | **{r['ratio']:.2f}** | "
              f"{cell(r['llmctl_gb_s'], '{:.1f}')} | {cell(r['llmctl_bw_pct'], '{:.0f}%')} | "
              f"{peak + ' ' + r['llmctl_peak_kind'] if peak else ''} |")
    measured = [cell(probes[k], f) for k, f in (
        ("probe_gb_s", "memory read {0[median]:.1f} GB/s ({0[min]:.1f} to {0[max]:.1f})"),
        ("peak_gflop_s_f32", "f32 FMA {0[median]:.1f} GFLOP/s ({0[min]:.1f} to {0[max]:.1f})"),
        ("peak_gop_s_int8", "int8 {0[median]:.1f} GOP/s ({0[min]:.1f} to {0[max]:.1f})"))]
    if any(measured):
        print(f"\nllmctl probes ({a.threads} threads; median and range over "
              f"{len(all_probes)} calls): {', '.join(m for m in measured if m)}")

if __name__ == "__main__":
    main()
