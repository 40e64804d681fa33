// SPDX-License-Identifier: Apache-2.0
// `afmesh info --topology`: the GPU x NIC matrix in NCCL's distances (as
// `nvidia-smi topo -m` prints it) and the NIC each local rank would take.
#include <algorithm>

#include "info_report.h"
#include "topology/nic_choice.h"
#include "topology/pci_place.h"

namespace afmesh::tool {
namespace {

using topology::Distance;
using topology::Nic;
using topology::PciPlace;

// Each device's place, or nullopt for a device without a PCI bus id or one sysfs does not know.
std::vector<std::optional<PciPlace>> device_places(const InfoReport &report, const topology::Sysfs &sysfs) {
    std::vector<std::optional<PciPlace>> places;
    for (const DeviceRow &d : report.devices) {
        PciPlace place;
        places.push_back(!d.bus_id.empty() && sysfs.pci_place(d.bus_id, &place) ? std::optional(place) : std::nullopt);
    }
    return places;
}

void write_matrix(const std::vector<std::optional<PciPlace>> &gpus, const std::vector<Nic> &nics, FILE *out) {
    fprintf(out, "\n%-6s", "");
    for (const Nic &nic : nics) fprintf(out, " %-8s", nic.name.c_str());
    fprintf(out, " %-5s %s\n", "NUMA", "CPU affinity");
    for (size_t g = 0; g < gpus.size(); ++g) {
        fprintf(out, "GPU%-3zu", g);
        for (const Nic &nic : nics)
            fprintf(out, " %-8s", gpus[g] ? distance_name(topology::distance(*gpus[g], nic.place)) : "?");
        if (gpus[g])
            fprintf(out, " %-5d %s\n", gpus[g]->numa_node, gpus[g]->local_cpus.c_str());
        else
            fprintf(out, " %-5s %s\n", "-", "(no PCI place)");
    }
    fprintf(out, "\n");
    for (const Nic &nic : nics)
        fprintf(out, "%-8s %s  NUMA %d  CPUs %s\n", nic.name.c_str(), nic.place.bus_id.c_str(), nic.place.numa_node,
                nic.place.local_cpus.c_str());
    fprintf(out, "\nLegend:\n");
    for (Distance d : {Distance::kPix, Distance::kPxb, Distance::kPhb, Distance::kNode, Distance::kSys})
        fprintf(out, "  %-4s %s\n", distance_name(d), distance_meaning(d));
}

}  // namespace

void write_topology_text(const InfoReport &report, const Config &config, FILE *out) {
    const topology::Sysfs sysfs(config.get("AFMESH_SYSFS_ROOT"));
    const std::vector<Nic> nics = sysfs.rdma_nics();
    const std::vector<std::optional<PciPlace>> gpus = device_places(report, sysfs);
    fprintf(out, "Topology (sysfs at %s): %zu device(s) of module '%s', %zu RDMA NIC(s)\n",
            config.get("AFMESH_SYSFS_ROOT").c_str(), gpus.size(), report.device.name.c_str(), nics.size());
    if (!nics.empty()) write_matrix(gpus, nics, out);
    fprintf(out, "\nNIC per local rank (local rank r on device r):\n");
    const size_t ranks = std::max<size_t>(gpus.size(), 1);
    for (size_t r = 0; r < ranks; ++r) {
        const PciPlace *gpu = r < gpus.size() && gpus[r] ? &*gpus[r] : nullptr;
        const topology::NicChoice choice = choose_nic(gpu, nics, static_cast<int>(r));
        fprintf(out, "  local rank %zu -> %s: %s\n", r,
                choice.nic >= 0 ? nics[static_cast<size_t>(choice.nic)].name.c_str() : "none", choice.reason.c_str());
    }
    if (config.is_set("AFMESH_NET_DEVICES"))
        fprintf(out, "\nAFMESH_NET_DEVICES=%s is set: it overrides these choices.\n",
                config.get("AFMESH_NET_DEVICES").c_str());
}

}  // namespace afmesh::tool
