#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs every Debian package the build and the tests need (Debian 12).
# Safe to run again: apt-get skips what is already installed.
set -euo pipefail

packages=(
  # toolchain and test framework (most are on the image already); libclang-rt-14-dev
  # has clang's sanitizer and libFuzzer runtimes, which the fuzz preset links
  cmake ninja-build g++ clang libclang-rt-14-dev lld libgtest-dev libgmock-dev
  # the data plane's authentication (HMAC-SHA256, random keys); JSON and the command line for the tools
  libssl-dev nlohmann-json3-dev libcli11-dev
  # transports: libfabric (runs for real: tcp;ofi_rxm and shm), rdma-core (compiled; no RDMA kernel here)
  libfabric-dev libfabric-bin libibverbs-dev librdmacm-dev
  # device modules: Level Zero loader, ROCm HIP runtime (CUDA comes with the image at /usr/local/cuda)
  libze-dev libze1 hipcc libamdhip64-dev
  # integration tests: network namespaces and fault injection; real job managers
  # (mpirun; a one-host Slurm with munge, started and stopped by the test)
  iproute2 iptables openmpi-bin slurm-wlm munge
  # Python package and examples: pytest, numpy and torch for /usr/bin/python3; rustc for the Rust example
  python3 python3-pytest python3-numpy python3-torch rustc
  # the wheel, built offline and installed into a fresh venv; pkg-config for the installed-package consumer
  python3-pip python3-setuptools python3-wheel python3-venv pkg-config
  # metrics and benchmark reports: the Prometheus collector, bench.json's schema check, its plot
  python3-prometheus-client python3-jsonschema python3-matplotlib
  # the Kubernetes example's check reads its YAML
  python3-yaml
  # tools/peers/afmesh-peers: UCX's ping-pong (ucx_perftest) beside afmesh bench and fi_pingpong
  ucx-utils
  # tools/profile/afmesh-instructions: instructions per push-pull under callgrind
  valgrind
)

if [ "$(id -u)" -ne 0 ]; then sudo=sudo; else sudo=; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
echo "ci/install-deps.sh: installed ${#packages[@]} packages"
