#!/usr/bin/env python3
"""Golden chat-template renderings for tests/test_chat_template.cpp.

Renders the models' own Jinja chat templates (the `chat_template` of their Hugging Face
tokenizer_config.json, which is what GGUF files carry as tokenizer.chat_template) with
jinja2 the way transformers' apply_chat_template does (sandboxed environment, trim_blocks,
lstrip_blocks, raise_exception), so the expected strings are independent of llmctl's C++.

    python3 tools/gen_chat_fixture.py > tests/fixtures/chat_templates.json

Output: {"templates": [{name, family, source}], "cases": [{family, template, messages,
add_generation_prompt, bos, eos, expected | error}]}. `family` is what llmctl's
detect_chat_template must answer for the source (null: not one of llama2/llama3/chatml/zephyr).
"""
import json
import sys

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

# meta-llama/Llama-2-7b-chat-hf
LLAMA2 = (
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
    "{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}"
    "{% set system_message = false %}{% endif %}{% for message in loop_messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{% endif %}{% if loop.index0 == 0 and system_message != false %}"
    "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
    "{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}"
    "{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
    "{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}"
)
# meta-llama/Meta-Llama-3-8B-Instruct
LLAMA3 = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
    "+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
    "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)
# teknium/OpenHermes-2.5-Mistral-7B (plain ChatML)
CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content']"
    " + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
# Qwen/Qwen2-7B-Instruct: ChatML plus a default system message when none is given
QWEN2 = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
# HuggingFaceH4/zephyr-7b-beta (newlines between the tags, as in the repository)
ZEPHYR = (
    "{% for message in messages %}\n{% if message['role'] == 'user' %}\n"
    "{{ '<|user|>\n' + message['content'] + eos_token }}\n{% elif message['role'] == 'system' %}\n"
    "{{ '<|system|>\n' + message['content'] + eos_token }}\n{% elif message['role'] == 'assistant' %}\n"
    "{{ '<|assistant|>\n'  + message['content'] + eos_token }}\n{% endif %}\n"
    "{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}"
)
# mistralai/Mistral-7B-Instruct-v0.1: detected as llama2 (its [INST] marker), not rendered here
MISTRAL = (
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != "
    "(loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate "
    "user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}"
    "{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
    "{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant "
    "roles are supported!') }}{% endif %}{% endfor %}"
)
# Families llmctl does not render: detection must say "unrecognized".
GEMMA = (
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not "
    "supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == 'assistant') %}"
    "{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}"
    "{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}"
)
PHI3 = (
    "{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\n' + "
    "message['content'] + '<|end|>\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\n' + "
    "message['content'] + '<|end|>\n'}}{% elif message['role'] == 'assistant' %}{{'<|assistant|>\n' + "
    "message['content'] + '<|end|>\n'}}{% endif %}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}"
)
FALCON3 = (
    "{% for message in messages %}{% if message['role'] == 'system' %}{{ '<|system|>\n' + "
    "message['content'] + '\n' }}{% elif message['role'] == 'user' %}{{ '<|user|>\n' + "
    "message['content'] + '\n' }}{% elif message['role'] == 'assistant' %}{% if not loop.last %}"
    "{{ '<|assistant|>\n' + message['content'] + eos_token + '\n' }}{% else %}{{ '<|assistant|>\n' "
    "+ message['content'] + eos_token }}{% endif %}{% endif %}{% if loop.last and "
    "add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}{% endfor %}"
)
# stabilityai/stablelm-zephyr-3b: zephyr with a literal end token
STABLELM_ZEPHYR = (
    "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\n' + "
    "message['content'] + '<|endoftext|>' }}\n{% elif message['role'] == 'system' %}\n"
    "{{ '<|system|>\n' + message['content'] + '<|endoftext|>' }}\n{% elif message['role'] == "
    "'assistant' %}\n{{ '<|assistant|>\n'  + message['content'] + '<|endoftext|>' }}\n{% endif %}\n"
    "{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}"
)

TEMPLATES = [
    ("Llama-2-7b-chat-hf", "llama2", LLAMA2),
    ("Meta-Llama-3-8B-Instruct", "llama3", LLAMA3),
    ("OpenHermes-2.5-Mistral-7B", "chatml", CHATML),
    ("Qwen2-7B-Instruct", "chatml", QWEN2),
    ("zephyr-7b-beta", "zephyr", ZEPHYR),
    ("stablelm-zephyr-3b", "zephyr", STABLELM_ZEPHYR),
    ("Mistral-7B-Instruct-v0.1", "llama2", MISTRAL),
    ("gemma-7b-it", None, GEMMA),
    ("Phi-3-mini-4k-instruct", None, PHI3),
    ("Falcon3-7B-Instruct", None, FALCON3),
]
# The template each family is rendered with, and its special-token texts.
RENDER = {
    "llama2": ("Llama-2-7b-chat-hf", "<s>", "</s>"),
    "llama3": ("Meta-Llama-3-8B-Instruct", "<|begin_of_text|>", "<|end_of_text|>"),
    "chatml": ("OpenHermes-2.5-Mistral-7B", "", "<|im_end|>"),
    "zephyr": ("zephyr-7b-beta", "<s>", "</s>"),
}


def m(role, content):
    return {"role": role, "content": content}


CONVERSATIONS = [
    [m("user", "Hello")],
    [m("system", "You are terse."), m("user", "Hi there")],
    [m("system", "Be kind."), m("user", "What is 2+2?"), m("assistant", "4"), m("user", "And 3+3?")],
    [m("user", "Name a colour."), m("assistant", "Blue.")],
    [m("user", "  padded \n\t"), m("assistant", "\n answer with spaces  "), m("user", "\u3000ideographic space\u00a0")],
    [m("system", "  sys with spaces  "), m("user", "")],
    [m("user", "multi\nline\n\ntext"), m("assistant", "日本語 🌱 <b>&amp;</b> {{ not jinja }}")],
    [m("system", "only a system message")],
    [],
    [m("user", "a"), m("assistant", "b"), m("user", "c"), m("assistant", "d")],
    [m("user", "text with <s> and <|im_end|> inside")],
    # Roles that do not alternate: llama2 raises, the others render.
    [m("user", "one"), m("user", "two")],
    [m("assistant", "I speak first")],
]


def make_env():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    env.globals["raise_exception"] = raise_exception
    return env


def main():
    env = make_env()
    sources = {name: src for name, _, src in TEMPLATES}
    cases = []
    for family, (tname, bos, eos) in RENDER.items():
        renderers = [tname]
        if family == "chatml":
            renderers.append("Qwen2-7B-Instruct")
        for tn in renderers:
            tmpl = env.from_string(sources[tn])
            for conv in CONVERSATIONS:
                # Qwen2 differs from plain ChatML only by its default system message: compare
                # where the conversation brings its own.
                if tn == "Qwen2-7B-Instruct" and (not conv or conv[0]["role"] != "system"):
                    continue
                for gen in (False, True):
                    case = {"family": family, "template": tn, "messages": conv,
                            "add_generation_prompt": gen, "bos": bos, "eos": eos}
                    try:
                        case["expected"] = tmpl.render(messages=conv, add_generation_prompt=gen,
                                                       bos_token=bos, eos_token=eos)
                    except jinja2.exceptions.TemplateError as e:
                        case["error"] = str(e)
                    cases.append(case)
    out = {
        "generator": "tools/gen_chat_fixture.py (jinja2 %s)" % jinja2.__version__,
        "templates": [{"name": n, "family": f, "source": s} for n, f, s in TEMPLATES],
        "cases": cases,
    }
    json.dump(out, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
