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

Fuzz mode: every regex list of the C++ pre-tokenizer table against `regex` on 5,000 seeded
strings (tests/fixtures/pretokenizer_fuzz.json, checked by tests/test_pretokenizer_fuzz.cpp):

    build/tools/pre_tokenizer_lists > /tmp/pre_tokenizer_lists.json
    python3 tools/gen_pretokenizer_fixture.py --fuzz /tmp/pre_tokenizer_lists.json \\
        > tests/fixtures/pretokenizer_fuzz.json

The split follows llama.cpp's unicode_regex_split: each pattern splits every piece of the
previous one, matches and the text between them are pieces, empty pieces are dropped. The
strings are stored once; per list only an FNV-1a 64 hash per block of 100 strings of the
piece boundaries (code point offsets, uint32 little endian, each string closed by
0xFFFFFFFF), which keeps the file well under 1 MB. \\x{HHHH} in a pattern (PCRE2 syntax) is
turned into the character itself for `regex`, and \\p{Han} into \\p{scx=Han} (PCRE2's script
properties are Script_Extensions, as in the Rust regex tiktoken uses). The characters are drawn from a fixed pool of
code points assigned by Unicode 11 or earlier, so that PCRE2 10.42 (Unicode 14) and this
`regex` (newer) class every one of them the same way; characters whose class changed
between Unicode versions (new letters, new White_Space members) never appear.
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


# The fuzz pool: single characters and fragments, chosen to hit every branch of the
# patterns (contractions, case runs, digit groups, whitespace/newline runs, CJK blocks of the
# DeepSeek/AFMoE/Kimi lists, Chameleon's sentinels, punctuation classes of Poro/BLOOM).
FUZZ_POOL = (
    list("abcxyzABCXYZ") * 3 + list("0123456789") * 2 + list(" ") * 8 +
    ["\t", "\n", "\r", "\r\n", "\n\n", "  ", "    ", "\u00a0", "\u3000", "\u2009", "\u000b",
     "'s", "'S", "'t", "'re", "'VE", "'m", "'ll", "'LL", "'d", "'D", "'x", "'", "\u017f",
     "\u2019s", "\u212a", "Straße", "ĳ", "Éé", "Ωω", "Привет", "мир", "Ǆǅǆ", "ǈ",
     "中", "文", "漢字", "日本", "ひらがな", "カタカナ", "ｶﾀｶﾅ", "한국어", "ㄱ", "ㄅㄆ",
     "ก่อน", "ເລ", "ខ្មែរ", "မြန်", "नमस्ते", "e\u0301", "a\u0300\u0301", "\u0301",
     "مرحبا", "١٢٣", "٣", "߀", "½", "Ⅻ", "²", "①",
     "😀", "👍🏽", "🦙", "👨\u200d👩\u200d👧", "🇺🇸", "✓", "→", "∑", "€", "$", "£",
     ".", ",", "!", "?", "-", "_", "/", "\\", "(", ")", "[", "]", "{", "}", "<", ">", "=",
     "+", "^", "~", "|", "`", "@", "#", "%", "&", "*", ":", ";", "\"", "...", "…", "。",
     "，", "、", "।", "۔", "،", "！", "：", "—", "“", "”", "‘", "’", "〜", "﹏",
     "<sentinel:12>", "IMGIMGABZ", "\u200b", "\ufeff", "\u00ad", "\ufffd"])

BLOCK = 100


def fuzz_strings(count, seed):
    rng = random.Random(seed)
    out = []
    while len(out) < count:
        n = rng.choice((1, 2, 3, 5, 8, 12, 20, 30))
        out.append("".join(rng.choice(FUZZ_POOL) for _ in range(n)))
    return out


def pcre_to_regex(pattern):
    # PCRE2 syntax -> regex syntax: \x{HHHH} escapes, and PCRE2's script names, which mean
    # Script_Extensions there (\p{Han} -> \p{scx=Han}).
    pattern = regex.sub(r"\\x\{([0-9A-Fa-f]+)\}", lambda m: chr(int(m.group(1), 16)), pattern)
    return pattern.replace(r"\p{Han}", r"\p{scx=Han}")


def list_split(compiled, text):
    pieces = [text] if text else []
    for rx in compiled:
        nxt = []
        for piece in pieces:
            last = 0
            for m in rx.finditer(piece):
                if m.start() > last:
                    nxt.append(piece[last:m.start()])
                if m.end() > m.start():
                    nxt.append(piece[m.start():m.end()])
                last = m.end()
            if last < len(piece):
                nxt.append(piece[last:])
        pieces = nxt
    return pieces


def fnv1a64(data, h=0xcbf29ce484222325):
    for b in data:
        h ^= b
        h = (h * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def boundary_bytes(pieces):
    out = bytearray()
    pos = 0
    for p in pieces:
        pos += len(p)
        out += pos.to_bytes(4, "little")
    return bytes(out) + b"\xff\xff\xff\xff"


def fuzz_main(lists_path):
    with open(lists_path, encoding="utf-8") as f:
        lists = json.load(f)
    texts = fuzz_strings(5000, seed=20261201)
    hashes = {}
    for list_id, patterns in lists.items():
        compiled = [regex.compile(pcre_to_regex(p)) for p in patterns]
        blocks = []
        for start in range(0, len(texts), BLOCK):
            h = 0xcbf29ce484222325
            for text in texts[start:start + BLOCK]:
                pieces = list_split(compiled, text)
                if "".join(pieces) != text:
                    sys.exit(f"list {list_id} does not cover {text!r}")
                h = fnv1a64(boundary_bytes(pieces), h)
            blocks.append(f"{h:016x}")
        hashes[list_id] = blocks
    doc = {
        "generator": "tools/gen_pretokenizer_fixture.py --fuzz",
        "regex_version": regex.__version__,
        "block": BLOCK,
        "lists": lists,
        "hashes": hashes,
        "strings": texts,
    }
    out = sys.stdout
    out.write("{\n")
    keys = list(doc)
    for i, k in enumerate(keys):
        sep = "," if i + 1 < len(keys) else ""
        if k == "strings":
            out.write(f'"{k}": [\n' + ",\n".join(json.dumps(t, ensure_ascii=False) for t in texts) +
                      f"\n]{sep}\n")
        else:
            out.write(f"{json.dumps(k)}: {json.dumps(doc[k], ensure_ascii=False)}{sep}\n")
    out.write("}\n")


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--fuzz":
        fuzz_main(sys.argv[2])
        return
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
