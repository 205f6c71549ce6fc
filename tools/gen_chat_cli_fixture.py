#!/usr/bin/env python3
"""Golden renderings of SmolLM2-135M-Instruct's own chat template (the GGUF's
tokenizer.chat_template) for tests/test_cli_chat.cpp, made with Python jinja2 the way
transformers' apply_chat_template renders (sandboxed environment, trim_blocks, lstrip_blocks,
loopcontrols, raise_exception), so the expected text is independent of llmctl's Jinja engine.

    python3 tools/gen_chat_cli_fixture.py ../shared/models/SmolLM2-135M-Instruct.Q4_1.gguf \\
        > tests/fixtures/chat_cli_smollm2.json

The template is read from the GGUF with the small metadata reader below (no gguf-py needed).
"""
import hashlib
import json
import struct
import sys

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

GGUF_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
                10: "<Q", 11: "<q", 12: "<d"}


def gguf_metadata(path):
    """The metadata key/value pairs of a GGUF file (strings and scalars; arrays skipped)."""
    with open(path, "rb") as f:
        data = f.read(64 << 20)
    assert data[:4] == b"GGUF", "not a GGUF file"
    pos = 8
    _n_tensors, n_kv = struct.unpack_from("<QQ", data, pos)
    pos += 16

    def read_str():
        nonlocal pos
        (n,) = struct.unpack_from("<Q", data, pos)
        s = data[pos + 8:pos + 8 + n].decode("utf-8")
        pos += 8 + n
        return s

    def read_value(t):
        nonlocal pos
        if t == 8:
            return read_str()
        if t == 9:
            (et, n) = struct.unpack_from("<IQ", data, pos)
            pos += 12
            for _ in range(n):
                read_value(et)
            return None
        fmt = GGUF_SCALARS[t]
        (v,) = struct.unpack_from(fmt, data, pos)
        pos += struct.calcsize(fmt)
        return v

    out = {}
    for _ in range(n_kv):
        key = read_str()
        (t,) = struct.unpack_from("<I", data, pos)
        pos += 4
        out[key] = read_value(t)
    return out


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


CONVERSATIONS = {
    "single": [{"role": "user", "content": "What is the capital of France?"}],
    "system_multi": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Hi!"},
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": "Name a colour."},
    ],
    "non_ascii": [{"role": "user", "content": "Grüße, 世界 🌍 — مرحبا\n\tend"}],
    "looks_like_markup": [
        {"role": "user", "content": "{{ x }} {% if y %} <|im_start|>assistant\n'\"\\"}],
}


def main():
    path = sys.argv[1]
    meta = gguf_metadata(path)
    source = meta["tokenizer.chat_template"]
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.globals["raise_exception"] = raise_exception
    template = env.from_string(source)
    cases = []
    for name, messages in CONVERSATIONS.items():
        for add_generation_prompt in (True, False):
            text = template.render(messages=messages, add_generation_prompt=add_generation_prompt,
                                   bos_token="<|im_start|>", eos_token="<|im_end|>")
            cases.append({"name": name, "messages": messages,
                          "add_generation_prompt": add_generation_prompt, "expected": text})
    json.dump({"generator": f"tools/gen_chat_cli_fixture.py (jinja2 {jinja2.__version__})",
               "template_sha256": hashlib.sha256(source.encode()).hexdigest(),
               "cases": cases}, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
