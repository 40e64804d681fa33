// SPDX-License-Identifier: Apache-2.0
// The module's clock for handshake deadlines.
#pragma once

#include <time.h>

#include <cstdint>

namespace afmesh::fabric {

inline uint64_t monotonic_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace afmesh::fabric
