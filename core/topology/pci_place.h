// SPDX-License-Identifier: Apache-2.0
// Where a PCI device sits, read from sysfs: its chain of bridges from the
// root complex down, its NUMA node and the CPUs local to it. The root is
// "/" on a host and a directory of the same shape in tests (AFMESH_SYSFS_ROOT),
// so machines with eight GPUs and eight NICs can be described on any host.
#pragma once

#include <string>
#include <vector>

#include "status.h"

namespace afmesh::topology {

struct PciPlace {
    std::string bus_id;             // "0000:18:00.0"
    std::vector<std::string> path;  // "pci0000:15", "0000:15:01.0", ..., bus_id: root complex first
    int numa_node = -1;             // -1: the kernel does not say (one node)
    std::string local_cpus;         // "0-23,48-71", as sysfs lists them; "" when unknown
};

/** An RDMA NIC (an ibverbs device) and where it sits. */
struct Nic {
    std::string name;  // "mlx5_0"
    PciPlace place;
};

class Sysfs {
public:
    /** Reads below `root` ("" or "/": this host's /sys). */
    explicit Sysfs(std::string root) : root_(root == "/" ? "" : std::move(root)) {}

    /** The place of the PCI device `bus_id` ("dddd:bb:dd.f", any case); NOT_FOUND when sysfs has no such device. */
    Status pci_place(const std::string &bus_id, PciPlace *out) const;
    /** Every RDMA device under sys/class/infiniband that sits on PCI, by name. */
    std::vector<Nic> rdma_nics() const;

private:
    Status place_of_device_dir(const std::string &dir, PciPlace *out) const;
    std::string root_;
};

}  // namespace afmesh::topology
