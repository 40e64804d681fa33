// Multi-process clusters on loopback: a scheduler, servers and workers as
// real processes (af_test_node), over the default transport. Every process
// is started, waited for with a deadline, and killed by pid if it overstays.
#include <gtest/gtest.h>


#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "free_port.h"
#include "process_group.h"

extern char **environ;

namespace afmesh {
namespace {

using Clock = std::chrono::steady_clock;

struct NodeSpec {
    std::string role;
    int rank;
    std::vector<std::string> args;
    std::vector<std::string> env;  // extra "NAME=value"
    int expect_signal = 0;         // e.g. SIGKILL for a node that kills itself
    std::string netns{};           // run inside this network namespace ("" = here)
};

class Cluster {
public:
    /** `scheduler`: where the scheduler listens (default: a free loopback port). */
    Cluster(int workers, int servers, std::string scheduler = with_free_port("127.0.0.1:0"))
        : workers_(workers), servers_(servers), scheduler_(std::move(scheduler)) {
        // The nodes see none of this process's AFMESH_* settings except the
        // transport choice, so ctest can run the same clusters over each transport.
        for (char **e = environ; *e; ++e) {
            const std::string setting = *e;
            if (setting.rfind("AFMESH_", 0) != 0 || setting.rfind("AFMESH_TRANSPORT=", 0) == 0 ||
                setting.rfind("AFMESH_FABRIC_PROVIDER=", 0) == 0)
                base_env_.push_back(setting);
        }
        // Fast failure detection so the fault tests end quickly.
        for (const char *setting : {"AFMESH_HEARTBEAT_MS=100", "AFMESH_PEER_TIMEOUT_MS=1500",
                                    "AFMESH_CONNECT_TIMEOUT_MS=30000"})
            base_env_.push_back(setting);
    }

    void add(const NodeSpec &spec) {
        std::vector<std::string> env = base_env_;
        env.push_back("AFMESH_ROLE=" + spec.role);
        env.push_back("AFMESH_SCHEDULER=" + scheduler_);
        env.push_back("AFMESH_NUM_WORKERS=" + std::to_string(workers_));
        env.push_back("AFMESH_NUM_SERVERS=" + std::to_string(servers_));
        if (spec.rank >= 0) env.push_back("AFMESH_RANK=" + std::to_string(spec.rank));
        // Later entries override earlier ones for getenv: put the spec's last by replacing.
        for (const std::string &e : spec.env) {
            std::string name = e.substr(0, e.find('='));
            std::erase_if(env, [&](const std::string &x) { return x.rfind(name + "=", 0) == 0; });
            env.push_back(e);
        }
        // `ip netns exec` execs the node in place: its pid is the node's, so the
        // group still waits for and kills the node itself.
        std::vector<std::string> argv;
        if (!spec.netns.empty()) argv = {kIp, "netns", "exec", spec.netns, AF_TEST_NODE};
        else argv = {"af_test_node"};
        argv.insert(argv.end(), spec.args.begin(), spec.args.end());
        std::string name = spec.role + (spec.rank >= 0 ? " " + std::to_string(spec.rank) : "");
        ASSERT_TRUE(group_.spawn({name, spec.netns.empty() ? AF_TEST_NODE : kIp, argv, env})) << "spawn " << name;
        expected_signal_.push_back(spec.expect_signal);
    }

    /** Starts scheduler + all servers + all workers with the same arguments. */
    void add_all(const std::vector<std::string> &server_args, const std::vector<std::string> &worker_args) {
        add({"scheduler", -1, {"echo"}, {}});
        for (int s = 0; s < servers_; ++s) add({"server", s, server_args, {}});
        for (int w = 0; w < workers_; ++w) add({"worker", w, worker_args, {}});
    }

