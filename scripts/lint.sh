#!/usr/bin/env bash
# House rules that a script can check: include layering (check-layering.sh) and file size
# (ARCHITECTURE.md: files under about 500 lines, none over 1,000; generated tables exempt).
set -euo pipefail
root="${1:-$(cd "$(dirname "$0")/.." && pwd)}"
cd "$root"
status=0
scripts/check-layering.sh "$root" || status=1
while IFS= read -r f; do
  head -3 "$f" | grep -qi "generated" && continue
  n=$(wc -l <"$f")
  if [ "$n" -gt 1000 ]; then echo "size: $f has $n lines (limit 1,000; split it)"; status=1
  elif [ "$n" -gt 500 ]; then echo "size: note: $f has $n lines (aim for under 500)"; fi
done < <(find src kernels tools tests -type f \( -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \) 2>/dev/null | sort)
exit "$status"
