// SPDX-License-Identifier: Apache-2.0
// Two real machines' PCI layouts written as sysfs trees in a temporary
// directory (what AFMESH_SYSFS_ROOT points at), for the topology tests:
//  - eight_by_eight: 8 GPUs and 8 RDMA NICs behind 4 PCIe switches, each
//    switch with two GPUs and two NICs, two switches per socket (the
//    DGX A100 shape);
//  - eight_by_two: 8 GPUs behind 4 switches and only 2 NICs, one per
//    socket, in the first switch of its socket.
// GPUs are listed in device order; NICs are mlx5_0, mlx5_1, ...
#pragma once

#include <string>
#include <vector>

namespace afmesh::test {

class SysfsMachine {
public:
    static SysfsMachine eight_by_eight();
    static SysfsMachine eight_by_two();
    ~SysfsMachine();
    SysfsMachine(SysfsMachine &&other) noexcept;
    SysfsMachine(const SysfsMachine &) = delete;
    SysfsMachine &operator=(const SysfsMachine &) = delete;

    /** The directory holding sys/ (AFMESH_SYSFS_ROOT). */
    const std::string &root() const { return root_; }
    /** The GPUs' PCI bus ids, device 0 first. */
    const std::vector<std::string> &gpus() const { return gpus_; }

private:
    SysfsMachine();
    // One PCIe switch on socket `numa` holding `gpus` GPUs and the NICs named in `nics`.
    void add_switch(int numa, int gpus, const std::vector<std::string> &nics);
    // A PCI device at the end of `path` (root complex first), linked from sys/bus/pci/devices.
    std::string add_device(const std::vector<std::string> &path, int numa);

    std::string root_;
    std::vector<std::string> gpus_;
    int next_bus_ = 0x10;
};

}  // namespace afmesh::test
