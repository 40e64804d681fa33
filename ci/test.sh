#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The README's test command: installs what the build and tests need, then
# builds and runs the whole suite for every preset of the CI matrix.
set -euo pipefail
cd "$(dirname "$0")/.."
ci/install-deps.sh
ci/matrix.sh "$@"
