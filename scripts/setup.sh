#!/usr/bin/env bash
# Installs what is missing (Debian packages only) and builds llmctl.
#
#   scripts/setup.sh [--build-dir DIR] [--cuda AUTO|ON|OFF] [--werror] [--sanitize] [--no-build]
#
# The CUDA backend is built when nvcc is found (AUTO); the CUDA toolkit itself is not a Debian
# package we install: put nvcc on PATH or in /usr/local/cuda.
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=build
cuda=AUTO
werror=OFF
sanitize=OFF
do_build=1
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build_dir="$2"; shift 2 ;;
    --cuda) cuda="$2"; shift 2 ;;
    --werror) werror=ON; shift ;;
    --sanitize) sanitize=ON; shift ;;
    --no-build) do_build=0; shift ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done

packages=(cmake make g++ pkg-config git libcli11-dev libfmt-dev libsentencepiece-dev catch2 nlohmann-json3-dev libopenblas-dev libpcre2-dev libedit-dev libutf8proc-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    sudo=sudo
  fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

[ "$do_build" = 1 ] || exit 0
jobs=$(nproc 2>/dev/null || echo 2)
mkdir -p "$build_dir"
log="$build_dir/configure.log"
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DLLMCTL_CUDA="$cuda" \
      -DLLMCTL_WERROR="$werror" -DLLMCTL_SANITIZE="$sanitize" >"$log" 2>&1 \
  || { cat "$log" >&2; exit 1; }
grep -E "llmctl: CUDA backend" "$log" || true
cmake --build "$build_dir" -j "$jobs"
echo "setup: built $build_dir/llmctl"
