#!/usr/bin/env bash
# One-shot GPU check for a lent GPU machine (one H200, 16 cores): configures a CUDA build for
# sm_90 only in build-gpu, builds what the check needs, prints `llmctl --version`, runs the CUDA
# tests (test_kernel_math on the CPU; on the GPU, where a skip is a failure: test_gpu (get_rows
# wrapper), test_gpu_backend (every Backend op against the CPU reference, paged attention, batch
# invariance) and test_gpu_model (stories260K parity; reported SKIP when the model file is not
# found: set LLMCTL_TEST_DATA)) and times the get_rows kernel (tools/bench_get_rows: 32000x4096 Q4_0/Q8_0/F16 tables, 4096 ids, GB/s).
# Ends with a summary; exits 1 when any step failed. Budget: under 8 minutes with the build.
#
#   scripts/gpu-check.sh [--build-only] [--fetch-deps] [--build-dir DIR] [--arch LIST] [--jobs N]
#
#   --build-only  every step but the GPU ones, for a machine without a GPU; test_gpu must then
#                 exit 77 (skipped), which proves the skip path.
#   --fetch-deps  run HERE, not on the GPU machine: downloads the Debian packages the build needs
#                 (CLI11, fmt, nlohmann-json, Catch2, sentencepiece, pkgconf) into .gpu-deps/,
#                 which the GPU machine's image lacks and cannot download. Then exits.
#   --build-dir   default build-gpu;  --arch  default 90;  --jobs  default nproc.
#
# On the GPU machine (device tool): scripts/gpu-check.sh, carrying .gpu-deps, timeout ~540 s.
# When the build dependencies are missing there and .gpu-deps/*.deb exist, they are unpacked
# into .gpu-deps/root (never into /) and used from there.
set -uo pipefail
cd "$(dirname "$0")/.."
root_dir=$(pwd)

build_only=0
fetch_deps=0
build_dir=build-gpu
arch=90
jobs=$(nproc 2>/dev/null || echo 4)
while [ $# -gt 0 ]; do
  case "$1" in
    --build-only) build_only=1; shift ;;
    --fetch-deps) fetch_deps=1; shift ;;
    --build-dir) build_dir="$2"; shift 2 ;;
    --arch) arch="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "gpu-check: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done

deps_dir="$root_dir/.gpu-deps"
deps_packages=(libcli11-dev libfmt-dev libfmt9 nlohmann-json3-dev catch2 libsentencepiece-dev
               libsentencepiece0 pkgconf pkgconf-bin libpkgconf3)

if [ "$fetch_deps" = 1 ]; then
  mkdir -p "$deps_dir"
  (cd "$deps_dir" && apt-get download "${deps_packages[@]}") || { echo "gpu-check: apt-get download failed" >&2; exit 1; }
  # The device tool carries only ignored paths.
  grep -qxF '/.gpu-deps/' .git/info/exclude 2>/dev/null || echo '/.gpu-deps/' >>.git/info/exclude
  du -sh "$deps_dir"
  echo "gpu-check: packages in .gpu-deps/ (ignored via .git/info/exclude); carry .gpu-deps to the GPU machine"
  exit 0
fi

t_start=$(date +%s)
summary=()
failed=0
# record NAME STATUS SECONDS [NOTE]
record() {
  summary+=("$(printf '%-22s %-8s %4ss  %s' "$1" "$2" "$3" "${4:-}")")
  [ "$2" = FAIL ] && failed=1
  return 0
}
banner() { echo; echo "=== gpu-check: $* ($(($(date +%s) - t_start)) s elapsed)"; }
finish() {
  banner "summary"
  printf '%s\n' "${summary[@]}"
  local total=$(($(date +%s) - t_start))
  echo "total: ${total} s (budget 480 s)$([ "$total" -gt 480 ] && echo ' -- OVER BUDGET')"
  if [ "$failed" = 0 ]; then echo "gpu-check: PASS"; else echo "gpu-check: FAIL"; fi
  exit "$failed"
}

