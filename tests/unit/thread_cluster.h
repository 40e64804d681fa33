// SPDX-License-Identifier: Apache-2.0
// A real cluster in this process: a scheduler, then workers and servers
// started together on threads of their own (starting is collective, as is
// stopping), over whatever transport the settings and environment pick.
#pragma once

#include <afmesh/afmesh.hpp>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "free_port.h"

namespace afmesh::test {

struct ThreadCluster {
    std::vector<std::string> settings;  // every node's, the counts included
    std::unique_ptr<api::Node> scheduler;
    std::vector<std::unique_ptr<api::Node>> workers, servers;  // by rank

    /** Starts the cluster with `extra` settings; "" or why a node could not start. */
    std::string start(int num_workers, int num_servers, std::vector<std::string> extra) {
        const std::string address = with_free_port("127.0.0.1:0");
        settings = std::move(extra);
        settings.push_back("AFMESH_NUM_WORKERS=" + std::to_string(num_workers));
        settings.push_back("AFMESH_NUM_SERVERS=" + std::to_string(num_servers));
        settings.push_back("AFMESH_CONNECT_TIMEOUT_MS=30000");
        try {
            scheduler = std::make_unique<api::Node>(AFMESH_ROLE_SCHEDULER, settings, address.c_str());
        } catch (const api::Error &e) {
            return std::string("scheduler: ") + e.what();
        }
        std::vector<std::unique_ptr<api::Node>> nodes(num_workers + num_servers);
        std::vector<std::string> errors(nodes.size());
        std::vector<std::thread> joiners;
        for (size_t i = 0; i < nodes.size(); ++i)
            joiners.emplace_back([&, i] {
                try {
                    const afmesh_role role = i < size_t(num_workers) ? AFMESH_ROLE_WORKER : AFMESH_ROLE_SERVER;
                    nodes[i] = std::make_unique<api::Node>(role, settings, address.c_str());
                } catch (const api::Error &e) {
                    errors[i] = e.what();
                }
            });
        for (auto &t : joiners) t.join();
        workers.resize(num_workers);
        servers.resize(num_servers);
        for (size_t i = 0; i < nodes.size(); ++i) {
            if (!nodes[i]) return "node " + std::to_string(i) + ": " + errors[i];
            (i < size_t(num_workers) ? workers : servers)[nodes[i]->rank()] = std::move(nodes[i]);
        }
        return "";
    }

    /** Stops every worker and server still here, all at once; the scheduler stays. */
    void stop_nodes() {
        std::vector<std::thread> stoppers;
        for (auto *group : {&workers, &servers})
            for (auto &node : *group)
                if (node) stoppers.emplace_back([&node] { node.reset(); });
        for (auto &t : stoppers) t.join();
    }

    ~ThreadCluster() {
        stop_nodes();
        scheduler.reset();
    }
};

}  // namespace afmesh::test
