#!/usr/bin/env bash
# Whole-process time of loading a vocabulary and tokenizing one word, per vocabulary file:
# what every llmctl command pays before its first token. Prints the median of N runs.
#
#   scripts/bench-tokenizer-load.sh [-n RUNS] [--llmctl PATH] [GGUF ...]
#
# Default files: llama.cpp's reference vocabularies in ${LLMCTL_TEST_DATA:-../shared}/vocab.
set -euo pipefail
cd "$(dirname "$0")/.."

runs=11
llmctl=build/llmctl
files=()
while [ $# -gt 0 ]; do
  case "$1" in
    -n) runs="$2"; shift 2 ;;
    --llmctl) llmctl="$2"; shift 2 ;;
    -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
    -*) echo "bench-tokenizer-load.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) files+=("$1"); shift ;;
  esac
done
[ -x "$llmctl" ] || { echo "bench-tokenizer-load.sh: no $llmctl (run scripts/setup.sh)" >&2; exit 1; }
if [ ${#files[@]} -eq 0 ]; then
  data="${LLMCTL_TEST_DATA:-../shared}"
  files=("$data"/vocab/*.gguf)
fi

printf '%-36s %10s %10s\n' file median_ms peak_MiB
for f in "${files[@]}"; do
  [ -f "$f" ] || { echo "bench-tokenizer-load.sh: no such file: $f" >&2; exit 1; }
  times=()
  peak=0
  for _ in $(seq "$runs"); do
    t0=$(date +%s%N)
    kb=$( { /usr/bin/time -f '%M' "$llmctl" tokenize -m "$f" hello --format ids >/dev/null; } 2>&1 | tail -1)
    t1=$(date +%s%N)
    times+=($(( (t1 - t0) / 1000000 )))
    [ "$kb" -gt "$peak" ] && peak="$kb"
  done
  median=$(printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  printf '%-36s %10s %10s\n' "$(basename "$f")" "$median" "$((peak / 1024))"
done
