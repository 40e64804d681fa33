// SPDX-License-Identifier: Apache-2.0
// A node killed by a signal could not close its libfabric shm endpoints:
// their regions ("afmesh-<pid>-..." in /dev/shm) outlive it. Tests that kill
// nodes remove them once done with them.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace afmesh {

inline void remove_shm_regions_of(pid_t pid) {
    const std::string prefix = "afmesh-" + std::to_string(pid) + "-";
    std::error_code ec;
    for (const auto &entry : std::filesystem::directory_iterator("/dev/shm", ec))
        if (entry.path().filename().string().rfind(prefix, 0) == 0) std::filesystem::remove(entry.path(), ec);
}

}  // namespace afmesh
