// SPDX-License-Identifier: Apache-2.0
#include "sysfs_machines.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace afmesh::test {
namespace {

namespace fs = std::filesystem;

std::string bdf(int bus, int device, int function = 0) {
    char text[16];
    snprintf(text, sizeof text, "0000:%02x:%02x.%x", bus, device, function);
    return text;
}

// The CPUs of socket `numa` on a 2 x 32-core host with SMT: "0-31,64-95" and "32-63,96-127".
std::string socket_cpus(int numa) {
    return std::to_string(32 * numa) + "-" + std::to_string(32 * numa + 31) + "," + std::to_string(64 + 32 * numa) +
           "-" + std::to_string(64 + 32 * numa + 31);
}

void write(const fs::path &file, const std::string &text) {
    std::ofstream out(file);
    out << text << "\n";
}

}  // namespace

SysfsMachine::SysfsMachine() {
    std::string pattern = (fs::temp_directory_path() / "afmesh-sysfs-XXXXXX").string();
    if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    root_ = pattern;
    fs::create_directories(fs::path(root_) / "sys/bus/pci/devices");
    fs::create_directories(fs::path(root_) / "sys/class/infiniband");
}

SysfsMachine::~SysfsMachine() {
    std::error_code ec;
    if (!root_.empty()) fs::remove_all(root_, ec);
}

SysfsMachine::SysfsMachine(SysfsMachine &&other) noexcept
    : root_(std::move(other.root_)), gpus_(std::move(other.gpus_)), next_bus_(other.next_bus_) {
    other.root_.clear();
}

std::string SysfsMachine::add_device(const std::vector<std::string> &path, int numa) {
    fs::path relative = "devices";
    for (const std::string &part : path) relative /= part;
    const fs::path dir = fs::path(root_) / "sys" / relative;
    fs::create_directories(dir);
    write(dir / "numa_node", std::to_string(numa));
    write(dir / "local_cpulist", socket_cpus(numa));
    fs::create_directory_symlink(fs::path("../../..") / relative, fs::path(root_) / "sys/bus/pci/devices" / path.back());
    return path.back();
}

// Root complex, root port, the switch's upstream port, one downstream port
// per device, and the device on a bus of its own.
void SysfsMachine::add_switch(int numa, int gpus, const std::vector<std::string> &nics) {
    const int root_bus = next_bus_, upstream_bus = next_bus_ + 1, downstream_bus = next_bus_ + 2;
    const std::vector<std::string> to_switch = {"pci0000:" + bdf(root_bus, 0).substr(5, 2), bdf(root_bus, 1, 1),
                                                bdf(upstream_bus, 0)};
    int port = 0;
    auto device_path = [&]() {
        std::vector<std::string> path = to_switch;
        path.push_back(bdf(downstream_bus, port));
        path.push_back(bdf(downstream_bus + 1 + port, 0));
        ++port;
        return path;
    };
    for (int g = 0; g < gpus; ++g) gpus_.push_back(add_device(device_path(), numa));
    for (const std::string &name : nics) {
        const fs::path nic_dir = fs::path(root_) / "sys/class/infiniband" / name;
        fs::create_directories(nic_dir);
        const std::string id = add_device(device_path(), numa);
        fs::create_directory_symlink(fs::path("../../../bus/pci/devices") / id, nic_dir / "device");
    }
    next_bus_ += 0x10;
}

SysfsMachine SysfsMachine::eight_by_eight() {
    SysfsMachine m;
    for (int s = 0; s < 4; ++s) m.add_switch(s / 2, 2, {"mlx5_" + std::to_string(2 * s), "mlx5_" + std::to_string(2 * s + 1)});
    return m;
}

SysfsMachine SysfsMachine::eight_by_two() {
    SysfsMachine m;
    for (int s = 0; s < 4; ++s) {
        std::vector<std::string> nics;
        if (s % 2 == 0) nics.push_back("mlx5_" + std::to_string(s / 2));
        m.add_switch(s / 2, 2, nics);
    }
    return m;
}

}  // namespace afmesh::test
