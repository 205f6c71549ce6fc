#!/usr/bin/env bash
# Sets up (scripts/setup.sh), then runs every test through CTest.
#
#   scripts/test.sh [--ci] [--sanitize] [--build-dir DIR] [-- CTEST_ARGS...]
#
#   --ci        CI settings: warnings as errors, CUDA compiled (LLMCTL_CUDA=ON), test data
#               required (a missing file fails instead of skipping).
#   --sanitize  AddressSanitizer + UndefinedBehaviorSanitizer build (in build-asan).
# Test data (models/, vocab/, golden/) is found through LLMCTL_TEST_DATA, default ../shared.
set -euo pipefail
cd "$(dirname "$0")/.."

ci=0
sanitize=0
build_dir=""
ctest_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --ci) ci=1; shift ;;
    --sanitize) sanitize=1; shift ;;
    --build-dir) build_dir="$2"; shift 2 ;;
    --) shift; ctest_args=("$@"); break ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "test.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done

setup_args=()
if [ "$ci" = 1 ]; then
  setup_args+=(--werror --cuda ON)
  export LLMCTL_REQUIRE_TEST_DATA=1
  : "${build_dir:=build-ci}"
fi
if [ "$sanitize" = 1 ]; then
  setup_args+=(--sanitize --cuda OFF)
  : "${build_dir:=build-asan}"
fi
: "${build_dir:=build}"
scripts/setup.sh --build-dir "$build_dir" "${setup_args[@]}"

if [ -z "${LLMCTL_TEST_DATA:-}" ] && [ -d ../shared ]; then
  export LLMCTL_TEST_DATA="$(cd ../shared && pwd)"
fi
echo "test: data from ${LLMCTL_TEST_DATA:-<none: tests that need it are skipped>}"
cd "$build_dir"
ctest --output-on-failure -j "$(nproc 2>/dev/null || echo 2)" "${ctest_args[@]}"
