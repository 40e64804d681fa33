// SPDX-License-Identifier: Apache-2.0
// `afmesh bench`'s worker side.
#pragma once

#include "afmesh/afmesh.h"
#include "bench_options.h"

namespace afmesh::bench {

/**
 * Times every case in every polling mode, afmesh and the floor in
 * alternating blocks, verifying every answer; gathers the cluster's cost of
 * each case; stops the servers. Worker 0 then prints the tables and writes
 * the report's files.
 */
void run_worker(afmesh_node *node, const Options &o);

}  // namespace afmesh::bench
