#!/usr/bin/env python3
"""Writes tokenizer.json fixtures for the normalizers and the SentencePiece-style BPE, with the
ids Hugging Face's `tokenizers` (the reference) gives for them:

    /work/venvs/tok/bin/python tools/gen_hf_spm_tokenizer_json_fixture.py \\
        ../shared/vocab/ggml-vocab-llama-spm.gguf ../shared/models/SmolLM2-135M-Instruct.Q4_1.gguf \\
        tests/fixtures
    (the venv: python3 -m venv /work/venvs/tok && /work/venvs/tok/bin/pip install tokenizers regex)

tests/fixtures/hf_tokenizer_json/llama2/tokenizer.json  Llama 2's first 3,000 pieces as a
    byte_fallback BPE, with the merges transformers' SentencePieceExtractor derives from a
    SentencePiece BPE model (every split of a piece into two pieces, ordered by the piece's
    score, best first), normalizer Sequence[Prepend("▁"), Replace(" ", "▁")], decoder
    Sequence[Replace, ByteFallback, Fuse, Strip(1)], "<s> $A" template
tests/fixtures/hf_tokenizer_json/gemma/tokenizer.json   the same vocabulary the Gemma way:
    normalizer Replace(" ", "▁") only (no dummy prefix), decoder without Strip
tests/fixtures/hf_tokenizer_json/nfc/tokenizer.json     SmolLM2's first 3,000 tokens with
    Qwen2.5's layout: normalizer NFC, Split(Qwen2 regex, Isolated), ByteLevel(use_regex=false)
tests/fixtures/hf_tokenizer_json/prefix/tokenizer.json  the same SmolLM2 tokens GPT-2/RoBERTa's way:
    ByteLevel(add_prefix_space=true, use_regex=true) alone
tests/fixtures/hf_tokenizer_json_spm_ids.json  per text: the ids of each reduced file, and of
    the full Llama 2 vocabulary built the same way ("llama2_full"), which the C++ test compares
    with our GGUF path on ggml-vocab-llama-spm.gguf (libsentencepiece), so the 2 MB file need
    not be committed.
"""
import os
import sys

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_bpe_reference_ids import TEXTS, read_metadata  # noqa: E402
from gen_hf_tokenizer_json_fixture import write_cases  # noqa: E402

N_REDUCED = 3000
# Llama 2's "▁" and whole words come late in its vocabulary (the lone "▁" is id 29871): the
# reduced vocabularies take the first N_REDUCED - len(LATE_PIECES) pieces and these, so that
# spaces and words are tokens and not only byte fallback.
LATE_PIECES = ["\u2581", "\u2581Hello", "\u2581world", "\u2581Straße", "\u2581apples", "\u2581spaces",
               "\u2581leading", "\u2581trailing", "\u2581tabbed", "\u2581pay"]
QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
         r"\s*[\r\n]+|\s+(?!\S)|\s+")
# Beyond the shared texts: what normalization changes (decomposed accents, the Angstrom and
# Ohm signs, Hangul jamo, a ligature NFC keeps), and characters no reduced vocabulary has.
EXTRA_TEXTS = [
    "cafe\u0301 nai\u0308ve A\u030a \u212b \u2126 re\u0301sume\u0301",
    "\u1100\u1161\u11a8 \u1112\u1161\u11ab \ufb01ne \u00c5ngstr\u00f6m",
    "tabs\tand  double  spaces  ",
    "\u2581already a meta space and <0x41> as text",
]


def spm_merges(pieces, scores):
    """transformers' SentencePieceExtractor.extract(vocab_scores): for every piece each split
    into two pieces of the vocabulary, sorted by (left id, right id), then all of them by the
    piece's score, best first (a stable sort)."""
    vocab = {p: i for i, p in enumerate(pieces)}
    merges = []
    for piece, score in zip(pieces, scores):
        local = [(piece[:k], piece[k:], score) for k in range(1, len(piece))
                 if piece[:k] in vocab and piece[k:] in vocab]
        local.sort(key=lambda x: (vocab[x[0]], vocab[x[1]]))
        merges.extend(local)
    merges.sort(key=lambda x: x[2], reverse=True)
    return [(a, b) for a, b, _ in merges]