# --- dependencies -------------------------------------------------------------------------
have_deps() {
  command -v pkg-config >/dev/null && pkg-config --exists sentencepiece 2>/dev/null &&
    [ -f /usr/include/CLI/CLI.hpp ] && [ -f /usr/include/catch2/catch.hpp ] &&
    [ -f /usr/include/nlohmann/json.hpp ] && [ -f /usr/include/fmt/format.h ]
}
cmake_extra=()
# GPU_CHECK_FORCE_DEPS=1 exercises the unpack path on a machine that has the packages: the
# system copies are then hidden from CMake so the unpacked ones must work on their own.
if [ "${GPU_CHECK_FORCE_DEPS:-0}" = 1 ] || ! have_deps; then
  if ! ls "$deps_dir"/*.deb >/dev/null 2>&1; then
    echo "gpu-check: build dependencies missing and no .gpu-deps/*.deb to unpack" >&2
    echo "gpu-check: run 'scripts/gpu-check.sh --fetch-deps' on the build machine and carry .gpu-deps" >&2
    record dependencies FAIL 0 "missing; see above"
    finish
  fi
  banner "unpacking .gpu-deps into .gpu-deps/root"
  prefix="$deps_dir/root"
  rm -rf "$prefix" && mkdir -p "$prefix"
  for deb in "$deps_dir"/*.deb; do
    if command -v dpkg-deb >/dev/null; then
      dpkg-deb -x "$deb" "$prefix"
    else
      (tmp=$(mktemp -d) && cd "$tmp" && ar x "$deb" && tar -xf data.tar.* -C "$prefix" && rm -rf "$tmp")
    fi
  done
  libdir="$prefix/usr/lib/x86_64-linux-gnu"
  # pkg-config files name prefix=/usr; point them at the unpacked tree.
  for pc in "$libdir"/pkgconfig/*.pc; do sed -i "s|^prefix=/usr|prefix=$prefix/usr|" "$pc"; done
  export PATH="$prefix/usr/bin:$PATH"
  export PKG_CONFIG_PATH="$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  cmake_extra+=("-DCMAKE_PREFIX_PATH=$prefix/usr" "-DPKG_CONFIG_EXECUTABLE=$prefix/usr/bin/pkgconf")
  [ "${GPU_CHECK_FORCE_DEPS:-0}" = 1 ] && cmake_extra+=("-DCMAKE_IGNORE_PREFIX_PATH=/usr;/")
fi

# --- configure and build ------------------------------------------------------------------
banner "configure ($build_dir, CUDA architectures $arch)"
generator=()
command -v ninja >/dev/null && [ ! -f "$build_dir/Makefile" ] && generator=(-G Ninja)
t=$(date +%s)
# No LLMCTL_WERROR here: the GPU image's host compiler may be newer than CI's and warn about
# code CI accepts; warnings as errors are CI's gate, this script checks the GPU.
if cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DLLMCTL_CUDA=ON \
     -DLLMCTL_CUDA_ARCHITECTURES="$arch" "${cmake_extra[@]}"; then
  record configure ok $(($(date +%s) - t))
else
  record configure FAIL $(($(date +%s) - t)); finish
fi

banner "build (-j $jobs)"
t=$(date +%s)
if cmake --build "$build_dir" -j "$jobs" --target llmctl test_gpu test_gpu_backend test_gpu_model \
     test_kernel_math bench_get_rows; then
  record build ok $(($(date +%s) - t))
else
  record build FAIL $(($(date +%s) - t)); finish
fi

banner "llmctl --version"
t=$(date +%s)
version_out=$("$build_dir/llmctl" --version 2>&1)
rc=$?
echo "$version_out"
gpu_line=$(echo "$version_out" | grep -m1 '^gpu' || true)
if [ "$rc" = 0 ]; then record "llmctl --version" ok $(($(date +%s) - t)) "$gpu_line"
else record "llmctl --version" FAIL $(($(date +%s) - t)) "exit $rc"; fi

# --- tests --------------------------------------------------------------------------------
banner "test_kernel_math (kernel math on the CPU)"
t=$(date +%s)
if "$build_dir/tests/gpu/test_kernel_math"; then record test_kernel_math ok $(($(date +%s) - t))
else record test_kernel_math FAIL $(($(date +%s) - t)); fi

# run_gpu_test NAME TIMEOUT: a GPU test executable; exit 77 (no GPU) fails here unless
# --build-only, where it is the expected answer.
run_gpu_test() {
  local name=$1 limit=$2 t rc
  banner "$name"
  t=$(date +%s)
  if [ "$build_only" = 1 ]; then
    "$build_dir/tests/gpu/$name"
    rc=$?
    case "$rc" in
      77) record "$name" ok $(($(date +%s) - t)) "skipped (exit 77) as expected without a GPU" ;;
      0) record "$name" ok $(($(date +%s) - t)) "passed (a GPU is visible)" ;;
      *) record "$name" FAIL $(($(date +%s) - t)) "exit $rc" ;;
    esac
    return 0
  fi
  LLMCTL_REQUIRE_GPU=1 timeout "$limit" "$build_dir/tests/gpu/$name"
  rc=$?
  case "$rc" in
    0) record "$name" ok $(($(date +%s) - t)) ;;
    77) if [ "$name" = test_gpu_model ]; then
          record "$name" SKIP $(($(date +%s) - t)) "models/stories260K.gguf not found (LLMCTL_TEST_DATA)"
        else
          record "$name" FAIL $(($(date +%s) - t)) "SKIPPED but a GPU is expected here"
        fi ;;
    124) record "$name" FAIL $(($(date +%s) - t)) "timed out after ${limit} s" ;;
    *) record "$name" FAIL $(($(date +%s) - t)) "exit $rc" ;;
  esac
}
run_gpu_test test_gpu 180
run_gpu_test test_gpu_backend 180
run_gpu_test test_gpu_model 60
[ "$build_only" = 1 ] && finish

banner "bench_get_rows"
t=$(date +%s)
bench_out=$(timeout 180 "$build_dir/bench_get_rows" --rows 32000 --cols 4096 --ids 4096 --runs 50 \
              --types Q4_0,Q8_0,F16 2>&1)
rc=$?
echo "$bench_out"
if [ "$rc" = 0 ]; then
  record bench_get_rows ok $(($(date +%s) - t)) "$(echo "$bench_out" | grep -m1 '^bench_get_rows:')"
else
  record bench_get_rows FAIL $(($(date +%s) - t)) "exit $rc"
fi
finish
