#!/usr/bin/env bash
# One-shot GPU check for a lent GPU machine (one H200, 16 cores): configures a CUDA build for
# sm_90 only in build-gpu, builds what the check needs, prints `llmctl --version`, runs the CUDA
# tests (test_kernel_math on the CPU; on the GPU, where a skip is a failure: test_gpu (get_rows
# wrapper), test_gpu_backend (every Backend op against the CPU reference: paged attention and
# its statistics, top_k, weight types, batch invariance, the cuBLAS mode) and test_gpu_model
# (stories260K parity, CUDA graphs on vs off bit for bit, sampling from device candidates;
# SKIP when the model file is not found)), times the get_rows kernel
# (tools/bench_get_rows), then benchmarks a random-weight Llama-3.2-1B-shape model in F16 and
# Q4_0 (tools/make_random_model + llmctl quantize + llmctl bench --device cuda: decode tok/s,
# GB/s and % of the device's copy bandwidth against issue 4's targets, prefill tok/s with the
# cuBLAS GEMMs and with the batch-invariant matvec; decode again with --cuda-graphs on, the
# summary giving decode tok/s with graphs on vs off).
# Every stage's result goes into the summary, printed LAST (and written to $OUT/gpu-check.txt
# when OUT is set, with the bench CSVs); exits 1 when any stage failed. Budget: under 8 minutes
# with the build; the benchmark is skipped (and says so) when the build left too little time.
#
#   scripts/gpu-check.sh [--build-only] [--fetch-deps] [--no-bench] [--with-8b]
#                        [--build-dir DIR] [--arch LIST] [--jobs N]
#
#   --build-only  every step but the GPU ones, for a machine without a GPU; test_gpu must then
#                 exit 77 (skipped), which proves the skip path.
#   --fetch-deps  run HERE, not on the GPU machine: downloads the Debian packages the build needs
#                 (CLI11, fmt, nlohmann-json, Catch2, sentencepiece, pkgconf) into .gpu-deps/,
#                 which the GPU machine's image lacks and cannot download, and copies the test
#                 data the check reads (models/stories260K.gguf, vocab/ggml-vocab-llama-spm.gguf)
#                 from ../shared into .gpu-deps/data. Then exits.
#   --no-bench    skip the model benchmark.   --with-8b  also the llama-8b shape (F16 only;
#                 16 GB written and read: over the 8-minute budget on a cold machine).
#   --build-dir   default build-gpu;  --arch  default 90;  --jobs  default nproc.
#
# On the GPU machine (device tool): scripts/gpu-check.sh, carrying .gpu-deps, timeout ~540 s.
# When the build dependencies are missing there and .gpu-deps/*.deb exist, they are unpacked
# into .gpu-deps/root (never into /) and used from there. Test data: $LLMCTL_TEST_DATA, else
# ../shared, else .gpu-deps/data.
set -euo pipefail
# -e: every command that may fail runs inside `if`, `||` or a `run_stage`, so a failure is
# recorded in the summary instead of ending the script silently.
cd "$(dirname "$0")/.."
root_dir=$(pwd)

build_only=0
fetch_deps=0
bench=1
with_8b=0
build_dir=build-gpu
arch=90
jobs=$(nproc 2>/dev/null || echo 4)
while [ $# -gt 0 ]; do
  case "$1" in
    --build-only) build_only=1; shift ;;
    --fetch-deps) fetch_deps=1; shift ;;
    --no-bench) bench=0; shift ;;
    --with-8b) with_8b=1; shift ;;
    --build-dir) build_dir="$2"; shift 2 ;;
    --arch) arch="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    -h|--help) sed -n '2,35p' "$0"; exit 0 ;;
    *) echo "gpu-check: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done

deps_dir="$root_dir/.gpu-deps"
deps_packages=(libcli11-dev libfmt-dev libfmt9 nlohmann-json3-dev catch2 libsentencepiece-dev
               libsentencepiece0 pkgconf pkgconf-bin libpkgconf3)