def build_spm(pieces, scores, types, style):
    vocab = {p: i for i, p in enumerate(pieces)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=spm_merges(pieces, scores), unk_token="<unk>",
                               byte_fallback=True, fuse_unk=True))
    steps = [normalizers.Replace(" ", "\u2581")]
    dec = [decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()]
    if style == "llama2":
        steps.insert(0, normalizers.Prepend("\u2581"))
        dec.append(decoders.Strip(" ", 1, 0))
    tok.normalizer = normalizers.Sequence(steps)
    tok.decoder = decoders.Sequence(dec)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A $B",
                                                       special_tokens=[("<s>", 1)])
    tok.add_special_tokens([AddedToken(p, special=True, normalized=False)
                            for p, t in zip(pieces, types) if t == 3])  # control: <unk> <s> </s>
    return tok


def build_nfc(tokens, merges, n_special):
    tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in tokens[:n_special]])
    return tok


def build_prefix(tokens, merges, n_special):
    tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in tokens[:n_special]])
    return tok


def save(tok, out_dir, style):
    d = os.path.join(out_dir, "hf_tokenizer_json", style)
    os.makedirs(d, exist_ok=True)
    tok.save(os.path.join(d, "tokenizer.json"), pretty=False)


def main():
    spm = read_metadata(sys.argv[1])
    smol = read_metadata(sys.argv[2])
    out_dir = sys.argv[3]
    pieces, scores = spm["tokenizer.ggml.tokens"], spm["tokenizer.ggml.scores"]
    types = spm["tokenizer.ggml.token_type"]
    cases = [{"text": t} for t in TEXTS + EXTRA_TEXTS]

    full = build_spm(pieces, scores, types, "llama2")
    for c in cases:
        c["llama2_full"] = full.encode(c["text"], add_special_tokens=False).ids
    index = {p: i for i, p in enumerate(pieces)}
    late = sorted(index[p] for p in LATE_PIECES if p in index)
    cut = N_REDUCED - len(late)
    assert late and late[0] >= cut, "LATE_PIECES must come after the first pieces kept"
    keep = list(range(cut)) + late
    for style in ("llama2", "gemma"):
        tok = build_spm([pieces[i] for i in keep], [scores[i] for i in keep], [types[i] for i in keep], style)
        save(tok, out_dir, style)
        for c in cases:
            enc = tok.encode(c["text"], add_special_tokens=False)
            c[style] = enc.ids
            c[style + "_with_specials"] = tok.encode(c["text"]).ids
            c[style + "_decoded"] = tok.decode(enc.ids, skip_special_tokens=False)

    tokens = smol["tokenizer.ggml.tokens"]
    n_special = next(i for i, t in enumerate(smol["tokenizer.ggml.token_type"]) if t == 1)
    kept = set(tokens[:N_REDUCED])
    merges = [tuple(m.split(" ", 1)) for m in smol["tokenizer.ggml.merges"]]
    merges = [(a, b) for a, b in merges if a in kept and b in kept and a + b in kept]
    for style, build in (("nfc", build_nfc), ("prefix", build_prefix)):
        tok = build(tokens[:N_REDUCED], merges, n_special)
        save(tok, out_dir, style)
        for c in cases:
            enc = tok.encode(c["text"], add_special_tokens=False)
            c[style] = enc.ids
            c[style + "_decoded"] = tok.decode(enc.ids, skip_special_tokens=False)

    write_cases(os.path.join(out_dir, "hf_tokenizer_json_spm_ids.json"),
                "tools/gen_hf_spm_tokenizer_json_fixture.py", cases)


if __name__ == "__main__":
    main()
