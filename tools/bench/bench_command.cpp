// SPDX-License-Identifier: Apache-2.0
// `afmesh bench`: the AF-shaped benchmark. Run one process per node (e.g.
// `afmesh run --workers 2 --servers 2 -- afmesh bench`). Every worker pushes
// to every server and pulls one answer from each; servers stamp their rank
// into the answer, which workers verify on every iteration. For each size
// and polling mode the same exchange is also timed directly on the transport
// (the floor), with what each costs the cluster, and worker 0 reports both
// side by side (bench_worker.cpp, bench_server.cpp).
#include <cstdio>

#include "afmesh/afmesh.h"
#include "bench_options.h"
#include "bench_server.h"
#include "bench_worker.h"
#include "command.h"

namespace afmesh::tool {

int run_bench(Args args) {
    bench::Options o;
    if (!bench::parse_options(static_cast<int>(args.size()), args.data(), &o)) return kExitUsage;
    afmesh_config config{};
    config.struct_size = sizeof config;
    afmesh_node *node = nullptr;
    if (afmesh_node_create(&config, &node) != AFMESH_OK) {
        fprintf(stderr, "afmesh bench: %s\n", afmesh_last_error());
        return kExitFailure;
    }
    afmesh_role role = AFMESH_ROLE_SCHEDULER;
    if (afmesh_node_info(node, &role, nullptr, nullptr, nullptr) != AFMESH_OK) role = AFMESH_ROLE_SCHEDULER;
    if (role == AFMESH_ROLE_WORKER) bench::run_worker(node, o);
    if (role == AFMESH_ROLE_SERVER) bench::serve(node, o);
    if (afmesh_node_destroy(node) != AFMESH_OK) {
        fprintf(stderr, "afmesh bench: %s\n", afmesh_last_error());
        return kExitFailure;
    }
    return kExitOk;
}

}  // namespace afmesh::tool
