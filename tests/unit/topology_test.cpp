// SPDX-License-Identifier: Apache-2.0
// PCI places read from sysfs, NCCL distances, and the NIC each local rank
// takes, on two real machines' layouts (sysfs_machines.h) and hand-made paths.
#include <gtest/gtest.h>

#include "sysfs_machines.h"
#include "topology/nic_choice.h"
#include "topology/pci_place.h"

namespace afmesh::topology {
namespace {

using test::SysfsMachine;

PciPlace at(std::vector<std::string> path, int numa = 0) {
    PciPlace place;
    place.bus_id = path.back();
    place.path = std::move(path);
    place.numa_node = numa;
    return place;
}

TEST(pci_distance, FollowsTheTreeAsNcclNamesIt) {
    const PciPlace gpu = at({"pci0000:10", "0000:10:01.1", "0000:11:00.0", "0000:12:00.0", "0000:13:00.0"});
    // Behind the same switch: a sibling downstream port.
    EXPECT_EQ(distance(gpu, at({"pci0000:10", "0000:10:01.1", "0000:11:00.0", "0000:12:01.0", "0000:14:00.0"})),
              Distance::kPix);
    // Behind a second switch below the first one's downstream port.
    EXPECT_EQ(distance(gpu, at({"pci0000:10", "0000:10:01.1", "0000:11:00.0", "0000:12:02.0", "0000:15:00.0",
                                "0000:16:00.0", "0000:17:00.0"})),
              Distance::kPxb);
    // Another root port of the same root complex.
    EXPECT_EQ(distance(gpu, at({"pci0000:10", "0000:10:03.1", "0000:18:00.0"})), Distance::kPhb);
    // Another root complex: on the same socket, or on the other one.
    EXPECT_EQ(distance(gpu, at({"pci0000:20", "0000:20:01.1", "0000:21:00.0"}, 0)), Distance::kNode);
    EXPECT_EQ(distance(gpu, at({"pci0000:80", "0000:80:01.1", "0000:81:00.0"}, 1)), Distance::kSys);
    // A kernel without NUMA information has one node.
    EXPECT_EQ(distance(at({"pci0000:10", "0000:10:00.0"}, -1), at({"pci0000:20", "0000:20:00.0"}, 0)), Distance::kNode);
    EXPECT_EQ(distance(PciPlace{}, gpu), Distance::kUnknown);
}

TEST(sysfs, ReadsPlacesNumaAndCpusOfGpusAndNics) {
    SysfsMachine machine = SysfsMachine::eight_by_eight();
    Sysfs sysfs(machine.root());
    ASSERT_EQ(machine.gpus().size(), 8u);
    PciPlace gpu;
    ASSERT_TRUE(sysfs.pci_place(machine.gpus()[5], &gpu).is_ok());
    EXPECT_EQ(gpu.bus_id, machine.gpus()[5]);
    ASSERT_EQ(gpu.path.size(), 5u);  // root complex, root port, upstream port, downstream port, the GPU
    EXPECT_EQ(gpu.path[0].rfind("pci0000:", 0), 0u);
    EXPECT_EQ(gpu.numa_node, 1);
    EXPECT_EQ(gpu.local_cpus, "32-63,96-127");
    const std::vector<Nic> nics = sysfs.rdma_nics();
    ASSERT_EQ(nics.size(), 8u);
    EXPECT_EQ(nics[0].name, "mlx5_0");
    EXPECT_EQ(nics[0].place.numa_node, 0);
    EXPECT_EQ(nics[7].place.local_cpus, "32-63,96-127");
    PciPlace missing;
    EXPECT_EQ(sysfs.pci_place("0000:ff:00.0", &missing).code(), Code::kNotFound);
    EXPECT_TRUE(Sysfs(machine.root() + "/nowhere").rdma_nics().empty());
}

// What each local rank r takes, running on GPU r.
std::vector<std::string> choices(const SysfsMachine &machine) {
    Sysfs sysfs(machine.root());
    const std::vector<Nic> nics = sysfs.rdma_nics();
    std::vector<std::string> names;
    for (size_t r = 0; r < machine.gpus().size(); ++r) {
        PciPlace gpu;
        EXPECT_TRUE(sysfs.pci_place(machine.gpus()[r], &gpu).is_ok());
        const NicChoice choice = choose_nic(&gpu, nics, static_cast<int>(r));
        names.push_back(choice.nic >= 0 ? nics[static_cast<size_t>(choice.nic)].name : "none");
    }
    return names;
}

// Each GPU ties between the two NICs of its switch; the pair spreads over them.
TEST(nic_choice, EightGpusEightNicsEachTakesItsOwnSwitchsNic) {
    SysfsMachine machine = SysfsMachine::eight_by_eight();
    const std::vector<std::string> expected = {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3",
                                               "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7"};
    EXPECT_EQ(choices(machine), expected);
    Sysfs sysfs(machine.root());
    PciPlace gpu;
    ASSERT_TRUE(sysfs.pci_place(machine.gpus()[1], &gpu).is_ok());
    const NicChoice choice = choose_nic(&gpu, sysfs.rdma_nics(), 1);
    EXPECT_EQ(choice.distance, Distance::kPix);
    EXPECT_EQ(choice.reason, "PIX (same PCIe switch) from GPU " + machine.gpus()[1] +
                                 "; 2 tie (mlx5_0, mlx5_1): local rank 1 takes number 1");
}

// One NIC per socket: a socket's four GPUs share its NIC, never the other socket's.
TEST(nic_choice, FewerNicsThanGpusEachSocketSharesItsOwn) {
    SysfsMachine machine = SysfsMachine::eight_by_two();
    const std::vector<std::string> expected = {"mlx5_0", "mlx5_0", "mlx5_0", "mlx5_0",
                                               "mlx5_1", "mlx5_1", "mlx5_1", "mlx5_1"};
    EXPECT_EQ(choices(machine), expected);
    Sysfs sysfs(machine.root());
    PciPlace gpu;
    ASSERT_TRUE(sysfs.pci_place(machine.gpus()[2], &gpu).is_ok());
    EXPECT_EQ(choose_nic(&gpu, sysfs.rdma_nics(), 2).distance, Distance::kNode);
}

TEST(nic_choice, WithoutAGpuProcessesSpreadOverEveryNic) {
    SysfsMachine machine = SysfsMachine::eight_by_two();
    const std::vector<Nic> nics = Sysfs(machine.root()).rdma_nics();
    EXPECT_EQ(choose_nic(nullptr, nics, 0).nic, 0);
    EXPECT_EQ(choose_nic(nullptr, nics, 1).nic, 1);
    EXPECT_EQ(choose_nic(nullptr, nics, 2).nic, 0);
    EXPECT_EQ(choose_nic(nullptr, {}, 0).nic, -1);
}

}  // namespace
}  // namespace afmesh::topology
