// SPDX-License-Identifier: Apache-2.0
#include "pci_place.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace afmesh::topology {
namespace {

namespace fs = std::filesystem;

std::string first_line(const fs::path &file) {
    std::ifstream in(file);
    std::string line;
    std::getline(in, line);
    return line;
}

std::string lower(std::string text) {
    std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
    return text;
}

// "0000:18:00.0": a PCI address as sysfs names device directories.
bool is_bus_id(const std::string &name) {
    return name.size() == 12 && name[4] == ':' && name[7] == ':' && name[10] == '.';
}

}  // namespace

Status Sysfs::place_of_device_dir(const std::string &dir, PciPlace *out) const {
    std::error_code ec;
    const fs::path real = fs::canonical(dir, ec);
    if (ec) return {Code::kNotFound, dir + ": " + ec.message()};
    // .../sys/devices/pci0000:15/0000:15:01.0/.../0000:18:00.0: the chain starts at the root complex.
    PciPlace place;
    for (const fs::path &part : real) {
        const std::string name = part.string();
        if (name.rfind("pci", 0) == 0 && name.find(':') != std::string::npos) place.path = {name};
        else if (!place.path.empty() && is_bus_id(name)) place.path.push_back(name);
        else if (!place.path.empty()) break;  // past the PCI device (e.g. a USB or net child)
    }
    if (place.path.size() < 2) return {Code::kNotFound, real.string() + " is not a PCI device"};
    place.bus_id = place.path.back();
    const std::string numa = first_line(real / "numa_node");
    place.numa_node = numa.empty() ? -1 : std::atoi(numa.c_str());
    place.local_cpus = first_line(real / "local_cpulist");
    *out = std::move(place);
    return Status::ok();
}

Status Sysfs::pci_place(const std::string &bus_id, PciPlace *out) const {
    const std::string dir = root_ + "/sys/bus/pci/devices/" + lower(bus_id);
    if (!fs::exists(dir)) return {Code::kNotFound, "no PCI device " + bus_id + " under " + root_ + "/sys/bus/pci"};
    return place_of_device_dir(dir, out);
}

std::vector<Nic> Sysfs::rdma_nics() const {
    std::vector<Nic> nics;
    std::error_code ec;
    for (const fs::directory_entry &entry : fs::directory_iterator(root_ + "/sys/class/infiniband", ec)) {
        Nic nic{entry.path().filename().string(), {}};
        if (place_of_device_dir((entry.path() / "device").string(), &nic.place)) nics.push_back(std::move(nic));
    }
    std::sort(nics.begin(), nics.end(), [](const Nic &a, const Nic &b) { return a.name < b.name; });
    return nics;
}

}  // namespace afmesh::topology
