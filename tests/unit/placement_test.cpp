// SPDX-License-Identifier: Apache-2.0
// Where a node's traffic goes (core/engine/placement.h): the NIC nearest
// the fake GPU module's device on a machine's sysfs layout, the progress
// thread's CPUs, and what the user's settings override. And the CPU lists
// and the settings the core offers the modules.
#include <gtest/gtest.h>
#include <linux/mempolicy.h>

#include <cstdlib>

#include "config.h"
#include "engine/placement.h"
#include "env_block.h"
#include "module_loader.h"
#include "sysfs_machines.h"
#include "topology/cpu_list.h"
#include "topology/memory_node.h"

#ifndef AFMESH_TEST_MODULE_DIR
#error "the build must define AFMESH_TEST_MODULE_DIR (tests/modules output root)"
#endif

namespace afmesh {
namespace {

using test::EnvBlock;
using test::SysfsMachine;

std::vector<int> range(int first, int last) {
    std::vector<int> cpus;
    for (int cpu = first; cpu <= last; ++cpu) cpus.push_back(cpu);
    return cpus;
}

std::vector<int> socket_cpus(int numa) {
    std::vector<int> cpus = range(32 * numa, 32 * numa + 31), smt = range(64 + 32 * numa, 64 + 32 * numa + 31);
    cpus.insert(cpus.end(), smt.begin(), smt.end());
    return cpus;
}

TEST(cpu_list, ReadsSysfsAndTasksetLists) {
    EXPECT_EQ(topology::parse_cpu_list("0-3,8,6-7"), (std::vector<int>{0, 1, 2, 3, 6, 7, 8}));
    EXPECT_EQ(topology::parse_cpu_list("5"), (std::vector<int>{5}));
    EXPECT_EQ(topology::parse_cpu_list("2,2,1"), (std::vector<int>{1, 2}));
    EXPECT_EQ(topology::parse_cpu_list(""), std::vector<int>{});
    for (const char *bad : {"a", "1-", "-1", "3-1", "1,,2", "0-4000000", "1 2"})
        EXPECT_EQ(topology::parse_cpu_list(bad), std::nullopt) << bad;
}

TEST(offered_settings, TheFirstValueStaysForTheProcess) {
    EXPECT_TRUE(offer_module_setting("AFMESH_TEST_OFFERED", "a"));
    EXPECT_TRUE(offer_module_setting("AFMESH_TEST_OFFERED", "a"));
    EXPECT_FALSE(offer_module_setting("AFMESH_TEST_OFFERED", "b"));
}

// The fake GPU module (its devices are the machine's GPUs) and a configuration reading the machine's sysfs.
class Placement8x8 : public testing::Test {
protected:
    static void SetUpTestSuite() {
        machine_ = new SysfsMachine(SysfsMachine::eight_by_eight());
        std::string ids;
        for (const std::string &id : machine_->gpus()) ids += (ids.empty() ? "" : ",") + id;
        // The fake module's own knob, read once as it first initialises.
        setenv("FAKEGPU_BUS_IDS", ids.c_str(), 1);
        Config config = config_with({});
        ASSERT_TRUE(select_module(config, AFMESH_MODULE_DEVICE, &device_));
    }
    static void TearDownTestSuite() {
        device_.reset();
        delete machine_;
    }

    // `settings` first: of two entries with one name, the environment's first counts.
    static Config config_with(std::initializer_list<std::string> settings) {
        EnvBlock env(settings);
        env.add("AFMESH_MODULE_PATH=" + std::string(AFMESH_TEST_MODULE_DIR) + "/fakegpu")
            .add("AFMESH_DEVICE=fakegpu")
            .add("AFMESH_SYSFS_ROOT=" + machine_->root());
        return Config::from_env(env.envp());
    }

    static Placement place(int device_id, std::initializer_list<std::string> settings = {}) {
        Placement p;
        Status s = place_node(config_with(settings), *device_, device_id, &p);
        EXPECT_TRUE(s.is_ok()) << s.message();
        return p;
    }

