// SPDX-License-Identifier: Apache-2.0
// The job managers themselves, not their variables: Debian's Open MPI
// (mpirun), PyTorch's torchrun and a one-host Slurm (munged, slurmctld and
// slurmd started and stopped by the test, srun) start the C example
// (examples/c/af_echo.c) with nothing but AFMESH_LAYOUT (and, for Open MPI,
// which does not say where rank 0 runs, AFMESH_SCHEDULER). Every process
// must find its place, global rank 0 must run the scheduler, and every
// worker must verify every answer. A launcher that is not installed skips
// its test, saying so.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "process_group.h"

#ifndef AF_ECHO
#error "the build must define AF_ECHO (examples/c/af_echo.c built)"
#endif
#ifndef AFMESH_BIN
#error "the build must define AFMESH_BIN (the afmesh executable)"
#endif

extern char **environ;

namespace afmesh {
namespace {

// This environment without afmesh's, StepMesh's or any launcher's
// variables, so only what the launcher sets (and the case's layout) decides.
std::vector<std::string> launcher_environment(std::vector<std::string> add) {
    std::vector<std::string> env;
    for (char **e = environ; *e; ++e) {
        const std::string entry = *e;
        bool drop = false;
        for (const char *prefix : {"AFMESH_", "DMLC_", "STEPMESH_", "OMPI_", "PMI_", "SLURM_", "LWS_", "RANK=",
                                   "WORLD_SIZE=", "LOCAL_RANK=", "MASTER_ADDR=", "MASTER_PORT="})
            drop |= entry.rfind(prefix, 0) == 0;
        if (!drop) env.push_back(entry);
    }
    env.insert(env.end(), add.begin(), add.end());
    return env;
}

// A TCP socket bound to 127.0.0.1:*port (0: a port the kernel picks, put
// into *port), or -1 when the port is taken.
int bind_loopback(int *port) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(*port));
    socklen_t len = sizeof addr;
    if (fd < 0 || bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len) != 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    *port = ntohs(addr.sin_port);
    return fd;
}

bool port_is_free(int port) {
    const int fd = bind_loopback(&port);
    if (fd >= 0) close(fd);
    return fd >= 0;
}

// The first port the kernel hands out by itself (a bind to port 0, the
// local end of any connect). A port it can hand out may be taken by another
// test's connection between our check and the launcher's bind (it happened
// to the scheduler's port once), so the ports below are all under it.
int first_ephemeral_port() {
    std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
    int low = 0;
    return range >> low && low > 2048 ? low : 32768;
}

// A port drawn from [lowest, end) that `usable` accepts (it binds it to
// check), or -1 after 200 draws.
template <class Usable>
int draw_port(int lowest, int end, Usable usable) {
    static std::mt19937 pick(static_cast<unsigned>(getpid()));
    for (int attempt = 0; end > lowest && attempt < 200; ++attempt) {
        const int port = lowest + static_cast<int>(pick() % static_cast<unsigned>(end - lowest));
        if (usable(port)) return port;
    }
    return -1;
}

// A port P on 127.0.0.1 with P + 1 free as well (torchrun takes P, the
// scheduler P + 1): P stays bound while P + 1 is tried, so neither is the other.
int free_port_pair() {
    return draw_port(1025, first_ephemeral_port() - 1, [](int port) {
        const int held = bind_loopback(&port);
        if (held < 0) return false;
        const bool pair = port_is_free(port + 1);
        close(held);
        return pair;
    });
}

// Runs `argv` (a launcher) to the end; its whole output, or the test fails.
std::string run_launcher(const std::string &path, std::vector<std::string> argv, std::vector<std::string> env) {
    ProcessGroup group(false);
    const Status spawned = group.spawn({argv[0], path, std::move(argv), std::move(env)});
    EXPECT_TRUE(spawned.is_ok()) << spawned.message();
    // Bounds a run that hangs; a passing one takes seconds.
    const Status waited = group.wait_all(std::chrono::steady_clock::now() + std::chrono::minutes(3), true);
    const std::string output = group.children()[0].output;
    EXPECT_TRUE(waited.is_ok()) << waited.message() << "\n" << output;
    return output;
}

size_t count(const std::string &text, const std::string &pattern) {
    const std::regex re(pattern);
    return static_cast<size_t>(std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator()));
}

// Two servers and `workers` workers, each worker having verified both servers' answers.
void expect_echo_checked_out(const std::string &output, int workers) {
    EXPECT_EQ(count(output, R"(server [01]: answered \d+ rounds)"), 2u) << output;
    EXPECT_EQ(count(output, R"(worker \d+: 8 layers x 3 micro-batches verified from 2 servers)"), size_t(workers))
        << output;
}

