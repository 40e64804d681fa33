// SPDX-License-Identifier: Apache-2.0
// `afmesh scheduler`: runs the rendezvous for one cluster until every node
// has stopped (or the scheduler gives up on nodes that never came).
#include <cstdio>
#include <memory>
#include <string>

#include "afmesh/afmesh.h"
#include "command.h"

namespace afmesh::tool {

Runner define_scheduler(CLI::App &command) {
    auto address = std::make_shared<std::string>();
    command.add_option("--listen", *address, "the address to listen on (default: AFMESH_SCHEDULER)")
        ->type_name("HOST:PORT");
    command.footer(
        "Serves HELLO, the roster, barriers, heartbeats and stop for one cluster,\n"
        "and exits once every node has stopped.");
    return [address]() {
        afmesh_config config{};
        config.struct_size = sizeof config;
        config.role = AFMESH_ROLE_SCHEDULER;
        config.scheduler = address->empty() ? nullptr : address->c_str();
        afmesh_node *node = nullptr;
        if (afmesh_node_create(&config, &node) != AFMESH_OK) {
            fprintf(stderr, "afmesh scheduler: %s\n", afmesh_last_error());
            return kExitFailure;
        }
        if (afmesh_node_destroy(node) != AFMESH_OK) {  // serves until the cluster has stopped
            fprintf(stderr, "afmesh scheduler: %s\n", afmesh_last_error());
            return kExitFailure;
        }
        return kExitOk;
    };
}

}  // namespace afmesh::tool
