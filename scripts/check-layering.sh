#!/usr/bin/env bash
# Enforces the include layering of ARCHITECTURE.md: each directory may include project headers
# only from the directories listed for it. Prints every violation; exits 1 when there is one.
#
#   scripts/check-layering.sh [SOURCE_DIR]
set -euo pipefail
root="${1:-$(cd "$(dirname "$0")/.." && pwd)}"
cd "$root"

# directory -> project include prefixes it may use (besides its own directory)
declare -A allowed=(
  [src/core]="core/"
  [src/io]="core/ io/"
  [src/quant]="core/ io/ quant/"
  [src/tokenizer]="core/ io/ tokenizer/"
  [src/sampler]="core/ sampler/"
  [src/plan]="core/ io/ plan/"
  [src/model]="core/ io/ quant/ model/ backend/backend.h"
  [src/diag]="core/ io/ quant/ model/ tokenizer/ diag/ backend/backend.h"
  [src/backend]="core/ backend/"
  [src/backend/cpu]="core/ quant/ backend/backend.h backend/cpu/"
  [src/backend/cuda]="core/ backend/ kernels/kernels.h"
  [src/cli]="*"
  [kernels]="kernels/ common.cuh kernels.h"
)

status=0
while IFS= read -r file; do
  dir=$(dirname "$file")
  # the most specific rule that covers this file
  rule=""
  d="$dir"
  while [ -n "$d" ] && [ "$d" != "." ]; do
    if [ -n "${allowed[$d]+x}" ]; then rule="${allowed[$d]}"; break; fi
    d=$(dirname "$d")
  done
  [ -z "$rule" ] && continue
  [ "$rule" = "*" ] && continue
  while IFS= read -r inc; do
    ok=0
    for prefix in $rule; do
      case "$inc" in "$prefix"*) ok=1 ;; esac
    done
    # a file may include headers of its own directory by bare name
    [ -f "$dir/$inc" ] && ok=1
    if [ "$ok" = 0 ]; then
      echo "layering: $file includes \"$inc\" (allowed: $rule)"
      status=1
    fi
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$file")
done < <(find src kernels -type f \( -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \) | sort)

[ "$status" = 0 ] && echo "layering: ok"
exit "$status"