if [ "$fetch_deps" = 1 ]; then
  mkdir -p "$deps_dir"
  (cd "$deps_dir" && apt-get download "${deps_packages[@]}") || { echo "gpu-check: apt-get download failed" >&2; exit 1; }
  # Test data for test_gpu_model and the benchmark's vocabulary (small files).
  for f in models/stories260K.gguf vocab/ggml-vocab-llama-spm.gguf; do
    if [ -f "../shared/$f" ]; then
      mkdir -p "$deps_dir/data/$(dirname "$f")" && cp "../shared/$f" "$deps_dir/data/$f"
    else
      echo "gpu-check: ../shared/$f not found; the GPU run will skip what needs it" >&2
    fi
  done
  # The device tool carries only ignored paths.
  grep -qxF '/.gpu-deps/' .git/info/exclude 2>/dev/null || echo '/.gpu-deps/' >>.git/info/exclude
  du -sh "$deps_dir"
  echo "gpu-check: packages in .gpu-deps/ (ignored via .git/info/exclude); carry .gpu-deps to the GPU machine"
  exit 0
fi

t_start=$(date +%s)
budget=480
summary=()
bench_table=()
failed=0
summary_file=$(mktemp)
elapsed() { echo $(($(date +%s) - t_start)); }
# record NAME STATUS SECONDS [NOTE]   STATUS: ok, FAIL, SKIP
record() {
  summary+=("$(printf '%-22s %-5s %4ss  %s' "$1" "$2" "$3" "${4:-}")")
  if [ "$2" = FAIL ]; then failed=1; fi
  return 0
}
banner() { echo; echo "=== gpu-check: $* ($(elapsed) s elapsed)"; }
# The summary is the last thing printed (and $OUT/gpu-check.txt with the bench CSVs).
finish() {
  local total
  total=$(elapsed)
  {
    echo
    echo "=== gpu-check summary ($(date -u '+%Y-%m-%d %H:%M UTC'), $(hostname))"
    printf '%s\n' "${summary[@]}"
    if [ "${#bench_table[@]}" -gt 0 ]; then
      echo
      printf '%s\n' "${bench_table[@]}"
    fi
    echo
    echo "total: ${total} s (budget ${budget} s)$(if [ "$total" -gt "$budget" ]; then echo ' -- OVER BUDGET'; fi)"
    if [ "$failed" = 0 ]; then echo "gpu-check: PASS"; else echo "gpu-check: FAIL"; fi
  } >"$summary_file"
  if [ -n "${OUT:-}" ] && mkdir -p "$OUT"; then
    cp "$summary_file" "$OUT/gpu-check.txt" || true
    cp "$build_dir"/bench-models/*.csv "$OUT/" 2>/dev/null || true
  fi
  cat "$summary_file"
  rm -f "$summary_file"
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
      unpacked() { dpkg-deb -x "$deb" "$prefix"; }
    else
      unpacked() { (tmp=$(mktemp -d) && cd "$tmp" && ar x "$deb" && tar -xf data.tar.* -C "$prefix" && rm -rf "$tmp"); }
    fi
    if ! unpacked; then record dependencies FAIL 0 "could not unpack $deb"; finish; fi
  done
  libdir="$prefix/usr/lib/x86_64-linux-gnu"
  # pkg-config files name prefix=/usr; point them at the unpacked tree.
  for pc in "$libdir"/pkgconfig/*.pc; do sed -i "s|^prefix=/usr|prefix=$prefix/usr|" "$pc" || true; done
  export PATH="$prefix/usr/bin:$PATH"
  export PKG_CONFIG_PATH="$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  cmake_extra+=("-DCMAKE_PREFIX_PATH=$prefix/usr" "-DPKG_CONFIG_EXECUTABLE=$prefix/usr/bin/pkgconf")
  if [ "${GPU_CHECK_FORCE_DEPS:-0}" = 1 ]; then cmake_extra+=("-DCMAKE_IGNORE_PREFIX_PATH=/usr;/"); fi
fi

# --- test data ------------------------------------------------------------------------------
data_dir=""
if [ -n "${LLMCTL_TEST_DATA:-}" ]; then
  data_dir=$LLMCTL_TEST_DATA
elif [ -d ../shared ]; then
  data_dir=$(cd ../shared && pwd)
elif [ -d "$deps_dir/data" ]; then
  data_dir=$deps_dir/data
  export LLMCTL_TEST_DATA=$data_dir  # test_gpu_model looks there
fi
echo "gpu-check: test data: ${data_dir:-none found}"


# --- configure and build ------------------------------------------------------------------
banner "configure ($build_dir, CUDA architectures $arch)"
generator=()
if command -v ninja >/dev/null && [ ! -f "$build_dir/Makefile" ]; then generator=(-G Ninja); fi
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
     test_kernel_math bench_get_rows make_random_model; then
  record build ok $(($(date +%s) - t))
else
  record build FAIL $(($(date +%s) - t)); finish
fi

banner "llmctl --version"
t=$(date +%s)
rc=0
version_out=$("$build_dir/llmctl" --version 2>&1) || rc=$?
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
  local name=$1 limit=$2 t rc=0
  banner "$name"
  t=$(date +%s)
  if [ "$build_only" = 1 ]; then
    "$build_dir/tests/gpu/$name" || rc=$?
    case "$rc" in
      77) record "$name" ok $(($(date +%s) - t)) "skipped (exit 77) as expected without a GPU" ;;
      0) record "$name" ok $(($(date +%s) - t)) "passed (a GPU is visible)" ;;
      *) record "$name" FAIL $(($(date +%s) - t)) "exit $rc" ;;
    esac
    return 0
  fi
  LLMCTL_REQUIRE_GPU=1 timeout "$limit" "$build_dir/tests/gpu/$name" || rc=$?
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
run_gpu_test test_gpu 120
run_gpu_test test_gpu_backend 180
run_gpu_test test_gpu_model 90

# --- svd-embed on the GPU (issue 6: Gram + cuSOLVER path) -----------------------------------
# Its own block: builds test_gpu_svd_embed and bench_svd_embed, runs the test (GPU singular
# values against dgesdd and the CPU path; exit 77 expected with --build-only), then times
# `llmctl svd-embed --device cuda` on bench_svd_embed's random 32000 x 2048 matrix (seed 1,
# written once per build dir as a GGUF). About 30 s after the build.
svd_embed_check() {
  local t rc=0 gguf="$build_dir/bench-models/svd-embed-32000x2048.gguf" out err t0 t1
  banner "svd-embed GPU: build"
  t=$(date +%s)
  if ! cmake --build "$build_dir" -j "$jobs" --target test_gpu_svd_embed bench_svd_embed; then
    record "svd-embed build" FAIL $(($(date +%s) - t)); return 0
  fi
  record "svd-embed build" ok $(($(date +%s) - t))
  run_gpu_test test_gpu_svd_embed 120
  if [ "$build_only" = 1 ]; then return 0; fi
  mkdir -p "$build_dir/bench-models"
  if [ ! -s "$gguf" ]; then
    stage "svd-embed matrix" 60 "$build_dir/tools/bench_svd_embed" --rows 32000 --cols 2048 \
      --seed 1 --repeat 0 --save-gguf "$gguf.tmp" && mv "$gguf.tmp" "$gguf" || return 0
  fi
  banner "llmctl svd-embed --device cuda (32000 x 2048)"
  out="$build_dir/bench-models/svd-embed-cuda.json"
  err="$build_dir/bench-models/svd-embed-cuda.err"
  t=$(date +%s)
  t0=$(date +%s.%N)
  timeout 60 "$build_dir/llmctl" svd-embed -m "$gguf" --device cuda --json >"$out" 2>"$err" || rc=$?
  t1=$(date +%s.%N)
  cat "$err" >&2
  if [ "$rc" != 0 ]; then
    record "svd-embed cuda" FAIL $(($(date +%s) - t)) "exit $rc: $(tail -1 "$err")"; return 0
  fi
  local device secs bound
  device=$(grep -o '"device":"[^"]*"' "$out" | head -1 | cut -d'"' -f4 || true)
  secs=$(grep -o '"seconds":{[^}]*}' "$out" | head -1 | sed 's/"seconds"://; s/"//g' || true)
  bound=$(grep -o '"error_bound":[^,}]*' "$out" | head -1 | cut -d: -f2 || true)
  if [ "$device" != cuda:0 ]; then
    record "svd-embed cuda" FAIL $(($(date +%s) - t)) "computed on '$device', expected cuda:0"; return 0
  fi
  record "svd-embed cuda" ok $(($(date +%s) - t)) "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }') s wall, 32000x2048 F32; in-process $secs; bound $bound"
}
svd_embed_check

if [ "$build_only" = 1 ]; then finish; fi

banner "bench_get_rows"
t=$(date +%s)
rc=0
bench_out=$(timeout 60 "$build_dir/bench_get_rows" --rows 32000 --cols 4096 --ids 4096 --runs 50 \
              --types Q4_0,Q8_0,F16 2>&1) || rc=$?
echo "$bench_out"
if [ "$rc" = 0 ]; then
  record bench_get_rows ok $(($(date +%s) - t)) "$(echo "$bench_out" | grep -m1 '^bench_get_rows:' || true)"
else
  record bench_get_rows FAIL $(($(date +%s) - t)) "exit $rc"
fi

# --- model benchmark ------------------------------------------------------------------------
models_dir="$build_dir/bench-models"
# stage NAME LIMIT CMD...: runs CMD under a timeout; records ok/FAIL; returns CMD's status.
stage() {
  local name=$1 limit=$2 t rc=0
  shift 2
  banner "$name"
  t=$(date +%s)
  timeout "$limit" "$@" || rc=$?
  if [ "$rc" = 0 ]; then record "$name" ok $(($(date +%s) - t))
  elif [ "$rc" = 124 ]; then record "$name" FAIL $(($(date +%s) - t)) "timed out after ${limit} s"
  else record "$name" FAIL $(($(date +%s) - t)) "exit $rc"; fi
  return "$rc"
}
# A model file, written once per build dir (the generator is deterministic in its seed).
make_model() {
  local shape=$1 out=$2
  if [ -s "$out" ]; then record "model $shape" ok 0 "reused $out"; return 0; fi
  stage "model $shape" 150 "$build_dir/tools/make_random_model" --shape "$shape" \
    --vocab-from "$vocab" "$out.tmp" && mv "$out.tmp" "$out"
}
# bench_rows CSV LABEL [GEMM_GFLOPS]: table rows from `llmctl bench --csv` (model,type,bytes,
# params,threads,test,tok_s,sd,gb_s,bw_pct,gflop_s). Decode rows against issue 4's targets (F16
# 75 %, Q4_0 60 % of the copy bandwidth; decode is always the matvec, one token per step);
# prefill rows against 50 % of cuBLAS's GEMM rate when it was measured (the whole prefill's
# GFLOP/s, attention and the small ops included, so a conservative proxy for "the GEMMs").
bench_rows() {
  local rows
  rows=$(awk -F, -v label="$2" -v gemm="${3:-0}" 'NR > 1 {
      if ($6 ~ /^tg/) {
        target = ($2 == "F16") ? 75 : (($2 == "Q4_0") ? 60 : 0)
        verdict = (target == 0) ? "" : (($10 + 0 >= target) ? "met" : "MISSED")
        printf "%-6s %-7s %-10s %9.1f %8.1f %6.1f%%   >=%d%% of copy bw: %s\n", $2, $6, (label == "graphs") ? "graphs" : "matvec", $7, $9, $10, target, verdict
      } else if (gemm + 0 > 0) {
        pct = 100 * $11 / gemm
        printf "%-6s %-7s %-10s %9.1f %8s %6.1f%%   >=50%% of cuBLAS rate: %s (%.0f GFLOP/s)\n", $2, $6, label, $7, "", pct, (pct >= 50) ? "met" : "MISSED", $11
      } else {
        printf "%-6s %-7s %-10s %9.1f %8s %7s   %.0f GFLOP/s\n", $2, $6, label, $7, "", "", $11
      }
    }' "$1") || return 1
  while IFS= read -r line; do
    if [ -n "$line" ]; then bench_table+=("$line"); fi
  done <<<"$rows"
}

run_model_bench() {
  vocab="$data_dir/vocab/ggml-vocab-llama-spm.gguf"
  if [ -z "$data_dir" ] || [ ! -f "$vocab" ]; then
    record bench SKIP 0 "vocab/ggml-vocab-llama-spm.gguf not found: run --fetch-deps on the build machine"
    return 0
  fi
  if [ "$(elapsed)" -gt $((budget - 170)) ]; then
    record bench SKIP 0 "only $((budget - $(elapsed))) s of the ${budget} s budget left"
    return 0
  fi
  mkdir -p "$models_dir"
  local f16="$models_dir/llama-3.2-1b-f16.gguf" q4="$models_dir/llama-3.2-1b-q4_0.gguf"
  make_model llama-3.2-1b "$f16" || return 0
  if [ ! -s "$q4" ]; then
    stage "quantize q4_0" 120 "$build_dir/llmctl" quantize "$f16" "$q4.tmp" --type q4_0 --pure --force \
      && mv "$q4.tmp" "$q4" || return 0
  fi
  # Decode (unaffected by the mode: one token per step) and prefill through cuBLAS; then
  # prefill again with the batch-invariant matvec (the default mode).
  stage "bench cublas" 200 sh -c "'$build_dir/llmctl' bench --device cuda -m '$f16,$q4' -p 512 -n 128 -r 3 \
      --batch-invariant off --csv >'$models_dir/bench-cublas.csv' 2>'$models_dir/bench-cublas.err'; \
      rc=\$?; cat '$models_dir/bench-cublas.err' >&2; exit \$rc" || return 0
  local probe gemm
  probe=$(grep -o 'probe_gb_s=[0-9.]*' "$models_dir/bench-cublas.err" | tail -1 | cut -d= -f2 || true)
  gemm=$(grep -o 'gemm_gflop_s=[0-9.]*' "$models_dir/bench-cublas.err" | tail -1 | cut -d= -f2 || true)
  bench_table+=("benchmark: llama-3.2-1b shape, random weights, 1 sequence, pp512 and tg128, 3 runs;")
  bench_table+=("  GPU copy bandwidth ${probe:-?} GB/s, cuBLAS f16 GEMM rate ${gemm:-?} GFLOP/s (measured)")
  bench_table+=("$(printf '%-6s %-7s %-10s %9s %8s %7s   %s' type test matmul tok/s GB/s '% probe' target)")
  bench_rows "$models_dir/bench-cublas.csv" cublas "${gemm:-0}" ||
    record "bench table" FAIL 0 "could not parse bench-cublas.csv"
  if [ "$(elapsed)" -gt $((budget - 40)) ]; then
    record "bench invariant" SKIP 0 "over the budget"
  elif stage "bench invariant" 90 sh -c "'$build_dir/llmctl' bench --device cuda -m '$f16,$q4' -p 512 -n 0 -r 3 \
      --batch-invariant on --probe-mib 0 --csv >'$models_dir/bench-invariant.csv'"; then
    bench_rows "$models_dir/bench-invariant.csv" invariant || record "bench table" FAIL 0 "could not parse bench-invariant.csv"
  fi
  # Decode with each step replayed as a CUDA graph (--cuda-graphs on) against the plain launches
  # of the first run (the same decode: the mode only changes prefill).
  if [ "$(elapsed)" -gt $((budget - 45)) ]; then
    record "bench graphs" SKIP 0 "over the budget"
  elif stage "bench graphs" 90 sh -c "'$build_dir/llmctl' bench --device cuda -m '$f16,$q4' -p 0 -n 128 -r 3 \
      --cuda-graphs on --probe-mib 0 --csv >'$models_dir/bench-graphs.csv' 2>'$models_dir/bench-graphs.err'; \
      rc=\$?; cat '$models_dir/bench-graphs.err' >&2; exit \$rc"; then
    bench_rows "$models_dir/bench-graphs.csv" graphs || record "bench table" FAIL 0 "could not parse bench-graphs.csv"
    if grep -q 'CUDA graphs turned off' "$models_dir/bench-graphs.err"; then
      record "bench graphs" FAIL 0 "a capture failed: $(grep -m1 'CUDA graphs turned off' "$models_dir/bench-graphs.err")"
    fi
    local ratio
    ratio=$(awk -F, 'FNR == 1 { next } $6 ~ /^tg/ { if (FILENAME ~ /graphs/) on[$2] = $7; else off[$2] = $7 }
      END { for (t in on) if (off[t] > 0) { printf "%s%s %.1f -> %.1f tok/s (x%.2f)", sep, t, off[t], on[t], on[t] / off[t]; sep = "; " } }' \
      "$models_dir/bench-cublas.csv" "$models_dir/bench-graphs.csv" || true)
    bench_table+=("decode with CUDA graphs off -> on: ${ratio:-?}")
  fi
  if [ "$with_8b" = 1 ]; then
    local f8="$models_dir/llama-8b-f16.gguf"
    make_model llama-8b "$f8" || return 0
    if stage "bench 8b" 240 sh -c "'$build_dir/llmctl' bench --device cuda -m '$f8' -p 0 -n 64 -r 2 --csv >'$models_dir/bench-8b.csv'"; then
      bench_rows "$models_dir/bench-8b.csv" 8b || true
    fi
  fi
}
if [ "$bench" = 1 ]; then run_model_bench; else record bench SKIP 0 "--no-bench"; fi
finish
