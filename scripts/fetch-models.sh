#!/usr/bin/env bash
# Downloads the public test files by URL and checks their sha256, for machines that have a
# network but no ../shared. Files land in DIR/models and DIR/vocab (default: the checkout itself,
# so models/stories260K.gguf is where `llmctl run` looks by default, and the tests look there
# when LLMCTL_TEST_DATA is unset and ../shared is absent; both folders are git-ignored).
#
#   scripts/fetch-models.sh [DIR]
#
# golden/ (reference greedy continuations made with llama.cpp) is not a public download; it
# travels with ../shared only, and the golden tests are skipped without it.
set -euo pipefail
cd "$(dirname "$0")/.."
dest="${1:-.}"

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

command -v curl >/dev/null || { echo "fetch-models: curl is needed (apt-get install curl)" >&2; exit 1; }
failed=0
for entry in "${files[@]}"; do
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
  if echo "$sum  $out.part" | sha256sum -c --status; then
    mv "$out.part" "$out"
    echo "ok       $rel"
  else
    echo "fetch-models: checksum mismatch for $rel: got $(sha256sum "$out.part" | cut -d' ' -f1), expected $sum" >&2
    echo "fetch-models: the upstream file changed; kept as $out.part, not used" >&2
    failed=1
  fi
done
[ "$failed" = 0 ] || exit 1
echo "fetch-models: done; run the tests with LLMCTL_TEST_DATA=$(cd "$dest" && pwd) scripts/test.sh"
