// SPDX-License-Identifier: Apache-2.0
// The fault matrix: the faults a deployment meets, a few trials each, on
// real clusters of af_test_node processes (which check every byte they
// exchange). For each scenario the test asserts that nothing hangs (every
// process ends within the test's bound), that the survivors' errors name
// the peer at fault, that every process is gone at the end (the group reaps
// them; a stopped one is killed), and, where strangers were at a port, that
// the node's descriptors come back. It prints the matrix as a table: trials,
// hangs, the longest time from the fault to a survivor's error, whether the
// peer was named, and descriptors before and after. Times are measured, not
// asserted: they depend on the machine; the bound that fails a trial is the
// hang limit.
//
// Slow next to the other suites (a couple of minutes): CI runs it in one
// preset (AFMESH_FAULT_MATRIX, the full preset), not under the sanitizers.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cstring>
#include <cstdio>
#include <map>
#include <optional>
#include <random>

#include "cluster_harness.h"
#include "control/frame.h"
#include "control/messages.h"
#include "hold_point.h"
#include "stranger.h"
#include "two_hosts.h"

namespace afmesh {
namespace {

using namespace std::chrono_literals;

constexpr int kLots = 1000000;  // iterations no trial runs to the end: a fault ends it

// ---- the table ----

struct Row {
    int trials = 0, hangs = 0, named = 0;
    std::optional<double> worst_ms;  // fault to the last survivor's error
    std::string descriptors = "-";   // "before -> after" where strangers were at a port
};

std::map<std::string, Row> &table() {
    static std::map<std::string, Row> rows;
    return rows;
}

class PrintTable : public ::testing::Environment {
public:
    void TearDown() override {
        printf("\n| scenario | trials | hangs | max time to error | peer named (or passed) | descriptors |\n"
               "|---|---|---|---|---|---|\n");
        for (const auto &[name, row] : table()) {
            char worst[32] = "-";
            if (row.worst_ms) snprintf(worst, sizeof worst, "%.0f ms", *row.worst_ms);
            printf("| %s | %d | %d | %s | %d/%d | %s |\n", name.c_str(), row.trials, row.hangs, worst, row.named,
                   row.trials, row.descriptors.c_str());
        }
    }
};
const auto *const kTable = ::testing::AddGlobalTestEnvironment(new PrintTable);

long long now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

// "<marker> at <ns>" in a node's output (af_test_node stamps its reports with CLOCK_MONOTONIC).
std::optional<long long> stamped(const std::string &log, const std::string &marker) {
    const size_t at = log.find(marker + " at ");
    if (at == std::string::npos) return std::nullopt;
    return std::stoll(log.substr(at + marker.size() + 4));
}

/**
 * Records one trial: `survivors` must each have reported a failure naming
 * `culprit`; the time from `fault_ns` to the last report goes in the table.
 */
void record(const std::string &scenario, Cluster &c, const std::vector<std::string> &survivors,
            const std::string &culprit, std::optional<long long> fault_ns, const std::string &marker) {
    Row &row = table()[scenario];
    ++row.trials;
    row.hangs += c.hung();
    bool named = true;
    for (const std::string &node : survivors) {
        const std::string log = c.output_of(node);
        const std::optional<long long> reported = stamped(log, marker);
        EXPECT_TRUE(reported) << node << " reported no failure\n" << log;
        named &= log.find(culprit) != std::string::npos;
        EXPECT_NE(log.find(culprit), std::string::npos) << node << "'s error does not name " << culprit << "\n" << log;
        if (reported && fault_ns) {
            const double ms = static_cast<double>(*reported - *fault_ns) / 1e6;
            row.worst_ms = std::max(row.worst_ms.value_or(ms), ms);
        }
    }
    row.named += named;
}

// A trial of a scenario where no peer is at fault: it passes when it ran without a failure.
void count_trial(const std::string &scenario, const Cluster &c) {
    Row &row = table()[scenario];
    ++row.trials;
    row.hangs += c.hung();
    row.named += !::testing::Test::HasFailure();
}

std::vector<std::string> echo(std::vector<std::string> extra) {
    std::vector<std::string> args = {"echo"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
}

std::mt19937 &random_source() {
    static std::mt19937 random(std::random_device{}());
    return random;
}

int random_in(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(random_source()); }

// ---- processes killed ----

// `victim` SIGKILLs itself after a random round of a long run; the
// `survivors` must report it.
void killed_at_a_random_round(const std::string &scenario, int workers, int servers, const std::string &victim,
                              const std::vector<std::string> &survivors) {
    const int round = random_in(0, 6);
    SCOPED_TRACE(victim + " dies after round " + std::to_string(round));
    Cluster c(workers, servers);
    c.add({"scheduler", -1, {"echo"}, {}});
    for (const char *role : {"server", "worker"})
        for (int rank = 0; rank < (*role == 's' ? servers : workers); ++rank) {
            const std::string name = std::string(role) + " " + std::to_string(rank);
            const bool dies = name == victim;
            const std::vector<std::string> fate =
                dies ? std::vector<std::string>{"--die-after", std::to_string(round)}
                     : std::vector<std::string>{"--expect-peer-failure"};
            std::vector<std::string> args = echo({"--iters", "1000"});
            args.insert(args.end(), fate.begin(), fate.end());
            c.add({role, rank, args, {}, dies ? SIGKILL : 0});
        }
    c.expect_all_succeed();
    record(scenario, c, survivors, victim, stamped(c.output_of(victim), "dying on purpose"), "peer failure reported");
}

TEST(FaultMatrix, ServerKilledAtARandomRound) {
    for (int trial = 0; trial < 3; ++trial)
        killed_at_a_random_round("SIGKILL server (random round)", 2, 2, "server 1", {"worker 0", "worker 1"});
}

TEST(FaultMatrix, WorkerKilledAtARandomRound) {
    for (int trial = 0; trial < 3; ++trial)
        killed_at_a_random_round("SIGKILL worker (random round)", 2, 1, "worker 0", {"server 0"});
}

// Killed as it starts, before it can join: the others time out of their
// join saying which role never came (AFMESH_CONNECT_TIMEOUT_MS, 3 s here).
TEST(FaultMatrix, NodeKilledDuringStartUp) {
    const char *roles[] = {"scheduler", "server", "worker"};
    for (const char *victim : roles) {
        SCOPED_TRACE(victim);
        Cluster c(1, 1);
        c.set("AFMESH_CONNECT_TIMEOUT_MS=3000");
        const std::vector<std::string> join = {"join", "--expect", "AFMESH_ERR_TIMEOUT,AFMESH_ERR_PEER_FAILED"};
        std::vector<std::string> survivors;
        for (const char *role : roles) {
            const bool killed = !strcmp(role, victim);
            // The scheduler runs `echo` (it serves); a victim must outlive its kill, so it runs a long echo.
            std::vector<std::string> args = !strcmp(role, "scheduler") || killed ? echo({"--iters", "1000000"}) : join;
            c.add({role, strcmp(role, "scheduler") ? 0 : -1, args, {}, killed ? SIGKILL : 0});
            if (killed) c.signal(std::string(role) + (strcmp(role, "scheduler") ? " 0" : ""), SIGKILL);
            if (!killed && strcmp(role, "scheduler")) survivors.push_back(std::string(role) + " 0");
        }
        const long long fault = now_ns();
        c.expect_all_succeed();
        // The scheduler is reached by address, not named in the roster: its absence reads "could not reach".
        const std::string culprit = !strcmp(victim, "scheduler") ? "scheduler" : std::string(victim) + "(s)";
        record("SIGKILL during start-up (each role)", c, survivors, culprit, fault, "join");
    }
}

// With the scheduler gone mid-run, the nodes finish their work and stop
// cleanly (exit 0): nothing to report, nothing to hang on.
TEST(FaultMatrix, SchedulerKilledMidRun) {
    for (int trial = 0; trial < 2; ++trial) {
        Cluster c(2, 2);
        std::vector<std::unique_ptr<HoldPoint>> holds;
        c.add({"scheduler", -1, {"echo"}, {}, SIGKILL});
        for (const char *role : {"server", "worker"})
            for (int r = 0; r < 2; ++r) {
                holds.push_back(std::make_unique<HoldPoint>());
                c.add({role, r, holds.back()->held(echo({"--iters", "20"})), {}});
            }
        for (auto &h : holds) ASSERT_TRUE(h->wait_ready(60s));
        c.signal("scheduler", SIGKILL);
        for (auto &h : holds) h->release();
        c.expect_all_succeed();
        count_trial("SIGKILL scheduler mid-run (nodes finish, exit 0)", c);
    }
}

// ---- processes frozen past the peer timeout (1.5 s here) ----

// Freezes `victim` once every node has passed its first barrier; the
// `survivors` must report it. With `kill_scheduler`, the scheduler is
// SIGKILLed first, so only the data plane's heartbeats can tell.
void freeze(const std::string &scenario, int workers, int servers, const std::string &victim,
            const std::vector<std::string> &survivors, bool kill_scheduler) {
    Cluster c(workers, servers);
    std::map<std::string, std::unique_ptr<HoldPoint>> holds;
    c.add({"scheduler", -1, {"echo"}, {}, kill_scheduler ? SIGKILL : 0});
    auto add = [&](const char *role, int rank) {
        const std::string name = std::string(role) + " " + std::to_string(rank);
        holds[name] = std::make_unique<HoldPoint>();
        std::vector<std::string> args = echo({"--iters", std::to_string(kLots)});
        if (name != victim) args.push_back("--expect-peer-failure");
        c.add({role, rank, holds[name]->held(args), {}, name == victim ? SIGKILL : 0});
    };
    for (int s = 0; s < servers; ++s) add("server", s);
    for (int w = 0; w < workers; ++w) add("worker", w);
    for (auto &[name, h] : holds) ASSERT_TRUE(h->wait_ready(60s)) << name;
    if (kill_scheduler) c.signal("scheduler", SIGKILL);
    for (auto &[name, h] : holds) h->release();
    const long long fault = now_ns();
    c.signal(victim, SIGSTOP);
    for (auto &[name, h] : holds) {
        if (name == victim) continue;
        EXPECT_TRUE(c.wait_for(name)) << name << " never reported " << victim;
    }
    c.signal(victim, SIGKILL);
    c.expect_all_succeed();
    record(scenario, c, survivors, victim, fault, "peer failure reported");
}

TEST(FaultMatrix, ServerFrozen) {
    for (int trial = 0; trial < 2; ++trial)
        freeze("SIGSTOP server", 2, 2, "server 1", {"worker 0", "worker 1"}, false);
}

TEST(FaultMatrix, WorkerFrozen) {
    for (int trial = 0; trial < 2; ++trial) freeze("SIGSTOP worker", 2, 1, "worker 0", {"server 0"}, false);
}

TEST(FaultMatrix, SchedulerKilledThenServerFrozen) {
    for (int trial = 0; trial < 2; ++trial)
        freeze("SIGKILL scheduler, then SIGSTOP server", 1, 1, "server 0", {"worker 0"}, true);
}

// ---- the network between two hosts (network namespaces) ----

// Host A runs the scheduler and server 0, host B worker 0; once both have
// passed their first barrier, host A drops everything from and to B.
TEST(FaultMatrix, NetworkPartition) {
    if (access(Cluster::kIp, X_OK) != 0) GTEST_SKIP() << Cluster::kIp << " is not installed (iproute2)";
    for (int trial = 0; trial < 2; ++trial) {
        TwoHosts hosts;
        if (!hosts.ok()) GTEST_SKIP() << "cannot create network namespaces here (needs root / CAP_SYS_ADMIN)";
        if (!hosts.on_a("iptables -L -n")) GTEST_SKIP() << "iptables cannot run in a network namespace here";
        Cluster c(1, 1, hosts.address_a() + ":29500");
        HoldPoint server_held, worker_held;
        const std::vector<std::string> args = echo({"--iters", std::to_string(kLots), "--expect-peer-failure"});
        c.add({"scheduler", -1, {"echo"}, {}, 0, hosts.a()});
        c.add({"server", 0, server_held.held(args), {"AFMESH_TCP_BIND=" + hosts.address_a()}, 0, hosts.a()});
        c.add({"worker", 0, worker_held.held(args), {}, 0, hosts.b()});
        ASSERT_TRUE(server_held.wait_ready(60s) && worker_held.wait_ready(60s));
        server_held.release();
        worker_held.release();
        const long long fault = now_ns();
        ASSERT_TRUE(hosts.on_a("iptables -A INPUT -s " + hosts.address_b() + " -j DROP") &&
                    hosts.on_a("iptables -A OUTPUT -d " + hosts.address_b() + " -j DROP"));
        c.expect_all_succeed();
        record("network partition (iptables DROP)", c, {"worker 0"}, "server 0", fault, "peer failure reported");
        record("network partition (iptables DROP), server side", c, {"server 0"}, "worker 0", fault,
               "peer failure reported");
    }
}

// 5 % of the packets between the hosts dropped at random, both ways: TCP
// retransmits, nothing fails, every byte arrives (a longer peer timeout:
// a heartbeat can wait out a few retransmissions).
TEST(FaultMatrix, FivePercentPacketLoss) {
    if (access(Cluster::kIp, X_OK) != 0) GTEST_SKIP() << Cluster::kIp << " is not installed (iproute2)";
    TwoHosts hosts;
    if (!hosts.ok()) GTEST_SKIP() << "cannot create network namespaces here (needs root / CAP_SYS_ADMIN)";
    if (!hosts.on_b("iptables -A INPUT -m statistic --mode random --probability 0.05 -j DROP") ||
        !hosts.on_b("iptables -A OUTPUT -m statistic --mode random --probability 0.05 -j DROP"))
        GTEST_SKIP() << "iptables' statistic match is not available here";
    Cluster c(2, 1, hosts.address_a() + ":29500");
    c.set("AFMESH_PEER_TIMEOUT_MS=5000");
    c.add({"scheduler", -1, {"echo"}, {}, 0, hosts.a()});
    c.add({"server", 0, echo({"--iters", "60"}), {"AFMESH_TCP_BIND=" + hosts.address_a()}, 0, hosts.a()});
    for (int w = 0; w < 2; ++w) c.add({"worker", w, echo({"--iters", "60"}), {}, 0, hosts.b()});
    c.expect_all_succeed(std::chrono::seconds(300));
    count_trial("5% packet loss both ways (all bytes verified, exit 0)", c);
}

// ---- strangers at every listening port, during a run ----

// Strangers at the scheduler's port: 200 connections at once, garbage, a
// HELLO with a made-up token, one cut in half, a header announcing 4 GiB,
// and silence. Returns the ones still connected.
std::vector<std::unique_ptr<Stranger>> visit_scheduler_port(uint16_t port) {
    Visit visit(port);
    auto stranger = [&]() -> Stranger & { return visit.next(); };
    std::vector<uint8_t> garbage(4096);
    for (uint8_t &b : garbage) b = static_cast<uint8_t>(random_source()());
    stranger().send_bytes(garbage);
    control::HelloMsg hello;  // a worker's HELLO with a made-up token
    hello.hello.transport = "tcp";
    hello.auth_token = "not the token";
    std::vector<uint8_t> impostor;
    control::append_frame(control::MessageType::kHello, control::encode(hello), &impostor);
    stranger().send_bytes(impostor);
    stranger().send_bytes({impostor.begin(), impostor.begin() + static_cast<long>(impostor.size() / 2)});
    std::vector<uint8_t> huge;
    control::append_frame(control::MessageType::kHello, {}, &huge);
    huge[8] = huge[9] = huge[10] = huge[11] = 0xff;  // the header's payload length: 4 GiB
    stranger().send_bytes(huge);
    stranger();  // silent
    return visit.lingering();
}

// While the nodes wait at a barrier, strangers visit `target`'s port; each
// must be closed and its descriptors come back, and the cluster then runs
// to the end.
void strangers_at(const std::string &scenario, const std::string &target) {
    HeldCluster held;
    Cluster &c = held.c;
    ASSERT_TRUE(held.ready());
    const pid_t pid = c.pid_of(target);
    const size_t before = open_descriptors(pid);
    const std::string &scheduler = c.scheduler_address();
    std::vector<std::unique_ptr<Stranger>> lingering =
        target == "scheduler" ? visit_scheduler_port(static_cast<uint16_t>(std::stoi(scheduler.substr(scheduler.rfind(':') + 1))))
                              : visit_data_port(data_port(c, target));
    if (target != "scheduler") {  // and writes into regions a guesser would try first
        lingering.push_back(std::make_unique<Stranger>(data_port(c, target)));
        for (uint64_t key = 0; key < 16 && lingering.back()->send_frame({tcp::FrameType::kWriteImm, 1, key, 0, 0}, {9});)
            ++key;
    }
    for (auto &s : lingering) {
        EXPECT_TRUE(s->connected());
        EXPECT_TRUE(s->closed_by_server()) << "a stranger's connection was left open";
    }
    EXPECT_TRUE(eventually([&] { return open_descriptors(pid) <= before; }))
        << target << " holds " << open_descriptors(pid) << " descriptors, " << before << " before the strangers";
    const size_t after = open_descriptors(pid);
    held.release();
    c.expect_all_succeed();
    count_trial(scenario, c);
    table()[scenario].descriptors = std::to_string(before) + " -> " + std::to_string(after);
}

TEST(FaultMatrix, StrangersAtTheSchedulerPort) {
    for (int trial = 0; trial < 2; ++trial)
        strangers_at("strangers at the scheduler port (all closed, cluster unharmed)", "scheduler");
}

TEST(FaultMatrix, StrangersAtADataPort) {
    for (int trial = 0; trial < 2; ++trial)
        strangers_at("strangers at a server's data port (all closed, cluster unharmed)", "server 0");
}

}  // namespace
}  // namespace afmesh
