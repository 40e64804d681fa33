#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tools.peers: afmesh-peers runs one small round, exits 0, and its table has
# a row with afmesh's p50 and p99 for every size in both families. A peer
# tool that fails on a CI host only reads "failed" in its column (without
# --require-all): what this gates is afmesh's side of the command. It checks
# that the command works, never how fast anything is.
# Usage: peers_test.sh AFMESH-PEERS AFMESH OUTPUT
set -uo pipefail
peers=$1 afmesh=$2 out=$3
"$peers" --rounds 1 --iters 100 --sizes 8,64K,1M --timeout 50 \
  --afmesh "$afmesh" --json "$out.json" > "$out" 2>&1
rc=$?
cat "$out"
if [ "$rc" -ne 0 ]; then
  echo "peers_test: afmesh-peers exited $rc"
  exit 1
fi
for family in shm tcp; do
  for size in "8 B" "64 KiB" "1 MiB"; do
    if ! grep -Eq "^$family +$size +\| +[0-9.]+ +[0-9.]+ \|" "$out"; then
      echo "peers_test: no row with afmesh's figures for $family $size"
      exit 1
    fi
  done
done
python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); assert len(d["summary"]) == 6 and d["runs"], d' "$out.json"