TEST(RealLaunchers, OpenMpiStartsTheEchoPipeline) {
#ifndef MPIRUN
    GTEST_SKIP() << "mpirun was not found when the build was configured (Debian: openmpi-bin)";
#else
    const std::string scheduler = "AFMESH_SCHEDULER=127.0.0.1:" + std::to_string(free_port_pair());
    // Open MPI refuses to run as root unless told twice (CI runs as root).
    const std::string output =
        run_launcher(MPIRUN, {"mpirun", "--oversubscribe", "-np", "4", "-x", "AFMESH_LAYOUT", "-x", "AFMESH_SCHEDULER", AF_ECHO},
                     launcher_environment({"AFMESH_LAYOUT=servers:2", scheduler, "OMPI_ALLOW_RUN_AS_ROOT=1",
                                           "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"}));
    expect_echo_checked_out(output, 2);
#endif
}

TEST(RealLaunchers, OpenMpiRunsTheBenchmark) {
#ifndef MPIRUN
    GTEST_SKIP() << "mpirun was not found when the build was configured (Debian: openmpi-bin)";
#else
    const std::string scheduler = "AFMESH_SCHEDULER=127.0.0.1:" + std::to_string(free_port_pair());
    const std::string output = run_launcher(
        MPIRUN,
        {"mpirun", "--oversubscribe", "-np", "4", "-x", "AFMESH_LAYOUT", "-x", "AFMESH_SCHEDULER", AFMESH_BIN, "bench",
         "--iters", "20", "--warmup", "2", "--sizes", "8,64K"},
        launcher_environment(
            {"AFMESH_LAYOUT=servers:2", scheduler, "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"}));
    // The latency table, a row per size and poll mode, from the worker that reports.
    EXPECT_EQ(count(output, R"(\n8 B +busy +[0-9.]+)"), 1u) << output;
    EXPECT_EQ(count(output, R"(\n64 KiB +busy +[0-9.]+)"), 1u) << output;
#endif
}

TEST(RealLaunchers, TorchrunStartsTheEchoPipeline) {
#ifndef TORCHRUN
    GTEST_SKIP() << "torchrun was not found when the build was configured (Debian: python3-torch)";
#else
    const int port = free_port_pair();
    // -r 1 -t 1: Debian's torch 1.13 on Python 3.11 cannot parse its own
    // default "0" for these (an IntFlag's zero member is no longer
    // iterable), so output is redirected and teed explicitly.
    const std::string output = run_launcher(
        TORCHRUN,
        {"torchrun", "--no_python", "--nnodes", "1", "--nproc_per_node", "5", "--master_addr", "127.0.0.1",
         "--master_port", std::to_string(port), "-r", "1", "-t", "1", "--log_dir", testing::TempDir() + "torchrun-" +
         std::to_string(getpid()), AF_ECHO},
        launcher_environment({"AFMESH_LAYOUT=servers:2"}));
    expect_echo_checked_out(output, 3);
#endif
}

