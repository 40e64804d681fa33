#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs `cmake --workflow --preset <p>` (configure, build, test) for each preset
# given, or the CI list, and prints one summary line per preset.
set -uo pipefail
cd "$(dirname "$0")/.."

presets=("$@")
[ ${#presets[@]} -gt 0 ] || presets=(full asan tsan clang fuzz)

failed=()
summary=()
for preset in "${presets[@]}"; do
  echo "::group::cmake --workflow --preset ${preset}"
  start=$(date +%s)
  if cmake --workflow --preset "${preset}"; then result=passed; else result=FAILED; failed+=("${preset}"); fi
  summary+=("$(printf '%-8s %-7s %4ss' "${preset}" "${result}" "$(( $(date +%s) - start ))")")
  echo "::endgroup::"
done

echo "== afmesh CI matrix =="
printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "failed presets: ${failed[*]}"
  exit 1
fi
