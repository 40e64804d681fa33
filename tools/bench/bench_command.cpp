// SPDX-License-Identifier: Apache-2.0
// `afmesh bench`: the AF-shaped benchmark. Run one process per node (e.g.
// `afmesh run --workers 2 --servers 2 -- afmesh bench`). Every worker pushes
// to every server and pulls one answer from each; servers stamp their rank
// into the answer, which workers verify on every iteration. For each size
// and polling mode the same exchange is also timed directly on the transport
// (the floor), with what each costs the cluster, and worker 0 reports both
// side by side (bench_worker.cpp, bench_server.cpp).
#include <cstdio>
#include <memory>

#include "afmesh/afmesh.h"
#include "bench_options.h"
#include "bench_server.h"
#include "bench_worker.h"
#include "command.h"

namespace afmesh::tool {

namespace {

int run(const bench::Options &o) {
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

}  // namespace

Runner define_bench(CLI::App &command) {
    auto o = std::make_shared<bench::Options>();
    bench::declare_options(command, *o);
    command.footer(
        "Run one per node, e.g. 'afmesh run --workers 2 --servers 2 -- afmesh bench'.\n"
        "Each worker pushes to every server and pulls one answer from each; servers\n"
        "stamp their rank into the answer and workers verify every iteration.\n"
        "Measures each raw size and the T x H AF shape (default 128 x 7168 bf16) one\n"
        "push-pull at a time, next to the same exchange timed on the raw transport\n"
        "(the floor), then the AF pipeline: L layers of M micro-batches in flight.\n"
        "Worker 0 prints p50/p99/max (us), bandwidth and afmesh/floor ratios for\n"
        "every polling mode given, and what each costs in CPU time, context\n"
        "switches and system calls per push-pull.");
    return [o]() { return run(*o); };
}

}  // namespace afmesh::tool
