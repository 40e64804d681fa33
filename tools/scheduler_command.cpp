// SPDX-License-Identifier: Apache-2.0
// `afmesh scheduler`: runs the rendezvous for one cluster until every node
// has stopped (or the scheduler gives up on nodes that never came).
#include <cstdio>
#include <string>

#include "afmesh/afmesh.h"
#include "command.h"

namespace afmesh::tool {

int run_scheduler(Args args) {
    std::string address;
    for (size_t i = 1; i < args.size(); ++i) {
        std::string a = args[i];
        if (a == "--listen" && i + 1 < args.size()) {
            address = args[++i];
        } else {
            fprintf(stderr, "afmesh scheduler: unknown argument '%s'\n", a.c_str());
            return kExitUsage;
        }
    }
    afmesh_config config{};
    config.struct_size = sizeof config;
    config.role = AFMESH_ROLE_SCHEDULER;
    config.scheduler = address.empty() ? nullptr : address.c_str();
    afmesh_node *node = nullptr;
    if (afmesh_node_create(&config, &node) != AFMESH_OK) {
        fprintf(stderr, "afmesh scheduler: %s\n", afmesh_last_error());
        return kExitFailure;
    }
    afmesh_status st = afmesh_node_destroy(node);  // serves until the cluster has stopped
    if (st != AFMESH_OK) {
        fprintf(stderr, "afmesh scheduler: %s\n", afmesh_last_error());
        return kExitFailure;
    }
    return kExitOk;
}

}  // namespace afmesh::tool
