// SPDX-License-Identifier: Apache-2.0
#include "latency_stats.h"

#include <algorithm>

namespace afmesh::bench {

Summary summarize(std::vector<uint64_t> &ns) {
    Summary s;
    s.samples = ns.size();
    if (ns.empty()) return s;
    std::sort(ns.begin(), ns.end());
    auto at = [&](double q) { return ns[std::min(ns.size() - 1, static_cast<size_t>(q * static_cast<double>(ns.size())))] / 1e3; };
    s.p50_us = at(0.50);
    s.p99_us = at(0.99);
    s.max_us = ns.back() / 1e3;
    return s;
}

}  // namespace afmesh::bench
