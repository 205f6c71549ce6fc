#!/usr/bin/env python3
"""Runs every llmctl example of README.md and docs/*.md, so that an example that stops working
fails the build (CTest test `doc_examples`, label docs).

  scripts/check-doc-examples.py --llmctl build/llmctl [--source .] [--only docs/batch.md]

What is an example:
  - in a fenced block marked sh, bash or shell, every command of a block that calls llmctl
    (setup lines such as `M=...` or `printf ... > /tmp/chat.json` too, since the examples
    after them need them); a block that never calls llmctl (scripts/demo.sh) is not run;
  - in an unmarked fenced block (commands mixed with their output), the lines that start
    with `llmctl `, `build/llmctl ` or `$ llmctl `;
  - blocks marked anything else (```text for a synopsis) are documentation only.
  A command may span lines (a trailing backslash or pipe, a for loop): lines are joined until
  `bash -n` accepts them.

Where they run: each document in its own sandbox directory, its commands in order (so a
file one example writes is there for the next), with stdin from /dev/null (an `-i` chat
reads end of input and exits), a timeout each, and every command must exit 0. Paths under
/tmp/ are moved into the sandbox, so that a file an earlier run left cannot change a result. The sandbox
holds what the examples name: `build/llmctl` and `llmctl` on PATH (the binary under test),
`../shared` (the test data, LLMCTL_TEST_DATA), `tests/` and `scripts/` of the checkout,
`models/*` of the test data, `stories260K.gguf`, `model.gguf` and `model-f16.gguf`
(stories260K), `prompts.jsonl`, `prompt.txt`, `calib.txt` and `path/to/config.json` (a tiny
Hugging Face config); the Slurm example runs as task 0 of 1 (SLURM_ARRAY_TASK_ID=0,
SLURM_ARRAY_TASK_COUNT=1).

Skipping: a command whose text holds `doc-example: skip (WHY)` (a shell comment on its line)
is not run and the reason is printed: for a GPU, a download or a file the test data does not
have. Commands that pipe into jq are skipped when jq is not installed.

Exit status: 0 all ran, 1 one failed, 77 no test data (CTest: skipped; with
LLMCTL_REQUIRE_TEST_DATA=1 that is a failure).
"""

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

