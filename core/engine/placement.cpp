// SPDX-License-Identifier: Apache-2.0
#include "placement.h"

#include "topology/cpu_list.h"
#include "topology/nic_choice.h"

namespace afmesh {
namespace {

// The GPU's place, or nullopt for a device without a PCI bus id (the cpu device) or one sysfs does not know.
std::optional<topology::PciPlace> device_place(const topology::Sysfs &sysfs, const Module &device, int device_id) {
    afmesh_dev_info info{};
    info.struct_size = sizeof info;
    if (device.device().device_info(device.ctx(), device_id, &info) != AFMESH_HAL_OK || !info.bus_id[0])
        return std::nullopt;
    topology::PciPlace place;
    if (!sysfs.pci_place(info.bus_id, &place)) return std::nullopt;
    return place;
}

}  // namespace

Status place_node(const Config &config, const Module &device, int device_id, Placement *out) {
    *out = Placement{};
    std::optional<std::vector<int>> cpus;
    if (config.is_set("AFMESH_CPU_CORES")) {
        cpus = topology::parse_cpu_list(config.get("AFMESH_CPU_CORES"));
        if (!cpus) return {Code::kInvalidArgument, "AFMESH_CPU_CORES=" + config.get("AFMESH_CPU_CORES") +
                                                       " is not a CPU list (e.g. 4,5 or 0-7,64-71)"};
        out->cpus = *cpus;
    }
    const topology::Sysfs sysfs(config.get("AFMESH_SYSFS_ROOT"));
    const std::vector<topology::Nic> nics = sysfs.rdma_nics();
    if (config.is_set("AFMESH_NET_DEVICES")) {
        // The user's NIC (the first listed, as the transport takes it): staging memory still goes to its node.
        const std::string listed = config.get("AFMESH_NET_DEVICES");
        const std::string first = listed.substr(0, listed.find_first_of(":,"));
        for (const topology::Nic &nic : nics)
            if (nic.name == first) out->numa_node = nic.place.numa_node;
        return Status::ok();
    }
    if (nics.empty()) return Status::ok();
    const std::optional<topology::PciPlace> gpu = device_place(sysfs, device, device_id);
    const int local_rank = config.job_place() ? static_cast<int>(config.job_place()->local_rank) : device_id;
    const topology::NicChoice choice = choose_nic(gpu ? &*gpu : nullptr, nics, local_rank);
    const topology::Nic &nic = nics[static_cast<size_t>(choice.nic)];
    out->nic = nic.name;
    out->reason = nic.name + ": " + choice.reason;
    out->numa_node = nic.place.numa_node;
    if (!cpus) out->cpus = topology::parse_cpu_list(nic.place.local_cpus).value_or(std::vector<int>{});
    return Status::ok();
}

}  // namespace afmesh
