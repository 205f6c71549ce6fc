#!/usr/bin/env python3
"""Seed corpora for the tokenizer, chat-template and batch-JSONL fuzz targets.

    python3 tools/gen_fuzz_seeds.py   # writes tests/fuzz/corpus/{tokenizer,chat_template,batch_jsonl}/

Small valid and invalid inputs in each target's input layout (see the comment at the top of
tests/fuzz/fuzz_<target>.cpp). The chat-template seeds include the Jinja sources of
tests/fixtures/chat_templates.json.
"""
import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "fuzz" / "corpus"


def write(target, name, data):
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))


def tokenizer_seeds():
    texts = [
        "Hello the world",
        "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n",
        "<s>[INST] hi [/INST] hello </s>",
        "<|im<|im_start|><|im_end|><|endoftext|>",
        "  leading spaces\t\ttabs\n\nnewlines",
        "caf\u00e9 \u65e5\u672c\u8a9e \U0001f331",
    ]
    for i, t in enumerate(texts):
        for flags in (0, 1, 6, 7):
            write("tokenizer", "text%d_flags%d" % (i, flags), bytes([flags]) + t.encode("utf-8"))
    write("tokenizer", "invalid_utf8", b"\x05ab\xff\xfe<|im_start|>\xc3")


def chat_seeds():
    fx = json.loads((ROOT / "tests" / "fixtures" / "chat_templates.json").read_text("utf-8"))
    for t in fx["templates"]:
        write("chat_template", "jinja_" + t["name"].replace(".", "_"), t["source"])
    roles = {"system": 0, "user": 1, "assistant": 2}
    convs = [
        [("user", "Hello")],
        [("system", " sys "), ("user", "hi\u3000"), ("assistant", "yo"), ("user", "again")],
        [("user", "a"), ("user", "b")],
        [("assistant", "first")],
    ]
    for i, conv in enumerate(convs):
        body = b"\x00".join(bytes([roles[r]]) + c.encode("utf-8") for r, c in conv)
        write("chat_template", "conv%d" % i, b"\x01" + body)


def batch_seeds():
    good = [
        {"prompt": "Once upon a time", "n_predict": 8},
        {"id": "a", "prompt": "x", "temperature": 0.7, "top_k": 40, "top_p": 0.9, "min_p": 0.05,
         "seed": 1, "stop": ["\n"]},
        {"id": [1, {"k": None}], "messages": [{"role": "system", "content": "s"},
                                             {"role": "user", "content": "u"}]},
    ]
    write("batch_jsonl", "good", "".join(json.dumps(g) + "\n" for g in good))
    bad = [
        "not json", "[1]", "{}", '{"prompt": 5}', '{"prompt": "x", "bogus": 1}',
        '{"prompt": "x", "top_p": 0}', '{"prompt": "x", "prompt": "y"}',
        '{"messages": [{"role": "tool", "content": "x"}]}', '{"prompt": "x", "stop": [""]}',
    ]
    write("batch_jsonl", "mixed", "\n".join([json.dumps(good[0])] + bad + ["", "  "]) + "\n")
    write("batch_jsonl", "crlf_bom_truncated",
          b"\xef\xbb\xbf" + json.dumps(good[0]).encode() + b"\r\n\r\n" + b'{"prompt": "cut')
    write("batch_jsonl", "previous_output",
          '{"index":0,"prompt_ids":[1],"generated_ids":[],"text":"","finish_reason":"eos"}\n'
          '{"index":2,"error":"line 3: bad"}\n{"index":5,"te')


if __name__ == "__main__":
    tokenizer_seeds()
    chat_seeds()
    batch_seeds()
