// SPDX-License-Identifier: Apache-2.0
// Server 0's side of the exchanges in which every worker learns what every
// worker pushed: worker 0's proposals (Sampler), each worker's cost record.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "afmesh/afmesh.h"

namespace afmesh::bench {

/**
 * Holds each worker's request until every worker has asked (with --batch
 * any they come one at a time; with all, in one batch), then answers them
 * all with every worker's pushed bytes, in rank order.
 */
class GatherDesk {
public:
    /** Every worker pushes exactly `part_bytes`. */
    GatherDesk(afmesh_node *node, int workers, size_t part_bytes);

    void add(afmesh_request *request, const afmesh_tensor &pushed);

private:
    afmesh_node *const node_;
    const int workers_;
    const size_t part_bytes_;
    std::vector<uint8_t> parts_;  // workers_ parts, registered once
    std::vector<afmesh_request *> held_;
};

}  // namespace afmesh::bench
