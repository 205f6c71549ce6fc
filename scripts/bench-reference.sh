#!/usr/bin/env bash
# llmctl against the reference engine (llama.cpp through the PyPI package llama-cpp-python
# 0.3.36, built for this CPU in a virtual environment outside the checkout) on the same GGUF
# files, interleaved, timed around its own C decode calls; prints medians, ratios and llmctl's
# shares of its probes (--no-probes: without them; tools/bench_reference.py has the method).
#
#   scripts/bench-reference.sh [--make-llama1b DIR] [-m FILE]... [-p 512] [-n 128] [-d 0]
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
#   --isa avx2          both engines held to AVX2 (an AVX-512 machine standing in for an AVX2-only
#                       one): llama.cpp built without AVX-512 (install-reference.sh --isa avx2, its
#                       own venv), llmctl with LLMCTL_MATMUL_ISA=avx2
# Without -m: SmolLM2-135M-Instruct Q4_1 and Gemma 3 270M Q4_K_M from the test data, plus the
# DIR files when --make-llama1b is given. Needs build/llmctl (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
isa=native
data="${LLMCTL_TEST_DATA:-$(cd .. && pwd)/shared}"
cache="${LLMCTL_MODEL_CACHE:-$HOME/.cache/llmctl/models}"
make_dir=""
models=()
rest=()
while [ $# -gt 0 ]; do
  case "$1" in
    --make-llama1b) make_dir="$2"; shift 2 ;;
    -m) models+=("$2"); shift 2 ;;
    --isa) isa="$2"; shift 2 ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
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

if [ -n "$make_dir" ]; then
  mkdir -p "$make_dir"
  cmake --build build --target make_random_model >&2
  f16="$make_dir/llama-3.2-1b-random-f16.gguf"
  [ -f "$f16" ] || build/tools/make_random_model --shape llama-3.2-1b \
      --vocab-from "$data/vocab/ggml-vocab-llama-spm.gguf" --seed 1 "$f16" >&2
  # llama.cpp's ftype numbers (llama.h: LLAMA_FTYPE_MOSTLY_*)
  for mix in Q8_0:7 Q4_0:2 Q4_K_M:15 Q3_K_M:12 Q2_K:10 IQ4_XS:30; do
    out="$make_dir/llama-3.2-1b-random-${mix%%:*}-llamacpp.gguf"
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
  models+=("$f16")
fi
if [ ${#models[@]} -eq 0 ]; then
  models=("$data/models/SmolLM2-135M-Instruct.Q4_1.gguf")
  [ -f "$cache/gemma-3-270m-q4_k_m.gguf" ] && models+=("$cache/gemma-3-270m-q4_k_m.gguf")
fi
args=()
for m in "${models[@]}"; do args+=(-m "$m"); done
exec "$venv/bin/python" tools/bench_reference.py --llmctl build/llmctl "${args[@]}" "${rest[@]}"
