#!/usr/bin/env bash
# llmctl against the reference engine (llama.cpp through the PyPI package llama-cpp-python
# 0.3.36, built for this CPU in a virtual environment outside the checkout) on the same GGUF
# files, interleaved, timed around its own C decode calls; prints medians, ratios and llmctl's
# shares of its probes (--no-probes: without them; tools/bench_reference.py has the method).
#
#   scripts/bench-reference.sh [--make-llama1b DIR] [--make-gptoss DIR] [-m FILE]... [-p 512]
#                              [-n 128] [-d 0]
#                              [-ctk f16] [-ctv f16] [--flash-attn] [-r 3] [-t 2] [--json]
#                              [--isa avx2]
#
#   -d N                the tests run after N positions already in the KV cache (filled untimed),
#                       as llama-bench's -d and `llmctl bench -d` ("pp512 @ d4096")
#   -ctk T, -ctv T      K / V cache type of both engines: f32, f16 (default), q8_0, q4_0; a
#                       quantized V runs llama.cpp with flash attention (it needs it)
#   --make-llama1b DIR  first write the Llama-3.2-1B-shape benchmark files into DIR (random
#                       weights, tools/make_random_model; ~6.5 GB): F16, and Q8_0, Q4_0,
#                       Q4_K_M, Q3_K_M, Q2_K and IQ4_XS quantized by llama.cpp's own quantizer
#                       (its mixes: the output tensor Q6_K, as llama-quantize does), and bench
#                       them
#   --make-gptoss DIR   likewise a gpt-oss-20b-shape file of 4 layers (tools/make_random_model
#                       --shape gpt-oss-20b-4l: 32 experts, 4 used; ~9 GB): F16, and MXFP4_MOE
#                       (experts MXFP4, the rest Q8_0) quantized by llama.cpp, and bench the latter
#   --isa avx2          both engines held to AVX2 (an AVX-512 machine standing in for an AVX2-only
#                       one): llama.cpp built without AVX-512 (install-reference.sh --isa avx2, its
#                       own venv), llmctl with LLMCTL_MATMUL_ISA=avx2
# Without -m, --make-llama1b or --make-gptoss: SmolLM2-135M-Instruct Q4_1 and Gemma 3 270M Q4_K_M
# from the test data. Needs build/llmctl (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
isa=native
data="${LLMCTL_TEST_DATA:-$(cd .. && pwd)/shared}"
cache="${LLMCTL_MODEL_CACHE:-$HOME/.cache/llmctl/models}"
make_dir=""
gptoss_dir=""
models=()
rest=()
while [ $# -gt 0 ]; do
  case "$1" in
    --make-llama1b) make_dir="$2"; shift 2 ;;
    --make-gptoss) gptoss_dir="$2"; shift 2 ;;
    -m) models+=("$2"); shift 2 ;;
    --isa) isa="$2"; shift 2 ;;
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
    *) rest+=("$1"); shift ;;
  esac
done
[ -x build/llmctl ] || { echo "bench-reference: build/llmctl is missing; run scripts/setup.sh" >&2; exit 1; }
case "$isa" in
  native) venv="${LLMCTL_REF_VENV:-$HOME/.cache/llmctl/ref-venv}" ;;
  avx2) venv="${LLMCTL_REF_VENV:-$HOME/.cache/llmctl/ref-venv-avx2}"; export LLMCTL_MATMUL_ISA=avx2 ;;
  *) echo "bench-reference: --isa takes native or avx2, got '$isa'" >&2; exit 2 ;;
esac
scripts/install-reference.sh --isa "$isa" >&2

# make_files SHAPE DIR MIX:FTYPE...: SHAPE's F16 file in DIR (tools/make_random_model), then
# each mix of it by llama.cpp's quantizer (FTYPE: llama.h's LLAMA_FTYPE_MOSTLY_* number),
# each added to the files to bench; files already there are kept.
make_files() {
  local shape="$1" dir="$2" mix out
  shift 2
  mkdir -p "$dir"
  cmake --build build --target make_random_model >&2
  f16="$dir/$shape-random-f16.gguf"
  [ -f "$f16" ] || build/tools/make_random_model --shape "$shape" \
      --vocab-from "$data/vocab/ggml-vocab-llama-spm.gguf" --seed 1 "$f16" >&2
  for mix in "$@"; do
    out="$dir/$shape-random-${mix%%:*}-llamacpp.gguf"
    [ -f "$out" ] || "$venv/bin/python" - "$f16" "$out" "${mix##*:}" >&2 <<'PY'
import ctypes, sys
import llama_cpp
p = llama_cpp.llama_model_quantize_default_params()
p.ftype = int(sys.argv[3])
p.nthread = 2
sys.exit(llama_cpp.llama_model_quantize(sys.argv[1].encode(), sys.argv[2].encode(), ctypes.byref(p)))
PY
    models+=("$out")
  done
}
if [ -n "$make_dir" ]; then
  make_files llama-3.2-1b "$make_dir" Q8_0:7 Q4_0:2 Q4_K_M:15 Q3_K_M:12 Q2_K:10 IQ4_XS:30
  models+=("$f16")
fi
[ -z "$gptoss_dir" ] || make_files gpt-oss-20b-4l "$gptoss_dir" MXFP4_MOE:38
if [ ${#models[@]} -eq 0 ]; then
  models=("$data/models/SmolLM2-135M-Instruct.Q4_1.gguf")
  [ -f "$cache/gemma-3-270m-q4_k_m.gguf" ] && models+=("$cache/gemma-3-270m-q4_k_m.gguf")
fi
args=()
for m in "${models[@]}"; do args+=(-m "$m"); done
exec "$venv/bin/python" tools/bench_reference.py --llmctl build/llmctl "${args[@]}" "${rest[@]}"
