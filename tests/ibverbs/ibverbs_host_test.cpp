// SPDX-License-Identifier: Apache-2.0
// On this real host, with the real libibverbs (no emulation): `afmesh info
// --json` must list the ibverbs module as "not present" with the kernel's
// reason, not as a failed load or an error.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

std::string run(const std::string &command) {
    std::string out;
    FILE *pipe = popen(command.c_str(), "r");
    if (!pipe) return out;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
    pclose(pipe);
    return out;
}

TEST(IbverbsOnThisHost, InfoReportsNotPresentWithTheKernelsReason) {
    if (access("/dev/infiniband", F_OK) == 0) GTEST_SKIP() << "this host has RDMA devices: run ci/ibverbs-hw-check.sh";
    const char *bin = getenv("AFMESH_BIN");
    ASSERT_NE(bin, nullptr) << "ctest sets AFMESH_BIN";
    const std::string json = run(std::string("env -u AFMESH_IBVERBS_LIBRARY ") + bin + " info --json");
    const size_t name = json.find("\"name\": \"ibverbs\"");
    ASSERT_NE(name, std::string::npos) << json;
    const size_t start = json.rfind('{', name), end = json.find('}', name);
    const std::string entry = json.substr(start, end - start);
    EXPECT_NE(entry.find("\"status\": \"not present\""), std::string::npos) << entry;
    // No libibverbs at all, or a kernel without RDMA: both are "not present", each with its reason.
    const bool no_library = entry.find("cannot be loaded (is rdma-core installed?)") != std::string::npos;
    const bool no_kernel = entry.find("ibv_get_device_list: ") != std::string::npos;
    EXPECT_TRUE(no_library || no_kernel) << entry;
}

}  // namespace
