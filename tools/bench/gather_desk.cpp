// SPDX-License-Identifier: Apache-2.0
#include "gather_desk.h"

#include <cstring>
#include <string>

#include "afmesh/afmesh.hpp"
#include "bench_check.h"

namespace afmesh::bench {

GatherDesk::GatherDesk(afmesh_node *node, int workers, size_t part_bytes)
    : node_(node), workers_(workers), part_bytes_(part_bytes), parts_(static_cast<size_t>(workers) * part_bytes) {
    afmesh_mr *mr = nullptr;
    check(afmesh_register_buffer(node_, parts_.data(), parts_.size(), AFMESH_MEM_HOST, 0, &mr), "register");
}

void GatherDesk::add(afmesh_request *request, const afmesh_tensor &pushed) {
    int32_t worker = -1;
    check(afmesh_request_info(request, &worker, nullptr, nullptr), "request info");
    if (worker < 0 || worker >= workers_ || pushed.bytes != part_bytes_)
        die("worker " + std::to_string(worker) + " pushed " + std::to_string(pushed.bytes) +
            " bytes to be gathered, not " + std::to_string(part_bytes_));
    memcpy(parts_.data() + static_cast<size_t>(worker) * part_bytes_, pushed.data, part_bytes_);
    held_.push_back(request);
    if (static_cast<int>(held_.size()) < workers_) return;
    afmesh_tensor answer = api::host_bytes(parts_.data(), parts_.size());
    for (afmesh_request *r : held_) check(afmesh_respond(node_, r, &answer, 1), "respond");
    held_.clear();
}

}  // namespace afmesh::bench
