// SPDX-License-Identifier: Apache-2.0
// Two network namespaces joined by a veth pair, standing in for two hosts
// in the multi-process tests: every byte between them crosses from one
// network stack to another, and faults (a partition, packet loss) can be
// put on the path with iptables inside either. Needs root (CAP_SYS_ADMIN).
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <string>

namespace afmesh {

class TwoHosts {
public:
    TwoHosts() {
        const std::string id = std::to_string(getpid() % 100000);
        a_ = "afm_a_" + id;
        b_ = "afm_b_" + id;
        const int subnet = getpid() % 250;
        address_a_ = "10.77." + std::to_string(subnet) + ".1";
        address_b_ = "10.77." + std::to_string(subnet) + ".2";
        veth_a_ = "afva" + id;
        veth_b_ = "afvb" + id;
        const std::string &veth_a = veth_a_, &veth_b = veth_b_;
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
    /** Each host's end of the veth pair (its only interface besides lo). */
    const std::string &veth_a() const { return veth_a_; }
    const std::string &veth_b() const { return veth_b_; }
    const std::string &address_b() const { return address_b_; }

    /** Runs a shell command (e.g. "iptables ...") inside host A or B: whether it succeeded. */
    bool on_a(const std::string &command) const { return run("ip netns exec " + a_ + " " + command); }
    bool on_b(const std::string &command) const { return run("ip netns exec " + b_ + " " + command); }

    static bool run(const std::string &command) { return system((command + " >/dev/null 2>&1").c_str()) == 0; }

private:
    std::string a_, b_, address_a_, address_b_, veth_a_, veth_b_;
    bool ok_ = false;
};

}  // namespace afmesh
