#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Checks the ibverbs transport on a host with a real RDMA NIC (ConnectX,
# RoCE v2 or InfiniBand). CI machines have no RDMA kernel support and test
# the module against an emulation; this runs the same conformance suite and
# the AF benchmark over the real NIC and prints the results.
#
# usage: ci/ibverbs-hw-check.sh [preset]        (default preset: full)
# env:   AFMESH_NET_DEVICES=mlx5_0:1[:gid_index]  which port to use (default: the first active one)
#        SKIP_BUILD=1                            use an existing build/<preset>
set -euo pipefail

preset=${1:-full}
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build/$preset
cd "$root"

section() { printf '\n=== %s ===\n' "$*"; }

section "RDMA devices"
if [[ ! -e /dev/infiniband ]]; then
  echo "no /dev/infiniband: this kernel has no RDMA support (load ib_uverbs and the NIC's driver)" >&2
  exit 2
fi
if command -v ibv_devinfo >/dev/null; then
  ibv_devinfo -v | grep -E 'hca_id|port:|state|active_mtu|link_layer|sm_lid|port_lid|GID' || true
else
  echo "ibv_devinfo not found (apt install ibverbs-utils); listing sysfs"
  ls /sys/class/infiniband
fi
for peer in nv_mem amdkfd; do
  [[ -e /sys/kernel/mm/memory_peers/$peer ]] && echo "peer-memory client: $peer"
done
[[ -e /sys/module/nvidia_peermem ]] && echo "peer-memory client: nvidia_peermem"
unset AFMESH_IBVERBS_LIBRARY  # the real libibverbs, never the emulation

if [[ -z ${SKIP_BUILD:-} ]]; then
  section "build ($preset)"
  cmake --preset "$preset" -B "$build" -DAFMESH_WITH_IBVERBS=ON
  cmake --build "$build" -j"$(nproc)"
fi

section "afmesh info (the ibverbs module must be loaded)"
"$build/bin/afmesh" info | sed -n '/ibverbs/,/^$/p'
if "$build/bin/afmesh" info --json | grep -A3 '"name": "ibverbs"' | grep -q '"status": "not present"'; then
  echo "the ibverbs module reports not present; see the reason above" >&2
  exit 1
fi

status=0
section "transport conformance over ibverbs"
"$build/bin/transport_conformance" --gtest_filter='*/ibverbs' || status=1

section "afmesh bench over ibverbs (1 worker, 1 server)"
PATH="$build/bin:$PATH" AFMESH_TRANSPORT=ibverbs "$build/bin/afmesh" run --workers 1 --servers 1 -- afmesh bench || status=1

section "result"
if [[ $status -eq 0 ]]; then echo "ibverbs hardware check passed"; else echo "ibverbs hardware check FAILED"; fi
exit $status
