#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Every source file of the tree names its licence in its first two lines
# (after a #! line): prints the ones that do not and fails if there are any.
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"
missing=0
while IFS= read -r -d '' file; do
  if ! head -n 2 "$file" | grep -q 'SPDX-License-Identifier: Apache-2.0'; then
    echo "no SPDX-License-Identifier line: $file"
    missing=$((missing + 1))
  fi
done < <(find . -path ./build -prune -o -path ./.git -prune -o -type f \
           \( -name '*.cpp' -o -name '*.h' -o -name '*.hpp' -o -name '*.c' -o -name '*.rs' -o -name '*.py' \
              -o -name '*.sh' -o -name '*.cmake' -o -name '*.map' -o -name CMakeLists.txt \) -print0)
echo "check-spdx: $missing file(s) without a licence line"
[ "$missing" -eq 0 ]
