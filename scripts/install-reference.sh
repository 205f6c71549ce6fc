#!/usr/bin/env bash
# Installs llama.cpp as the independent reference (the PyPI package llama-cpp-python, built
# from source for this CPU) into a virtual environment outside the checkout. The product never
# needs it; tools/llamacpp_reference.py uses it to write the tests/fixtures/llamacpp_*.json
# golden files.
#
#   scripts/install-reference.sh            # venv at ${LLMCTL_REF_VENV:-$HOME/.cache/llmctl/ref-venv}
#   scripts/install-reference.sh --isa avx2 # venv at ${LLMCTL_REF_VENV:-$HOME/.cache/llmctl/ref-venv-avx2}
#
# --isa avx2 builds ggml for AVX2 + FMA + F16C + BMI2 and nothing wider (GGML_NATIVE off), so
# that an AVX-512 machine can stand in for an AVX2-only one when both engines are held to AVX2
# (scripts/bench-reference.sh --isa avx2 runs llmctl with LLMCTL_MATMUL_ISA=avx2 beside it).
# Idempotent: an existing venv with the pinned version is left alone. The source build takes
# a long time on a small machine (about half an hour on 2 busy cores); run it in the background.
set -euo pipefail

version=0.3.36
isa=native
case "${1:-}" in
  --isa) isa="${2:-}"; shift 2 || true ;;
  -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
  "") ;;
  *) echo "install-reference: unknown argument '$1' (see --help)" >&2; exit 2 ;;
esac
case "$isa" in
  native) venv="${LLMCTL_REF_VENV:-$HOME/.cache/llmctl/ref-venv}" ;;
  avx2) venv="${LLMCTL_REF_VENV:-$HOME/.cache/llmctl/ref-venv-avx2}" ;;
  *) echo "install-reference: --isa takes native or avx2, got '$isa'" >&2; exit 2 ;;
esac
# Debian's interpreter, not a pyenv shim: python3-venv and python3-dev belong to it.
py=/usr/bin/python3
[ -x "$py" ] || py="$(command -v python3)"

# Build tools, the venv module and Python headers (llama-cpp-python compiles ggml with CMake).
need=()
for pkg in python3-venv python3-dev build-essential cmake git; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ "${#need[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update && apt-get install -y --no-install-recommends "${need[@]}"
  else
    echo "install-reference: missing Debian packages: ${need[*]} (apt-get install them as root)" >&2
    exit 1
  fi
fi

if [ -x "$venv/bin/python" ] &&
   [ "$("$venv/bin/python" -c 'import llama_cpp; print(llama_cpp.__version__)' 2>/dev/null)" = "$version" ]; then
  echo "install-reference: llama-cpp-python $version already in $venv"
  exit 0
fi

mkdir -p "$(dirname "$venv")"
[ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
"$venv/bin/pip" install --upgrade pip
"$venv/bin/pip" install numpy gguf regex

# GGML_NATIVE tunes ggml for this CPU. AMX tile instructions fault inside this VM even when
# /proc/cpuinfo advertises them, so they are switched off explicitly where they are listed.
if [ "$isa" = avx2 ]; then
  cmake_args="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
  cmake_args="$cmake_args -DGGML_BMI2=ON -DGGML_AVX512=OFF -DGGML_AVX_VNNI=OFF"
else
  cmake_args="-DGGML_NATIVE=ON"
fi
if grep -qw 'amx_tile\|amx_int8\|amx_bf16' /proc/cpuinfo; then
  noamx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
  cmake_args="$cmake_args -DCMAKE_C_FLAGS='$noamx' -DCMAKE_CXX_FLAGS='$noamx'"
fi
echo "install-reference: CMAKE_ARGS=$cmake_args"
CMAKE_ARGS="$cmake_args" CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
  "$venv/bin/pip" install --no-binary llama-cpp-python --no-cache-dir --verbose \
  "llama-cpp-python==$version"
"$venv/bin/python" -c 'import llama_cpp; print("install-reference: llama-cpp-python", llama_cpp.__version__)'
