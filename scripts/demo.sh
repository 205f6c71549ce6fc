#!/usr/bin/env bash
# Sets up, then shows llmctl on the default model (stories260K): `inspect`, `tokenize`,
# greedy and sampled generation with `run`, and a two-line JSONL batch; then a real chat with
# SmolLM2-135M-Instruct through its own Jinja chat template, when that model is at hand
# (../shared/models, or scripts/fetch-models.sh fetches it).
#
#   scripts/demo.sh [MODEL.gguf]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >/dev/null
bin=build/llmctl

model="${1:-}"
if [ -z "$model" ]; then
  for dir in "${LLMCTL_TEST_DATA:-}" ../shared .; do
    if [ -n "$dir" ] && [ -f "$dir/models/stories260K.gguf" ]; then model="$dir/models/stories260K.gguf"; break; fi
  done
fi
if [ -z "$model" ]; then
  echo "demo: no model found; run scripts/fetch-models.sh or pass a .gguf path" >&2
  exit 1
fi

run() { echo; echo "\$ llmctl $*"; "$bin" "$@"; }
run --version
run inspect "$model"
run tokenize -m "$model" "Once upon a time"
run tokenize -m "$model" --format pieces "Once upon a time, there was a little girl named Lily."
run tokenize -m "$model" --decode "1 403 407 261 378"
run run -m "$model" -p "Once upon a time" -n 48 --temp 0
run run -m "$model" -p "Once upon a time" -n 48 --temp 0.8 --seed 42
printf '{"prompt": "Once upon a time"}\n{"prompt": "Lily and Tim went"}\n' |
  run run -m "$model" --batch - -n 24 --temp 0 --parallel 2

chat_model=""
for dir in "${LLMCTL_TEST_DATA:-}" ../shared .; do
  f="$dir/models/SmolLM2-135M-Instruct.Q4_1.gguf"
  if [ -n "$dir" ] && [ -f "$f" ]; then chat_model="$f"; break; fi
done
if [ -n "$chat_model" ]; then
  chat=$(mktemp --suffix=.json)
  trap 'rm -f "$chat"' EXIT
  printf '[{"role": "user", "content": "What is the capital of France?"}]' >"$chat"
  run tokenize -m "$chat_model" --chat "$chat" --format text
  run run -m "$chat_model" -p "The capital of France is" -n 24 --temp 0
  echo; echo "\$ printf 'What is the capital of France?\\nAnd of Italy?\\n' | llmctl run -m $chat_model -i -n 48 --temp 0"
  printf 'What is the capital of France?\nAnd of Italy?\n' | "$bin" run -m "$chat_model" -i -n 48 --temp 0
else
  echo; echo "demo: SmolLM2-135M-Instruct not found; scripts/fetch-models.sh fetches it for the chat demo"
fi
echo
