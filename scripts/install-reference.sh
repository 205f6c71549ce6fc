#!/usr/bin/env bash
# Installs llama.cpp as the independent reference (the PyPI package llama-cpp-python, built
# from source for this CPU) into a virtual environment outside the checkout. The product never
# needs it; tools/llamacpp_reference.py uses it to write the tests/fixtures/llamacpp_*.json
# golden files.
#
#   scripts/install-reference.sh            # venv at ${LLMCTL_REF_VENV:-$HOME/.cache/llmctl/ref-venv}
#
# Idempotent: an existing venv with the pinned version is left alone. The source build takes
# a long time on a small machine (about half an hour on 2 busy cores); run it in the background.
set -euo pipefail

version=0.3.36
venv="${LLMCTL_REF_VENV:-$HOME/.cache/llmctl/ref-venv}"
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
cmake_args="-DGGML_NATIVE=ON"
if grep -qw 'amx_tile\|amx_int8\|amx_bf16' /proc/cpuinfo; then
  noamx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
  cmake_args="$cmake_args -DCMAKE_C_FLAGS='$noamx' -DCMAKE_CXX_FLAGS='$noamx'"
fi
echo "install-reference: CMAKE_ARGS=$cmake_args"
CMAKE_ARGS="$cmake_args" CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
  "$venv/bin/pip" install --no-binary llama-cpp-python --no-cache-dir --verbose \
  "llama-cpp-python==$version"
"$venv/bin/python" -c 'import llama_cpp; print("install-reference: llama-cpp-python", llama_cpp.__version__)'
