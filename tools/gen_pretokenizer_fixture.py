#!/usr/bin/env python3
"""Writes tests/fixtures/pretokenizer_cases.json: how the GPT-2 and Llama 3 pre-tokenizer
patterns split a set of tricky strings, computed with the `regex` module (a backtracking
engine with \\p{..} support, like the ones HF tokenizers and tiktoken use). The C++
pre-tokenizer (src/tokenizer/pretokenizer.cpp) must reproduce every split exactly.

    pip install regex
    python3 tools/gen_pretokenizer_fixture.py [../shared/vocab/ggml-vocab-gpt-2.gguf.inp] \\
        > tests/fixtures/pretokenizer_cases.json

The strings are llama.cpp's gpt-2 vocabulary test inputs (when the .inp file is given or
found beside the checkout), hand-picked cases, and seeded random mixes of tricky characters.
Only valid UTF-8 appears here: JSON cannot hold invalid bytes, and the C++ tests cover them.
A string with a character that the `regex` module's Unicode version classifies differently
from this Python's unicodedata (which generated the C++ tables) is refused, so the fixture
never encodes a Unicode version difference.
"""
import json
import os
import random
import sys
import unicodedata

import regex

GPT2 = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
LLAMA3 = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"""
          r""" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")

HAND_PICKED = [
    # contractions, both cases, and things that look like them
    "He's", "HE'S", "she'Ll", "we'VE", "I'M", "they'RE", "you'D", "'s'S'ſ", "it'ſ x",
    "don't", "DON'T", "' s", "''s", "'re'Ve'lL", "'x", "rock'n'roll", "’s curly",
    # runs of digits, other number kinds
    "1", "12", "123", "1234", "12345", "123456", "1234567", "a1234567b", " 1234", "x 12",
    "٣٤٥٦٧", "½¾", "Ⅻ Ⅺ", "1.5e10", "3,000,000", "-42", "v2.0.1",
    # CR, LF, CRLF
    "a\r\nb", "line1\r\n\r\nline2", "\r\n", "\r", "\r\r\n\n", " \r\n ", "x  \r\n  y",
    "!!\r\n", "a\n\n\nb", "hello\n  world", "end\n", "\n\nstart", "\r\n\tindented",
    ". \n", "x\n \n y",
    # tabs and other white space
    "\tfoo", "a\t\tb", " \t x", "\t\t", "\t \t", "a\u000bb\u000cc", "\u0085x",
    "x\u2028y", "\u3000漢字", " \u00a0 x", "\u00a0word", "\u2009thin",
    # runs of spaces
    "a  b", "a   b", "    leading", "trailing   ", "  ", "     x     ", " ", "",
    # emoji, CJK, other scripts, combining marks
    "😀😃 hi 👍🏽", "🦙.cpp", "👨‍👩‍👧 family", "🇺🇸🇫🇷", "我想在apple工作1314151天～",
    "日本語のテキスト", "한국어 텍스트", "e\u0301", "Cafe\u0301 ", "a\u0300\u0301b",
    " \u0301x", "ก่อน", "नमस्ते दुनिया", "مرحبا بالعالم ١٢٣", "Привет, мир!", "Ελληνικά",
    # punctuation and symbols
    "...!!!???", " --- ", "x==y", "(a)", " (normal)", "  !", "!  a", "$$$ 100", "@user #tag",
    "<|endoftext|>", "\"quoted\"", "a/b\\c", "~~~", "→ ∑ ∞",
    # control characters (not White_Space: U+001C..U+001F)
    "\u0000a\u0001", "\u001c\u001d x", "a\u001fb",
    # mixed
    "Hello, World! 123 ABC's", "It's 4:30pm\r\nSee you 'round", "  foo bar  \n\n baz\t",
]

POOL = list(" \t\n\r'sSlLreEvVmMdDtaZé中3٣½!.,-😀\u0301\u00a0\u3000ſ") + ["'s", "'LL", "\r\n", "  "]


def random_cases(count, seed):
    rng = random.Random(seed)
    return ["".join(rng.choice(POOL) for _ in range(rng.randint(1, 14))) for _ in range(count)]


def read_inp(path):
    with open(path, "rb") as f:
        raw = f.read().decode("utf-8")
    # As llama.cpp's test-tokenizer-0 reads it: split on the separator line; a trailing
    # separator ends the last case instead of starting an empty one.
    sep = "\n__ggml_vocab_test__\n"
    parts = raw.split(sep)
    if parts and parts[-1] == "":
        parts.pop()
    return parts


def check_classes(text):
    for ch in text:
        cat = unicodedata.category(ch)
        ours = (cat.startswith("L"), cat.startswith("N"), ch.isspace() and not "\x1c" <= ch <= "\x1f")
        theirs = (bool(regex.match(r"\p{L}", ch)), bool(regex.match(r"\p{N}", ch)),
                  bool(regex.match(r"\s", ch)))
        if ours != theirs:
            sys.exit(f"U+{ord(ch):04X} is classified differently by unicodedata "
                     f"{unicodedata.unidata_version} and regex {regex.__version__}: "
                     f"{ours} vs {theirs}")


def split(pattern, text):
    pieces = regex.findall(pattern, text)
    if "".join(pieces) != text:
        sys.exit(f"pattern does not cover {text!r}")
    return pieces


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default_inp = os.path.join(here, "..", "..", "shared", "vocab", "ggml-vocab-gpt-2.gguf.inp")
    inp = sys.argv[1] if len(sys.argv) > 1 else default_inp
    texts = []
    if os.path.exists(inp):
        texts += read_inp(inp)
    else:
        print(f"note: {inp} not found; writing without the vocabulary test inputs", file=sys.stderr)
    texts += HAND_PICKED + random_cases(300, seed=20240501)
    seen = set()
    cases = []
    for text in texts:
        if text in seen:
            continue
        seen.add(text)
        check_classes(text)
        cases.append({"text": text, "gpt2": split(GPT2, text), "llama3": split(LLAMA3, text)})
    header = {
        "generator": "tools/gen_pretokenizer_fixture.py",
        "regex_version": regex.__version__,
        "unicodedata_version": unicodedata.unidata_version,
        "patterns": {"gpt2": GPT2, "llama3": LLAMA3},
    }
    # One case per line, so a diff of a regenerated fixture reads case by case.
    out = sys.stdout
    out.write(json.dumps(header, ensure_ascii=False)[:-1] + ',\n"cases": [\n')
    out.write(",\n".join(json.dumps(c, ensure_ascii=False) for c in cases))
    out.write("\n]}\n")


if __name__ == "__main__":
    main()
