// SPDX-License-Identifier: Apache-2.0
// Latency samples and their summary (p50 / p99 / max), for `afmesh bench`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace afmesh::bench {

struct Summary {
    double p50_us = 0, p99_us = 0, max_us = 0;
    size_t samples = 0;
};

/** Sorts `ns` in place and summarises it. */
Summary summarize(std::vector<uint64_t> &ns);

}  // namespace afmesh::bench
