#!/usr/bin/env bash
# The KL / perplexity table of a model across quantization types (Markdown on stdout):
# each type is made with `llmctl quantize` from the F32 model and evaluated with
# `llmctl eval --base F32` on the built-in "stories" text. KL is exact (--top-k = n_vocab)
# unless TOP_K is set lower. Q4_0 also with --keep-embedding/--keep-output f16 and, when
# `quantize --imatrix` exists, with an importance matrix collected by `eval --save-imatrix`
# on the built-in "calibration" text (a different text from the one evaluated).
#
#   scripts/eval-table.sh [MODEL.gguf]        (default: the shared stories260K.gguf)
# "fallbacks": types quantize wrote for tensors whose rows are not a multiple of the asked
# type's block (stories260K: ffn_down rows of 172 -> F16 in every block type; rows of 64 <
# 256 -> the K-types fall back for every matrix, so q6_k/q5_k/q4_k equal q8_0/q5_1/q5_0).
#   env: LLMCTL=path/to/llmctl (default build/llmctl), TOP_K (default n_vocab = 512),
#        CTX (default: eval's), DEVICE (default cpu), OUT_DIR (default: a temp dir, removed)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${LLMCTL:-$root/build/llmctl}"
model="${1:-$root/../shared/models/stories260K.gguf}"
top_k="${TOP_K:-512}"
device="${DEVICE:-cpu}"
ctx_args=()
[ -n "${CTX:-}" ] && ctx_args=(--ctx "$CTX")
if [ -n "${OUT_DIR:-}" ]; then
  out="$OUT_DIR"
  mkdir -p "$out"
else
  out="$(mktemp -d)"
  trap 'rm -rf "$out"' EXIT
fi
[ -x "$bin" ] || { echo "eval-table: $bin is not built (set LLMCTL)" >&2; exit 1; }
[ -f "$model" ] || { echo "eval-table: $model not found" >&2; exit 1; }

help="$("$bin" quantize --help)"
supports() { grep -qiw -- "$1" <<<"$help"; }

# field NAME from eval's summary line (stderr: llmctl-eval: ppl=... kl_mean=...)
field() { sed -n "s/.*[ :]$1=\([^ ]*\).*/\1/p" <<<"$2" | tail -1; }

# Types quantize wrote instead of the asked one (rows that are not a multiple of its block).
fallbacks() {
  [ -f "$1" ] || return 0
  grep -o "writing [A-Za-z0-9_]* instead" "$1" | awk '{print $2}' | sort -u | paste -sd, - || true
}

echo "| model | file bytes | ppl | KL mean | KL median | KL p99 | top-1 | mean dp | fallbacks |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---|"
row() {  # row LABEL NAME  (NAME.gguf and NAME.log in $out)
  local line
  line="$("$bin" eval -m "$out/$2.gguf" --base "$model" --top-k "$top_k" --device "$device" \
    "${ctx_args[@]}" 2>&1 >/dev/null | grep '^llmctl-eval:')"
  printf '| %s | %s | %.4f | %.6f | %.6f | %.6f | %.4f | %+.6f | %s |\n' "$1" \
    "$(stat -c %s "$out/$2.gguf")" "$(field ppl "$line")" "$(field kl_mean "$line")" \
    "$(field kl_median "$line")" "$(field kl_p99 "$line")" "$(field top1 "$line")" \
    "$(field dp "$line")" "$(fallbacks "$out/$2.log")"
}
quant() {  # quant NAME TYPE [quantize args...]
  local name="$1" type="$2"
  shift 2
  "$bin" quantize "$model" "$out/$name.gguf" --type "$type" --pure --force "$@" >/dev/null 2>"$out/$name.log" \
    || { echo "eval-table: quantize $name failed:" >&2; cat "$out/$name.log" >&2; return 1; }
}

for t in f32 f16 bf16 q8_0 q6_k q5_k q5_1 q5_0 q4_k q4_1 q4_0; do
  supports "$t" || continue
  quant "$t" "$t"
  row "$t" "$t"
done
quant q4_0-keep16 q4_0 --keep-embedding f16 --keep-output f16
row "q4_0 + embd/output f16" q4_0-keep16
if supports --imatrix; then
  "$bin" eval -m "$model" --builtin-text calibration --device "$device" \
    --save-imatrix "$out/calibration.imatrix.gguf" >/dev/null 2>&1
  quant q4_0-imatrix q4_0 --imatrix "$out/calibration.imatrix.gguf"
  row "q4_0 + imatrix (calibration text)" q4_0-imatrix
  for t in q4_1 q4_k; do
    supports "$t" || continue
    quant "$t-imatrix" "$t" --imatrix "$out/calibration.imatrix.gguf"
    row "$t + imatrix (calibration text)" "$t-imatrix"
  done
fi