#if defined(SLURMCTLD) && defined(SLURMD) && defined(SRUN) && defined(MUNGED)
// Re-checks `condition` until it holds or `deadline` passes; the pause
// between checks only spares the CPU, nothing waits on its length.
template <class Condition>
bool eventually(Condition condition, std::chrono::steady_clock::time_point deadline) {
    for (;;) {
        if (condition()) return true;
        if (std::chrono::steady_clock::now() >= deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
}

// A port above 20000 nothing listens on: under Slurm the scheduler takes
// 20000 + the job id, so the test makes that the job's id.
int free_port_for_a_job() {
    return draw_port(20001, std::min(40000, first_ephemeral_port()), port_is_free);
}

// A one-host Slurm cluster in a temporary directory: munge's daemon, the
// controller and the node daemon, as children of the test, stopped by pid.
class OneHostSlurm {
public:
    OneHostSlurm() : dir_(testing::TempDir() + "slurm-" + std::to_string(getpid())) {
        namespace fs = std::filesystem;
        fs::remove_all(dir_);
        for (const char *sub : {"state", "spool"}) fs::create_directories(dir_ + "/" + sub);
        char host[256] = "";
        gethostname(host, sizeof host - 1);
        std::ofstream(dir_ + "/munge.key") << std::string(1024, 'k') + std::to_string(getpid());
        fs::permissions(dir_ + "/munge.key", fs::perms::owner_read);
        job_port_ = free_port_for_a_job();
        std::ofstream conf(dir_ + "/slurm.conf");
        conf << "ClusterName=afmesh\nSlurmctldHost=" << host << "(127.0.0.1)\n"
             << "SlurmctldPort=" << free_port_pair() << "\nSlurmdPort=" << free_port_pair() << "\n"
             << "SlurmUser=root\nSlurmdUser=root\nAuthType=auth/munge\nCredType=cred/munge\n"
             << "AuthInfo=socket=" << dir_ << "/munge.socket\n"
             << "StateSaveLocation=" << dir_ << "/state\nSlurmdSpoolDir=" << dir_ << "/spool\n"
             << "SlurmctldPidFile=" << dir_ << "/slurmctld.pid\nSlurmdPidFile=" << dir_ << "/slurmd.pid\n"
             // No cgroups: a container may not delegate them.
             << "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nJobAcctGatherType=jobacct_gather/none\n"
             << "MpiDefault=none\nReturnToService=2\nFirstJobId=" << job_port_ - 20000 << "\n"
             << "NodeName=" << host << " NodeAddr=127.0.0.1 CPUs=" << sysconf(_SC_NPROCESSORS_ONLN)
             << " State=UNKNOWN\nPartitionName=debug Nodes=" << host << " Default=YES MaxTime=INFINITE State=UP\n";
        conf.close();
        host_ = host;
        env_ = launcher_environment({"SLURM_CONF=" + dir_ + "/slurm.conf"});
        const std::string socket = dir_ + "/munge.socket";
        spawn(MUNGED, {"munged", "-F", "-f", "--socket=" + socket, "--key-file=" + dir_ + "/munge.key",
                       "--log-file=" + dir_ + "/munged.log", "--pid-file=" + dir_ + "/munged.pid",
                       "--seed-file=" + dir_ + "/munged.seed"});
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(1);
        if (!eventually([&] { return fs::exists(socket); }, deadline)) return;
        spawn(SLURMCTLD, {"slurmctld", "-D", "-i"});
        spawn(SLURMD, {"slurmd", "-D", "-N", host_});
        ready_ = eventually([&] { return node_state().rfind("idle", 0) == 0; }, deadline);
    }
    ~OneHostSlurm() {
        daemons_.stop(SIGTERM, std::chrono::seconds(5));
        std::filesystem::remove_all(dir_);
    }

    /** Whether the node came up idle; otherwise the daemons' output says why. */
    bool ready() const { return ready_; }
    std::string why_not() {
        std::string out;
        for (const ChildExit &c : daemons_.children()) out += "---- " + c.name + "\n" + c.output;
        return out;
    }
    int job_port() const { return job_port_; }
    const std::vector<std::string> &env() const { return env_; }

private:
    void spawn(const char *path, std::vector<std::string> argv) {
        const std::string name = argv[0];
        const Status s = daemons_.spawn({name, path, std::move(argv), env_});
        EXPECT_TRUE(s.is_ok()) << s.message();
    }
    // What sinfo says of the node ("idle", "down*"...), "" when it cannot say yet.
    std::string node_state() {
        ProcessGroup sinfo(false);
        if (!sinfo.spawn({"sinfo", SINFO, {"sinfo", "-h", "-N", "-o", "%T"}, env_}).is_ok()) return "";
        (void)sinfo.wait_all(std::chrono::steady_clock::now() + std::chrono::seconds(10), false);
        return sinfo.children()[0].output;
    }

    const std::string dir_;
    std::string host_;
    int job_port_ = -1;
    std::vector<std::string> env_;
    ProcessGroup daemons_{false};
    bool ready_ = false;
};
#endif

TEST(RealLaunchers, SlurmStartsTheEchoPipeline) {
#if !(defined(SLURMCTLD) && defined(SLURMD) && defined(SRUN) && defined(SINFO) && defined(MUNGED))
    GTEST_SKIP() << "slurmctld, slurmd, srun, sinfo or munged was not found when the build was configured "
                    "(Debian: slurm-wlm, munge)";
#else
    if (geteuid() != 0) GTEST_SKIP() << "a one-host Slurm runs its daemons as root, and this test is not root";
    OneHostSlurm slurm;
    ASSERT_TRUE(slurm.ready()) << "the one-host Slurm did not come up:\n" << slurm.why_not();
    std::vector<std::string> env = slurm.env();
    env.push_back("AFMESH_LAYOUT=servers:2");
    // -O: more tasks than the host has CPUs.
    const std::string output = run_launcher(SRUN, {"srun", "-n", "5", "-O", AF_ECHO}, env);
    expect_echo_checked_out(output, 3);
#endif
}

}  // namespace
}  // namespace afmesh
