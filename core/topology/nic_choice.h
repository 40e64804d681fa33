// SPDX-License-Identifier: Apache-2.0
// How far apart two PCI devices are, in NCCL's terms, and which NIC a
// process should use: the nearest to its GPU, processes that tie spread
// over the tied NICs by local rank, as a person laying out an 8-GPU,
// 8-NIC host would.
#pragma once

#include <string>
#include <vector>

#include "pci_place.h"

namespace afmesh::topology {

/** Path types between two PCI devices, nearest first (NCCL's names). */
enum class Distance {
    kPix,      // through one PCIe switch
    kPxb,      // through several PCIe bridges, not the host bridge
    kPhb,      // through the PCIe host bridge: the same root complex
    kNode,     // across root complexes of one NUMA node
    kSys,      // across NUMA nodes (the socket interconnect)
    kUnknown,  // one side's place is not known (a CPU-only process)
};

/** "PIX", "PXB", "PHB", "NODE", "SYS" or "?". */
const char *distance_name(Distance d);
/** What it means, e.g. "same PCIe switch". */
const char *distance_meaning(Distance d);

Distance distance(const PciPlace &a, const PciPlace &b);

struct NicChoice {
    int nic = -1;  // index into the NICs given; -1 when there is none
    Distance distance = Distance::kUnknown;
    std::string reason;  // one line: why this NIC
};

/**
 * The NIC for the process of `local_rank` whose GPU sits at `gpu` (nullptr:
 * no GPU, e.g. the cpu device): the nearest; among NICs equally near, the
 * (local_rank mod their number)-th by name, so processes that tie spread.
 */
NicChoice choose_nic(const PciPlace *gpu, const std::vector<Nic> &nics, int local_rank);

}  // namespace afmesh::topology
