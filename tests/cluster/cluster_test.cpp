// Multi-process clusters on loopback: a scheduler, servers and workers as
// real processes (af_test_node), over the default transport. Every process
// is started, waited for with a deadline, and killed by pid if it overstays.
#include <gtest/gtest.h>


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
};

class Cluster {
public:
    Cluster(int workers, int servers) : workers_(workers), servers_(servers) {
        scheduler_ = with_free_port("127.0.0.1:0");
        for (char **e = environ; *e; ++e)
            if (std::string(*e).rfind("AFMESH_", 0) != 0) base_env_.push_back(*e);
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
        std::vector<std::string> argv = {"af_test_node"};
        argv.insert(argv.end(), spec.args.begin(), spec.args.end());
        std::string name = spec.role + (spec.rank >= 0 ? " " + std::to_string(spec.rank) : "");
        ASSERT_TRUE(group_.spawn({name, AF_TEST_NODE, argv, env})) << "spawn " << name;
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

}  // namespace
}  // namespace afmesh
