#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The README's main job: build the release preset and run a local
# 2 worker x 2 server AF benchmark on the cpu device and tcp transport,
# printing afmesh's latency table next to the raw transport floor.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset release >/dev/null
cmake --build --preset release --target afmesh  # the tool and the modules it loads
exec build/release/bin/afmesh run --workers 2 --servers 2 --timeout 600 -- \
  afmesh bench --iters 200 --warmup 20 --trace "$@"
