// SPDX-License-Identifier: Apache-2.0
#include "nic_choice.h"

#include <algorithm>

namespace afmesh::topology {

const char *distance_name(Distance d) {
    switch (d) {
    case Distance::kPix: return "PIX";
    case Distance::kPxb: return "PXB";
    case Distance::kPhb: return "PHB";
    case Distance::kNode: return "NODE";
    case Distance::kSys: return "SYS";
    case Distance::kUnknown: break;
    }
    return "?";
}

const char *distance_meaning(Distance d) {
    switch (d) {
    case Distance::kPix: return "same PCIe switch";
    case Distance::kPxb: return "across PCIe switches under one root port";
    case Distance::kPhb: return "same root complex";
    case Distance::kNode: return "same NUMA node, other root complex";
    case Distance::kSys: return "across NUMA nodes";
    case Distance::kUnknown: break;
    }
    return "no GPU to measure from";
}

// The path starts at the root complex ("pci0000:15"), then its root port,
// then, behind a switch, the switch's upstream and downstream ports: two
// devices are behind one switch when they share its upstream port (three
// components in common) and each hangs at most a downstream port below it.
Distance distance(const PciPlace &a, const PciPlace &b) {
    if (a.path.empty() || b.path.empty()) return Distance::kUnknown;
    if (a.path[0] != b.path[0]) {
        // A kernel that reports no node (-1) has one.
        return std::max(a.numa_node, 0) == std::max(b.numa_node, 0) ? Distance::kNode : Distance::kSys;
    }
    const auto a_end = std::mismatch(a.path.begin(), a.path.end(), b.path.begin(), b.path.end()).first;
    const size_t common = static_cast<size_t>(a_end - a.path.begin());
    if (common == 1) return Distance::kPhb;
    const size_t below_a = a.path.size() - common, below_b = b.path.size() - common;
    return common >= 3 && below_a <= 2 && below_b <= 2 ? Distance::kPix : Distance::kPxb;
}

NicChoice choose_nic(const PciPlace *gpu, const std::vector<Nic> &nics, int local_rank) {
    NicChoice choice;
    if (nics.empty()) {
        choice.reason = "no RDMA NIC found";
        return choice;
    }
    std::vector<Distance> far(nics.size(), Distance::kUnknown);
    if (gpu)
        for (size_t i = 0; i < nics.size(); ++i) far[i] = distance(*gpu, nics[i].place);
    choice.distance = *std::min_element(far.begin(), far.end());
    std::vector<int> nearest;
    for (size_t i = 0; i < nics.size(); ++i)
        if (far[i] == choice.distance) nearest.push_back(static_cast<int>(i));
    choice.nic = nearest[static_cast<size_t>(std::max(local_rank, 0)) % nearest.size()];
    choice.reason = gpu ? std::string(distance_name(choice.distance)) + " (" + distance_meaning(choice.distance) +
                              ") from GPU " + gpu->bus_id
                        : "no GPU place to measure from";
    if (nearest.size() > 1) {
        std::string tied;
        for (int i : nearest) tied += (tied.empty() ? "" : ", ") + nics[static_cast<size_t>(i)].name;
        choice.reason += "; " + std::to_string(nearest.size()) + " tie (" + tied + "): local rank " +
                         std::to_string(local_rank) + " takes number " +
                         std::to_string(std::max(local_rank, 0) % static_cast<int>(nearest.size()));
    }
    return choice;
}

}  // namespace afmesh::topology
