// SPDX-License-Identifier: Apache-2.0
// `afmesh bench`'s server side.
#pragma once

#include "afmesh/afmesh.h"
#include "bench_options.h"

namespace afmesh::bench {

/**
 * Answers every measured push-pull (stamping its rank into the answer),
 * serves the floor beside it, and keeps the cost of each phase; returns
 * once every worker has sent its stop request.
 */
void serve(afmesh_node *node, const Options &o);

}  // namespace afmesh::bench