TIMEOUT_S = 120
SKIP = re.compile(r"doc-example:\s*skip\s*\(([^)]*)\)")
CALLS_LLMCTL = re.compile(r"(^|[|;&(]|\bdo\b|\bthen\b)\s*(build/)?llmctl(\s|$)", re.M)
OUTPUT_BLOCK_COMMAND = re.compile(r"^(\$ )?(build/)?llmctl\s")
SHELL_LANGS = {"sh", "bash", "shell"}
ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(\S*)(\s+#.*)?$")

PROMPTS_JSONL = '{"prompt": "Once upon a time"}\n{"prompt": "Tim and Lily went to the park"}\n'
TEXT = ("Once upon a time, there was a little girl named Lily. She liked to play in the park "
        "with her friend Tim. One day they found a big red ball under a tree. They played with "
        "the ball all day and were very happy.\n")


def complete(text):
    return subprocess.run(["bash", "-n", "-c", text], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode == 0


def commands_of(path):
    """(line number, command text) of every example in one document, in order."""
    out = []
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        fence = re.match(r"^\s*```(\S*)\s*$", lines[i])
        if not fence:
            i += 1
            continue
        lang, body, start = fence.group(1), [], i + 1
        i += 1
        while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
            body.append(lines[i])
            i += 1
        i += 1  # the closing fence
        if lang in SHELL_LANGS:
            block, pending, first = [], "", 0
            for n, line in enumerate(body, start + 1):
                if not pending and (not line.strip() or line.lstrip().startswith("#")):
                    continue
                first = first or n
                pending += line + "\n"
                if line.rstrip().endswith(("\\", "|", "&&")) or not complete(pending):
                    continue
                block.append((first, pending.rstrip()))
                pending, first = "", 0
            if pending:
                block.append((first, pending.rstrip()))
            if any(CALLS_LLMCTL.search(re.sub(r"#.*", "", c)) for _, c in block):
                out.extend(block)
        elif lang == "":
            for n, line in enumerate(body, start + 1):
                if OUTPUT_BLOCK_COMMAND.match(line):
                    out.append((n, line[2:] if line.startswith("$ ") else line))
    return out


def make_sandbox(root, binary, source, data):
    work = os.path.join(root, "work")
    os.makedirs(os.path.join(work, "build"))
    os.makedirs(os.path.join(work, "bin"))
    os.makedirs(os.path.join(work, "models"))
    os.makedirs(os.path.join(work, "path", "to"))
    os.symlink(binary, os.path.join(work, "build", "llmctl"))
    os.symlink(binary, os.path.join(work, "bin", "llmctl"))
    os.symlink(data, os.path.join(root, "shared"))
    for d in ("tests", "scripts"):
        os.symlink(os.path.join(source, d), os.path.join(work, d))
    for f in glob.glob(os.path.join(data, "models", "*")):
        os.symlink(f, os.path.join(work, "models", os.path.basename(f)))
    stories = os.path.join(data, "models", "stories260K.gguf")
    for name in ("stories260K.gguf", "model.gguf", "model-f16.gguf"):
        os.symlink(stories, os.path.join(work, name))
    shutil.copy(os.path.join(source, "tests", "fixtures", "hf_tiny_llama", "config.json"),
                os.path.join(work, "path", "to", "config.json"))
    for name, text in (("prompts.jsonl", PROMPTS_JSONL), ("prompt.txt", TEXT), ("calib.txt", TEXT * 4)):
        with open(os.path.join(work, name), "w", encoding="utf-8") as f:
            f.write(text)
    return work


def run_document(doc, commands, binary, source, data, env):
    failed = 0
    with tempfile.TemporaryDirectory(prefix="llmctl-doc-") as root:
        work = make_sandbox(root, binary, source, data)
        env = dict(env, PATH=os.path.join(work, "bin") + os.pathsep + env.get("PATH", ""))
        tmp = os.path.join(root, "tmp")
        os.makedirs(tmp)
        for line, cmd in commands:
            where = f"{doc}:{line}"
            cmd = cmd.replace("/tmp/", tmp + "/")  # a fresh /tmp: no file of an earlier run
            skip = SKIP.search(cmd)
            if skip:
                print(f"skip {where}: {skip.group(1)}")
                continue
            if re.search(r"\|\s*jq\b", cmd) and shutil.which("jq") is None:
                print(f"skip {where}: jq is not installed")
                continue
            assign = ASSIGNMENT.match(cmd)
            if assign:  # kept for the commands after it, as the reader's shell would
                value = subprocess.run(["bash", "-c", f'{cmd}\nprintf "%s" "${assign.group(1)}"'],
                                       cwd=work, env=env, capture_output=True, text=True).stdout
                env[assign.group(1)] = value
                continue
            t0 = time.monotonic()
            try:
                r = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], cwd=work, env=env,
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, text=True, errors="replace",
                                   timeout=TIMEOUT_S)
                code, err = r.returncode, r.stderr
            except subprocess.TimeoutExpired as e:
                code, err = f"timeout after {TIMEOUT_S} s", (e.stderr or b"").decode("utf-8", "replace")
            secs = time.monotonic() - t0
            if code == 0:
                print(f"ok   {where} ({secs:.1f} s)")
                continue
            failed += 1
            tail = "\n       ".join(err.strip().split("\n")[-6:])
            print(f"FAIL {where}: exit {code}\n  $ {cmd}\n       {tail}")
    return failed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--llmctl", required=True, help="the binary to run")
    ap.add_argument("--source", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--only", action="append", default=[], help="documents to check (default: all)")
    args = ap.parse_args()
    source = os.path.abspath(args.source)
    binary = os.path.abspath(args.llmctl)
    data = os.environ.get("LLMCTL_TEST_DATA") or os.path.join(source, "..", "shared")
    data = os.path.abspath(data)
    if not os.path.exists(os.path.join(data, "models", "stories260K.gguf")):
        print(f"check-doc-examples: no test data in {data} (models/stories260K.gguf; set LLMCTL_TEST_DATA)")
        return 1 if os.environ.get("LLMCTL_REQUIRE_TEST_DATA") == "1" else 77
    docs = args.only or ["README.md"] + sorted(
        os.path.relpath(p, source) for p in glob.glob(os.path.join(source, "docs", "*.md")))
    env = dict(os.environ, LLMCTL_TEST_DATA=data, SLURM_ARRAY_TASK_ID="0", SLURM_ARRAY_TASK_COUNT="1")
    failed = total = 0
    for doc in docs:
        commands = commands_of(os.path.join(source, doc))
        total += len(commands)
        failed += run_document(doc, commands, binary, source, data, env)
    print(f"check-doc-examples: {total} commands in {len(docs)} documents, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