    /** Waits for every process; each must end as expected (exit 0, or its expected signal). */
    void expect_all_succeed(std::chrono::seconds limit = std::chrono::seconds(120)) {
        Status waited = group_.wait_all(Clock::now() + limit, false);
        std::string log;
        auto children = group_.children();
        for (const ChildExit &c : children) log += "---- " + c.name + "\n" + c.output;
        ASSERT_NE(waited.code(), Code::kTimeout) << "cluster did not finish in time\n" << log;
        for (size_t i = 0; i < children.size(); ++i) {
            if (expected_signal_[i]) {
                EXPECT_EQ(children[i].signal, expected_signal_[i]) << children[i].name << "\n" << log;
            } else {
                EXPECT_EQ(children[i].signal, 0) << children[i].name << " was killed\n" << log;
                EXPECT_EQ(children[i].code, 0) << children[i].name << " failed\n" << log;
            }
        }
    }

    std::string output_of(const std::string &name) {
        for (const ChildExit &c : group_.children())
            if (c.name == name) return c.output;
        return {};
    }

    static constexpr const char *kIp = "/usr/sbin/ip";

private:
    int workers_, servers_;
    std::string scheduler_;
    std::vector<std::string> base_env_;
    ProcessGroup group_{false};
    std::vector<int> expected_signal_;
};

std::vector<std::string> echo(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"echo", "--iters", "12"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
}

TEST(Cluster, OneWorkerOneServer) {
    Cluster c(1, 1);
    c.add_all(echo(), echo());
    c.expect_all_succeed();
    EXPECT_NE(c.output_of("worker 0").find("verified"), std::string::npos);
}

TEST(Cluster, TwoByTwoWithThreeMicroBatchesInFlight) {
    Cluster c(2, 2);
    c.add_all(echo({"--microbatches", "3"}), echo({"--microbatches", "3"}));
    c.expect_all_succeed();
}

TEST(Cluster, FourByTwo) {
    Cluster c(4, 2);
    c.add_all(echo(), echo());
    c.expect_all_succeed();
}

TEST(Cluster, SubsetPushesReachOnlyTheirServer) {
    Cluster c(2, 2);
    c.add_all(echo({"--subset"}), echo({"--subset"}));
    c.expect_all_succeed();
}

TEST(Cluster, ResponsesShorterThanThePullBuffer) {
    Cluster c(2, 2);
    c.add_all(echo({"--dynamic"}), echo({"--dynamic"}));
    c.expect_all_succeed();
}

TEST(Cluster, RespondVecSlicesOneBufferPerWorker) {
    Cluster c(3, 1);
    c.add_all(echo({"--dynamic", "--respond-vec"}), echo({"--dynamic", "--respond-vec"}));
    c.expect_all_succeed();
}

TEST(Cluster, UnregisteredKeysGoThroughRendezvous) {
    Cluster c(2, 2);
    c.add_all(echo({"--unregistered"}), echo({"--unregistered"}));
    c.expect_all_succeed();
}

TEST(Cluster, KilledServerFailsWorkersPendingOperations) {
    Cluster c(2, 2);
    c.add({"scheduler", -1, {"echo"}, {}});
    c.add({"server", 0, echo({"--iters", "1000", "--expect-peer-failure"}), {}});
    c.add({"server", 1, echo({"--iters", "1000", "--die-after", "3"}), {}, SIGKILL});
    for (int w = 0; w < 2; ++w) c.add({"worker", w, echo({"--iters", "1000", "--expect-peer-failure"}), {}});
    c.expect_all_succeed();
    EXPECT_NE(c.output_of("worker 0").find("server 1"), std::string::npos) << "the error names the dead server";
}

TEST(Cluster, KilledWorkerIsReportedByGetBatch) {
    Cluster c(2, 1);
    c.add({"scheduler", -1, {"echo"}, {}});
    c.add({"server", 0, echo({"--iters", "1000", "--expect-peer-failure"}), {}});
    c.add({"worker", 0, echo({"--iters", "1000", "--die-after", "3"}), {}, SIGKILL});
    c.add({"worker", 1, echo({"--iters", "1000", "--expect-peer-failure"}), {}});
    c.expect_all_succeed();
    EXPECT_NE(c.output_of("server 0").find("worker 0"), std::string::npos) << "the error names the dead worker";
}

TEST(Cluster, MissingNodeTimesEveryoneOut) {
    Cluster c(2, 1);  // two workers expected, one comes
    const std::vector<std::string> fast = {"AFMESH_CONNECT_TIMEOUT_MS=1500"};
    c.add({"scheduler", -1, {"echo"}, fast});
    c.add({"server", 0, {"join", "--expect", "AFMESH_ERR_TIMEOUT"}, fast});
    c.add({"worker", 0, {"join", "--expect", "AFMESH_ERR_TIMEOUT"}, fast});
    c.expect_all_succeed();
    EXPECT_NE(c.output_of("worker 0").find("1 of 2 worker"), std::string::npos) << "the message says who is missing";
}

TEST(Cluster, WrongAuthTokenIsRefused) {
    Cluster c(1, 1);
    const std::string right = "AFMESH_AUTH_TOKEN=right-secret";
    c.add({"scheduler", -1, {"echo"}, {right, "AFMESH_CONNECT_TIMEOUT_MS=1500"}});
    c.add({"server", 0, {"join", "--expect", "AFMESH_ERR_TIMEOUT"}, {right, "AFMESH_CONNECT_TIMEOUT_MS=1500"}});
    c.add({"worker", 0, {"join", "--expect", "AFMESH_ERR_ACCESS"}, {"AFMESH_AUTH_TOKEN=wrong"}});
    c.expect_all_succeed();
}

// Two network namespaces joined by a veth pair stand in for two hosts:
// host A runs the scheduler and the servers, host B the workers, so every
// byte really crosses from one network stack to another.
class TwoHosts {
public:
    TwoHosts() {
        const std::string id = std::to_string(getpid() % 100000);
        a_ = "afm_a_" + id;
        b_ = "afm_b_" + id;
        const int subnet = getpid() % 250;
        address_a_ = "10.77." + std::to_string(subnet) + ".1";
        address_b_ = "10.77." + std::to_string(subnet) + ".2";
        const std::string veth_a = "afva" + id, veth_b = "afvb" + id;
        ok_ = run("ip netns add " + a_) && run("ip netns add " + b_) &&
              run("ip link add " + veth_a + " type veth peer name " + veth_b) &&
              run("ip link set " + veth_a + " netns " + a_) && run("ip link set " + veth_b + " netns " + b_) &&
              run("ip -n " + a_ + " addr add " + address_a_ + "/24 dev " + veth_a) &&
              run("ip -n " + b_ + " addr add " + address_b_ + "/24 dev " + veth_b) &&
              run("ip -n " + a_ + " link set " + veth_a + " up") && run("ip -n " + b_ + " link set " + veth_b + " up") &&
              run("ip -n " + a_ + " link set lo up") && run("ip -n " + b_ + " link set lo up");
    }
    ~TwoHosts() {
        // Deleting a namespace deletes the veth end inside it, and so the pair.
        run("ip netns del " + a_);
        run("ip netns del " + b_);
    }
    bool ok() const { return ok_; }
    const std::string &a() const { return a_; }
    const std::string &b() const { return b_; }
    const std::string &address_a() const { return address_a_; }

private:
    static bool run(const std::string &command) { return system((command + " 2>/dev/null").c_str()) == 0; }
    std::string a_, b_, address_a_, address_b_;
    bool ok_ = false;
};

TEST(Cluster, TwoByTwoAcrossTwoNetworkNamespaces) {
    if (access(Cluster::kIp, X_OK) != 0) GTEST_SKIP() << Cluster::kIp << " is not installed (iproute2)";
    TwoHosts hosts;
    if (!hosts.ok()) GTEST_SKIP() << "cannot create network namespaces here (needs root / CAP_SYS_ADMIN)";
    // A fresh namespace has every port free: any fixed one will do.
    Cluster c(2, 2, hosts.address_a() + ":29500");
    const std::vector<std::string> on_a = {"AFMESH_TCP_BIND=" + hosts.address_a()};
    c.add({"scheduler", -1, {"echo"}, on_a, 0, hosts.a()});
    for (int s = 0; s < 2; ++s) c.add({"server", s, echo({"--microbatches", "3"}), on_a, 0, hosts.a()});
    for (int w = 0; w < 2; ++w) c.add({"worker", w, echo({"--microbatches", "3"}), {}, 0, hosts.b()});
    c.expect_all_succeed();
}

}  // namespace
}  // namespace afmesh
