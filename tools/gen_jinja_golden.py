#!/usr/bin/env python3
"""Golden outputs of real chat templates, rendered by Python jinja2 as Hugging Face does.

Recreates transformers' apply_chat_template environment (_compile_jinja_template):
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) with the loopcontrols
extension, a {% generation %} tag that renders its body (AssistantTracker, inactive), the
globals raise_exception(msg) and strftime_now(fmt) (here at a fixed UTC time), and the tojson
filter json.dumps(x, ensure_ascii=False, indent=indent, separators=separators,
sort_keys=False). Every template in the directory is rendered with a few conversations, each
with add_generation_prompt true and false; a render that raises records the message.

The fixture holds the outputs, each template's file name and sha256 (not its text), and the
contexts; tests/test_jinja_golden.cpp renders the same and compares byte for byte.

Regenerate (from the checkout):
    python3 tools/gen_jinja_golden.py ../shared/templates > tests/fixtures/jinja_golden.json
"""
import datetime
import hashlib
import json
import os
import sys

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

NOW = datetime.datetime(2026, 1, 15, 12, 34, 56, tzinfo=datetime.timezone.utc)


class RaisedException(Exception):
    pass


def raise_exception(message):
    raise RaisedException(message)


def strftime_now(fmt):
    return NOW.strftime(fmt)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


class GenerationTag(jinja2.ext.Extension):
    """{% generation %}...{% endgeneration %}: transformers' AssistantTracker when inactive."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTag, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}

CONVERSATIONS = {
    "single_user": [{"role": "user", "content": "Hello, how are you?"}],
    "multi_turn": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is 2 + 2?"},
        {"role": "assistant", "content": "2 + 2 is 4."},
        {"role": "user", "content": "And times 3?"},
    ],
    "non_ascii": [
        {"role": "user", "content": "你好，世界！ 🎉🚀 Café naïve façade — שלום עולם مرحبا"},
        {"role": "assistant", "content": "こんにちは 👋 Ünïcödé ✓"},
        {"role": "user", "content": "  Ελληνικά\ttab and trailing space  "},
    ],
    "jinja_like": [
        {"role": "system", "content": "Literal {{ x }} and {% if %} and {# c #} stay text."},
        {"role": "user", "content": "Quotes ' \" and back\\slash \\n, a <tag> & {{ messages }}"},
    ],
    "tools": [
        {"role": "system", "content": "You can call tools."},
        {"role": "user", "content": "What is the weather in Paris?"},
    ],
    "tool_call": [
        {"role": "user", "content": "What is the weather in Paris?"},
        {"role": "assistant", "content": "",
         "tool_calls": [{"id": "call_1", "type": "function",
                         "function": {"name": "get_weather",
                                      "arguments": {"city": "Paris", "unit": "celsius"}}}]},
        {"role": "tool", "tool_call_id": "call_1", "name": "get_weather",
         "content": "{\"temperature\": 18, \"sky\": \"clear\"}"},
        {"role": "assistant", "content": "It is 18 °C and clear in Paris."},
        {"role": "user", "content": "Thanks!"},
    ],
}

# Variables a template's model card says to pass besides the standard ones (merged into every
# case's context; the fixture records them per template).
EXTRA_CONTEXT = {
    "fireworks-ai-llama-3-firefunction-v2.jinja": {"functions": json.dumps([TOOL["function"]]),
                                                   "datetime": "2026-01-15"},
}

# Cases with tools only for templates that mention them.
TOOL_CASES = {"tools", "tool_call"}


def cases_for(source):
    out = []
    for name, messages in CONVERSATIONS.items():
        if name in TOOL_CASES and "tools" not in source:
            continue
        for agp in (False, True):
            ctx = {"messages": messages, "bos_token": "<s>", "eos_token": "</s>",
                   "add_generation_prompt": agp}
            if name in TOOL_CASES:
                ctx["tools"] = [TOOL]
            out.append((f"{name}/{'gen' if agp else 'nogen'}", ctx))
    return out


def main():
    directory = sys.argv[1] if len(sys.argv) > 1 else "../shared/templates"
    env = environment()
    templates = []
    contexts = {}
    for fname in sorted(os.listdir(directory)):
        if not fname.endswith(".jinja"):
            continue
        with open(os.path.join(directory, fname), "rb") as f:
            raw = f.read()
        source = raw.decode("utf-8")
        entry = {"file": fname, "sha256": hashlib.sha256(raw).hexdigest(), "results": {}}
        try:
            tmpl = env.from_string(source)
        except jinja2.TemplateError as e:
            tmpl, entry["parse_error"] = None, str(e)
        extra = EXTRA_CONTEXT.get(fname, {})
        if extra:
            entry["extra_context"] = extra
        for case, ctx in cases_for(source):
            contexts[case] = ctx
            if tmpl is None:
                continue
            try:
                entry["results"][case] = {"output": tmpl.render(**ctx, **extra)}
            except RaisedException as e:
                entry["results"][case] = {"raised": str(e)}
            except Exception as e:  # jinja2 errors and TypeErrors from the template alike
                entry["results"][case] = {"error": f"{type(e).__name__}: {e}"}
        templates.append(entry)
    json.dump({"now": int(NOW.timestamp()), "contexts": contexts, "templates": templates},
              sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
