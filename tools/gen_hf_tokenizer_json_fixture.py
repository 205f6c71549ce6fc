#!/usr/bin/env python3
"""Writes the tokenizer.json fixtures and their expected ids, made with Hugging Face's
`tokenizers` (the reference) from SmolLM2's GGUF vocabulary and merges:

    python3 -m venv /work/venvs/tok && /work/venvs/tok/bin/pip install tokenizers regex
    /work/venvs/tok/bin/python tools/gen_hf_tokenizer_json_fixture.py \\
        ../shared/models/SmolLM2-135M-Instruct.Q4_1.gguf tests/fixtures

tests/fixtures/hf_tokenizer_json/digits/tokenizer.json   the first 3,000 tokens (merges kept
    only when both sides and the result are among them), SmolLM2's own pre-tokenizer:
    Sequence[Digits(individual_digits), ByteLevel(use_regex)]
tests/fixtures/hf_tokenizer_json/split/tokenizer.json    the same vocabulary with a Llama 3
    style Sequence[Split(Regex, Isolated), ByteLevel(use_regex=false)] and a
    TemplateProcessing that adds <|im_start|> as BOS
tests/fixtures/hf_tokenizer_json_ids.json   per text: the ids `tokenizers` gives with each
    reduced file, and with the full SmolLM2 vocabulary (which the test compares with the
    GGUF path, so the full 2 MB tokenizer.json need not be committed)
"""
import json
import os
import sys

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_bpe_reference_ids import TEXTS, read_metadata  # noqa: E402

LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
          r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
N_REDUCED = 3000


def build(tokens, merges, n_special, style):
    vocab = {t: i for i, t in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    if style == "digits":
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    else:
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        tok.post_processor = processors.TemplateProcessing(
            single="<|im_start|> $A", pair="<|im_start|> $A $B",
            special_tokens=[("<|im_start|>", 1)])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t in tokens[:n_special]])
    return tok


def main():
    meta = read_metadata(sys.argv[1])
    out_dir = sys.argv[2]
    tokens = meta["tokenizer.ggml.tokens"]
    types = meta["tokenizer.ggml.token_type"]
    n_special = next(i for i, t in enumerate(types) if t == 1)
    merges = [tuple(m.split(" ", 1)) for m in meta["tokenizer.ggml.merges"]]

    kept = set(tokens[:N_REDUCED])
    reduced_merges = [(a, b) for a, b in merges if a in kept and b in kept and a + b in kept]
    cases = [{"text": t} for t in TEXTS]
    full = build(tokens, merges, n_special, "digits")
    for c in cases:
        c["full"] = full.encode(c["text"], add_special_tokens=False).ids
    for style in ("digits", "split"):
        tok = build(tokens[:N_REDUCED], reduced_merges, n_special, style)
        d = os.path.join(out_dir, "hf_tokenizer_json", style)
        os.makedirs(d, exist_ok=True)
        tok.save(os.path.join(d, "tokenizer.json"), pretty=False)
        for c in cases:
            c[style] = tok.encode(c["text"], add_special_tokens=False).ids
            c[style + "_with_specials"] = tok.encode(c["text"]).ids
    write_cases(os.path.join(out_dir, "hf_tokenizer_json_ids.json"), "tools/gen_hf_tokenizer_json_fixture.py",
                cases)


def write_cases(path, generator, cases):
    """The fixture layout the C++ tests read: one case per line."""
    with open(path, "w", encoding="utf-8") as f:
        f.write('{"generator": "%s", "cases": [\n' % generator)
        f.write(",\n".join(json.dumps(c, ensure_ascii=False) for c in cases))
        f.write("\n]}\n")


if __name__ == "__main__":
    main()
