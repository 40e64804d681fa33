#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Checks the cuda device module and the engine's device paths on a host with
# an NVIDIA GPU. CI machines have none: there the same engine paths run
# against a fake GPU module (tests/cluster/device_cluster_test.cpp); this
# runs them against the real driver and prints one table.
#
#   1. the device HAL conformance suite for cuda;
#   2. a local 2 worker x 2 server AF cluster over tcp with every tensor in
#      CUDA memory (tcp cannot register it, so the engine stages it through
#      pinned host memory), every byte checked, short answers included;
#   3. the same cluster reading answers behind afmesh_stream_wait, also
#      timed against afmesh_wait + copy (p50/p99 of push-pull -> answers
#      readable on the host; 1 micro-batch of 8x1024 floats).
#
# usage: ci/gpu-check.sh [preset]        (default preset: full)
# env:   SKIP_BUILD=1   use an existing build/<preset>
#        ITERS=N        timed iterations (default 300)
# Finishes in a few minutes (the build is most of it); every step is bounded.
set -euo pipefail

preset=${1:-full}
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build/$preset
iters=${ITERS:-300}
cd "$root"

section() { printf '\n=== %s ===\n' "$*"; }

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu-check: no usable NVIDIA GPU here (nvidia-smi is missing or finds no device); nothing to check" >&2
  exit 2
fi
section "GPUs"
nvidia-smi -L

if [[ -z ${SKIP_BUILD:-} ]]; then
  section "build ($preset, cuda only among the vendor SDKs)"
  # HIP, Level Zero and the RDMA stacks are other machines' business.
  timeout 360 cmake --preset "$preset" -B "$build" -DAFMESH_WITH_CUDA=ON -DAFMESH_WITH_HIP=OFF -DAFMESH_WITH_ZE=OFF \
    -DAFMESH_WITH_IBVERBS=OFF -DAFMESH_WITH_FABRIC=OFF >/dev/null
  timeout 360 cmake --build "$build" -j"$(nproc)" --target device_conformance af_test_node afmesh
fi
modules=$build/lib/afmesh
[[ -f $modules/libafmesh_dev_cuda.so ]] || { echo "gpu-check: $modules/libafmesh_dev_cuda.so was not built" >&2; exit 1; }

results=()
record() { results+=("$(printf '%-44s %s' "$1" "$2")"); }

section "device conformance (cuda)"
if timeout 120 "$build/bin/device_conformance" --gtest_filter='*cuda*' --gtest_brief=1; then
  record "device conformance, cuda" "passed"
else
  record "device conformance, cuda" "FAILED"
fi

# A 2x2 cluster of af_test_node with CUDA tensors over tcp; prints the
# workers' lines and returns the run's status.
cluster() {
  AFMESH_DEVICE=cuda AFMESH_TRANSPORT=tcp AFMESH_MODULE_PATH=$modules \
    timeout 120 "$build/bin/afmesh" run --workers 2 --servers 2 -- \
    "$build/bin/af_test_node" echo --device "$@"
}

section "2x2 cluster, CUDA tensors staged over tcp, 3 micro-batches, short answers"
if out=$(cluster --iters 50 --microbatches 3 --dynamic 2>&1); then
  record "2x2 staged over tcp, every byte checked" "passed"
else
  echo "$out" | tail -40
  record "2x2 staged over tcp, every byte checked" "FAILED"
fi

section "2x2 cluster, answers read behind afmesh_stream_wait"
if out=$(cluster --iters 20 --microbatches 1 --dynamic --stream-wait 2>&1); then
  record "2x2 stream_wait, stream ordered after answers" "passed"
else
  echo "$out" | tail -40
  record "2x2 stream_wait, stream ordered after answers" "FAILED"
fi

section "latency: afmesh_wait + copy vs afmesh_stream_wait (worker 0)"
latency() {
  local out
  if out=$(cluster --iters "$iters" --microbatches 1 --rows 8 --cols 1024 --report-latency "$@" 2>&1); then
    echo "$out" | grep -o 'worker 0 latency_us.*' | sed 's/worker 0 latency_us //'
  else
    echo "$out" | tail -20 >&2
    echo "FAILED"
  fi
}
record "latency us, wait + copy to host" "$(latency)"
record "latency us, stream_wait + copy on the stream" "$(latency --stream-wait)"

# The AF shape (128 x 7168 bf16 = 1.75 MiB, here as floats): staged in
# 512 KiB chunks, each sent while the next is copied, against one piece.
section "latency: 1.75 MiB staged in chunks vs in one piece (worker 0)"
af_shape=(--rows 128 --cols 3584)
record "latency us, 1.75 MiB, 512 KiB chunks" "$(export AFMESH_STAGING_CHUNK=524288; latency "${af_shape[@]}")"
record "latency us, 1.75 MiB, one piece" "$(export AFMESH_STAGING_CHUNK=1073741824; latency "${af_shape[@]}")"

section "summary"
printf '%s\n' "${results[@]}"
! printf '%s\n' "${results[@]}" | grep -q FAILED
