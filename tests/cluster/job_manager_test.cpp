// SPDX-License-Identifier: Apache-2.0
// Clusters started the way a job manager starts them: every process runs the
// same program (examples/c/af_echo.c) with only the launcher's variables and
// AFMESH_LAYOUT, no AFMESH_ROLE, AFMESH_RANK or counts; global rank 0 runs the
// scheduler too. Each process must take the role and rank a person reading
// the layout would give it, and the echo pipeline must check out.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "free_port.h"
#include "process_group.h"

#ifndef AF_ECHO
#error "the build must define AF_ECHO (examples/c/af_echo.c built)"
#endif

extern char **environ;

namespace afmesh {
namespace {

// What one launcher sets for global rank `rank` of `size`, `per_host` to a host,
// with the scheduler's port `port` where the launcher's variables can say it.
using LauncherEnv = std::function<std::vector<std::string>(int rank, int size, int per_host, int port)>;

struct JobCase {
    const char *name;
    LauncherEnv env;
    int size, per_host;
    const char *layout;
    std::vector<std::string> roles;  // what each global rank must print first: "worker 0", "server 1", ...
};

std::string n(int value) { return std::to_string(value); }

// This environment without afmesh's, StepMesh's or any launcher's variables, so
// only what a case sets decides.
std::vector<std::string> clean_environment() {
    std::vector<std::string> env;
    for (char **e = environ; *e; ++e) {
        const std::string entry = *e;
        const std::string name = entry.substr(0, entry.find('='));
        bool launcher = false;
        for (const char *prefix : {"AFMESH_", "DMLC_", "STEPMESH_", "OMPI_", "PMI_", "MPI_LOCAL", "SLURM_", "LWS_"})
            launcher |= name.rfind(prefix, 0) == 0;
        for (const char *exact : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"})
            launcher |= name == exact;
        if (!launcher || name == "AFMESH_TRANSPORT" || name.rfind("AFMESH_FABRIC_", 0) == 0) env.push_back(entry);
    }
    return env;
}

const JobCase kCases[] = {
    {"torchrun",
     [](int rank, int size, int per_host, int port) {
         return std::vector<std::string>{"RANK=" + n(rank), "WORLD_SIZE=" + n(size), "LOCAL_RANK=" + n(rank % per_host),
                                         "LOCAL_WORLD_SIZE=" + n(per_host), "MASTER_ADDR=127.0.0.1",
                                         "MASTER_PORT=" + n(port - 1)};  // the scheduler takes the next port
     },
     4, 4, "servers:2", {"server 0", "server 1", "worker 0", "worker 1"}},
    {"Open MPI",
     [](int rank, int size, int per_host, int port) {
         return std::vector<std::string>{"OMPI_COMM_WORLD_RANK=" + n(rank), "OMPI_COMM_WORLD_SIZE=" + n(size),
                                         "OMPI_COMM_WORLD_LOCAL_RANK=" + n(rank % per_host),
                                         "OMPI_COMM_WORLD_LOCAL_SIZE=" + n(per_host),
                                         "AFMESH_SCHEDULER=127.0.0.1:" + n(port)};
     },
     3, 3, "workers:1", {"worker 0", "server 0", "server 1"}},
    {"PMI",
     [](int rank, int size, int, int port) {
         return std::vector<std::string>{"PMI_RANK=" + n(rank), "PMI_SIZE=" + n(size),
                                         "AFMESH_SCHEDULER=127.0.0.1:" + n(port)};
     },
     2, 2, "servers:1", {"server 0", "worker 0"}},
    // Two "hosts" of two on this one: each host's first process is a worker.
    {"Slurm",
     [](int rank, int size, int per_host, int port) {
         return std::vector<std::string>{"SLURM_PROCID=" + n(rank), "SLURM_NTASKS=" + n(size),
                                         "SLURM_LOCALID=" + n(rank % per_host), "SLURM_NTASKS_PER_NODE=" + n(per_host),
                                         "SLURM_STEP_NODELIST=localhost", "AFMESH_SCHEDULER=127.0.0.1:" + n(port)};
     },
     4, 2, "workers-per-host:1", {"worker 0", "server 0", "worker 1", "server 1"}},
    {"LeaderWorkerSet",
     [](int rank, int size, int, int port) {
         return std::vector<std::string>{"LWS_WORKER_INDEX=" + n(rank), "LWS_GROUP_SIZE=" + n(size),
                                         "LWS_LEADER_ADDRESS=127.0.0.1", "AFMESH_SCHEDULER=127.0.0.1:" + n(port)};
     },
     2, 1, "servers:1", {"server 0", "worker 0"}},
};

class JobManager : public testing::TestWithParam<JobCase> {};

TEST_P(JobManager, EveryProcessTakesItsPlaceFromTheLauncher) {
    const JobCase &job = GetParam();
    const std::string address = with_free_port("127.0.0.1:0");
    const int port = std::stoi(address.substr(address.rfind(':') + 1));
    ProcessGroup group(false);
    for (int rank = 0; rank < job.size; ++rank) {
        std::vector<std::string> env = clean_environment();
        for (std::string &setting : job.env(rank, job.size, job.per_host, port)) env.push_back(std::move(setting));
        env.push_back(std::string("AFMESH_LAYOUT=") + job.layout);
        ASSERT_TRUE(group.spawn({"rank " + n(rank), AF_ECHO, {"af_echo"}, env}).is_ok());
    }
    const Status waited = group.wait_all(std::chrono::steady_clock::now() + std::chrono::seconds(120), true);
    std::string log;
    for (const ChildExit &c : group.children()) log += "---- " + c.name + "\n" + c.output;
    ASSERT_TRUE(waited.is_ok()) << waited.message() << "\n" << log;
    const std::vector<ChildExit> children = group.children();
    for (int rank = 0; rank < job.size; ++rank) {
        const ChildExit &c = children[static_cast<size_t>(rank)];
        const std::string &role = job.roles[static_cast<size_t>(rank)];
        EXPECT_EQ(c.code, 0) << c.name << "\n" << log;
        EXPECT_EQ(c.output.rfind(role + ": ", 0), 0u) << c.name << " should be " << role << "\n" << log;
        if (role.rfind("worker", 0) == 0) {
            EXPECT_NE(c.output.find("verified"), std::string::npos) << c.name << "\n" << log;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Launchers, JobManager, testing::ValuesIn(kCases),
                         [](const testing::TestParamInfo<JobCase> &info) {
                             std::string name = info.param.name;
                             std::erase(name, ' ');
                             return name;
                         });

}  // namespace
}  // namespace afmesh
