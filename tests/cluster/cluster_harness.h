// SPDX-License-Identifier: Apache-2.0
// A local cluster of af_test_node processes for the multi-process tests: a
// scheduler, servers and workers as real processes on loopback, each with
// its role, rank and scheduler in its environment. Every process is started,
// waited for with a deadline, and killed by pid if it overstays.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "free_port.h"
#include "process_group.h"
#include "shm_regions.h"

extern char **environ;

namespace afmesh {

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
                setting.rfind("AFMESH_FABRIC_", 0) == 0)
                base_env_.push_back(setting);
        }
        // Fast failure detection so the fault tests end quickly.
        for (const char *setting : {"AFMESH_HEARTBEAT_MS=100", "AFMESH_PEER_TIMEOUT_MS=1500",
                                    "AFMESH_CONNECT_TIMEOUT_MS=30000"})
            base_env_.push_back(setting);
    }

    ~Cluster() {
        for (const ChildExit &c : group_.children())
            if (c.signal != 0) remove_shm_regions_of(c.pid);
    }
    Cluster(const Cluster &) = delete;
    Cluster &operator=(const Cluster &) = delete;

    /** Sets "NAME=value" for every node added afterwards, replacing an earlier value. */
    void set(const std::string &setting) {
        const std::string name = setting.substr(0, setting.find('=') + 1);
        std::erase_if(base_env_, [&](const std::string &x) { return x.rfind(name, 0) == 0; });
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
        hung_ = waited.code() == Code::kTimeout;
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

    /** Whether expect_all_succeed() had to kill processes still running at its limit. */
    bool hung() const { return hung_; }

    /** Where the scheduler listens ("127.0.0.1:port"). */
    const std::string &scheduler_address() const { return scheduler_; }

    /** The pid of the node called `name` ("server 0"), or -1. */
    pid_t pid_of(const std::string &name) {
        for (const ChildExit &c : group_.children())
            if (c.name == name) return c.pid;
        return -1;
    }

    /** Waits until the node called `name` has exited: OK for exit 0; TIMEOUT once `limit` passes. */
    Status wait_for(const std::string &name, std::chrono::seconds limit = std::chrono::seconds(120)) {
        auto children = group_.children();
        for (size_t i = 0; i < children.size(); ++i)
            if (children[i].name == name) return group_.wait_one(i, Clock::now() + limit);
        return {Code::kNotFound, "no node called " + name};
    }

    /** Sends `sig` to the node called `name`, by pid. */
    void signal(const std::string &name, int sig) {
        auto children = group_.children();
        for (size_t i = 0; i < children.size(); ++i)
            if (children[i].name == name) group_.signal(i, sig);
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
    bool hung_ = false;
};

}  // namespace afmesh
