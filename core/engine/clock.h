// SPDX-License-Identifier: Apache-2.0
// Timestamps for traces: CLOCK_MONOTONIC nanoseconds (comparable between
// processes on one host; across hosts only durations taken on one node are).
#pragma once

#include <time.h>

#include <cstdint>

namespace afmesh {

inline uint64_t monotonic_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace afmesh
