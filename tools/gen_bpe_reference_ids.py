#!/usr/bin/env python3
"""Writes tests/fixtures/bpe_reference_smollm2.json: the token ids a plain-Python byte-level
BPE (GPT-2's bpe() merge loop, written here from scratch) gives for a few strings with the
vocabulary and merges of SmolLM2's GGUF, pre-tokenized with llama.cpp's "smollm" regexes
(\\p{N} then GPT-2's pattern) run by the Python `regex` module. The C++ test
(tests/test_vocab_llamacpp.cpp) must produce the same ids from the GGUF file.

    python3 tools/gen_bpe_reference_ids.py ../shared/models/SmolLM2-135M-Instruct.Q4_1.gguf \\
        > tests/fixtures/bpe_reference_smollm2.json

Only the GGUF metadata is read (a minimal reader below; no gguf package needed).
"""
import json
import struct
import sys

import regex

SMOLLM = [r"\p{N}",
          r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"]

TEXTS = [
    "Hello world",
    "Hello, World! It's 2024 and I'll pay $1,234.56 for 3 apples.",
    "  leading spaces and trailing   ",
    "line one\nline two\r\n\ttabbed\n\n\nend",
    "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n",
    "Ünïcödé: naïve café, Straße, Ελληνικά, Привет мир",
    "中文测试 日本語のテキスト 한국어",
    "emoji 😀👍🏽 and 🦙.cpp",
    "HE'S DON'T we've they'RE",
    "1234567890 x² ½ ٣٤٥",
]


def read_metadata(path):
    with open(path, "rb") as f:
        data = f.read(64 << 20)  # metadata comes first; 64 MiB holds a 150k vocabulary
    pos = 0

    def take(fmt):
        nonlocal pos
        vals = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return vals[0] if len(vals) == 1 else vals

    def string():
        nonlocal pos
        n = take("Q")
        s = data[pos:pos + n].decode("utf-8", errors="surrogateescape")
        pos += n
        return s

    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et = take("I")
            n = take("Q")
            return [value(et) for _ in range(n)]
        return take(scalar[t])

    assert data[:4] == b"GGUF", "not a GGUF file"
    pos = 4
    take("I")  # version
    take("Q")  # tensor count
    n_kv = take("Q")
    meta = {}
    for _ in range(n_kv):
        key = string()
        meta[key] = value(take("I"))
    return meta


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def split(text):
    pieces = [text]
    for pattern in SMOLLM:
        rx = regex.compile(pattern)
        out = []
        for piece in pieces:
            last = 0
            for m in rx.finditer(piece):
                if m.start() > last:
                    out.append(piece[last:m.start()])
                if m.end() > m.start():
                    out.append(m.group())
                last = m.end()
            if last < len(piece):
                out.append(piece[last:])
        pieces = out
    return pieces


def bpe(word, ranks):
    parts = list(word)
    while len(parts) > 1:
        best = None
        for i in range(len(parts) - 1):
            r = ranks.get((parts[i], parts[i + 1]))
            if r is not None and (best is None or r < best[0]):
                best = (r, i)
        if best is None:
            break
        i = best[1]
        parts[i:i + 2] = [parts[i] + parts[i + 1]]
    return parts


def main():
    meta = read_metadata(sys.argv[1])
    assert meta["tokenizer.ggml.pre"] == "smollm", meta.get("tokenizer.ggml.pre")
    tokens = meta["tokenizer.ggml.tokens"]
    vocab = {t: i for i, t in enumerate(tokens)}
    ranks = {}
    for r, m in enumerate(meta["tokenizer.ggml.merges"]):
        a, b = m.split(" ", 1)
        ranks.setdefault((a, b), r)
    b2u = bytes_to_unicode()
    cases = []
    for text in TEXTS:
        ids = []
        for piece in split(text):
            word = "".join(b2u[b] for b in piece.encode("utf-8"))
            ids += [vocab[p] for p in bpe(word, ranks)]
        cases.append({"text": text, "ids": ids})
    out = sys.stdout
    out.write('{"generator": "tools/gen_bpe_reference_ids.py", "model": "SmolLM2-135M-Instruct",\n'
              ' "pre": "smollm", "cases": [\n')
    out.write(",\n".join(json.dumps(c, ensure_ascii=False) for c in cases))
    out.write("\n]}\n")


if __name__ == "__main__":
    main()