    static SysfsMachine *machine_;
    static std::unique_ptr<Module> device_;
};

SysfsMachine *Placement8x8::machine_ = nullptr;
std::unique_ptr<Module> Placement8x8::device_;

TEST_F(Placement8x8, EachDeviceTakesItsSwitchsNicAndItsSocketsCpus) {
    for (int d = 0; d < 8; ++d) {
        const Placement p = place(d);
        EXPECT_EQ(p.nic, "mlx5_" + std::to_string(d));
        EXPECT_EQ(p.cpus, socket_cpus(d / 4)) << d;
        EXPECT_EQ(p.numa_node, d / 4) << "staging memory goes to the NIC's node";
        EXPECT_NE(p.reason.find("PIX (same PCIe switch)"), std::string::npos) << p.reason;
    }
}

TEST_F(Placement8x8, TheLaunchersLocalRankSharesOutTiedNics) {
    EXPECT_EQ(place(0, {"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1"}).nic, "mlx5_1");
}

TEST_F(Placement8x8, TheUsersSettingsWin) {
    const Placement cores = place(5, {"AFMESH_CPU_CORES=4,6-7"});
    EXPECT_EQ(cores.nic, "mlx5_5");
    EXPECT_EQ(cores.cpus, (std::vector<int>{4, 6, 7}));
    const Placement nic = place(5, {"AFMESH_NET_DEVICES=mlx5_0:1"});
    EXPECT_EQ(nic.nic, "");
    EXPECT_TRUE(nic.cpus.empty());
    EXPECT_EQ(nic.numa_node, 0) << "the user's NIC's node, for staging memory";
    EXPECT_EQ(place(0, {"AFMESH_NET_DEVICES=mlx5_6,mlx5_7"}).numa_node, 1);
    EXPECT_EQ(place(0, {"AFMESH_NET_DEVICES=nic_nobody_has"}).numa_node, -1);
    Placement bad;
    EXPECT_EQ(place_node(config_with({"AFMESH_CPU_CORES=four"}), *device_, 0, &bad).code(), Code::kInvalidArgument);
}

TEST_F(Placement8x8, AHostWithoutRdmaNicsPlacesNothing) {
    const Placement p = place(0, {"AFMESH_SYSFS_ROOT=" + machine_->root() + "/nowhere"});
    EXPECT_EQ(p.nic, "");
    EXPECT_TRUE(p.cpus.empty());
    EXPECT_EQ(p.numa_node, -1);
}

// The policy staging allocates under: the NIC's node preferred, then the
// thread's own policy back; a node the kernel refuses changes nothing.
TEST(MemoryNodeScope, PrefersTheNodeWhileItLivesAndRestoresThePolicy) {
    int mode = -1, node = -1;
    topology::thread_memory_policy(&mode, &node);
    if (mode < 0) GTEST_SKIP() << "this kernel has no NUMA memory policies (get_mempolicy failed)";
    const int before = mode;
    {
        const topology::MemoryNodeScope scope(0);
        ASSERT_TRUE(scope.ok()) << scope.error();
        topology::thread_memory_policy(&mode, &node);
        EXPECT_EQ(mode, MPOL_PREFERRED);
        EXPECT_EQ(node, 0);
    }
    topology::thread_memory_policy(&mode, &node);
    EXPECT_EQ(mode, before);
    {
        const topology::MemoryNodeScope none(-1);
        EXPECT_TRUE(none.ok());
        topology::thread_memory_policy(&mode, &node);
        EXPECT_EQ(mode, before);
    }
    {
        const topology::MemoryNodeScope refused(1000);  // no host of this kind has node 1000 online
        EXPECT_FALSE(refused.ok());
        EXPECT_NE(refused.error().find("set_mempolicy(MPOL_PREFERRED, node 1000)"), std::string::npos) << refused.error();
        topology::thread_memory_policy(&mode, &node);
        EXPECT_EQ(mode, before);
    }
}

}  // namespace
}  // namespace afmesh
