// SPDX-License-Identifier: Apache-2.0
#include "request_pool.h"

#include "reuse.h"

namespace afmesh {

RequestPool::~RequestPool() {
    for (const afmesh_request *request : all_) delete request;
}

afmesh_request *RequestPool::take() {
    if (spare_.empty()) {
        auto *request = new afmesh_request();
        all_.insert(request);
        return request;
    }
    afmesh_request *request = spare_.back();
    spare_.pop_back();
    return request;
}

void RequestPool::give_back(afmesh_request *request) {
    afmesh_request fresh;
    keep_capacity(request->pushes, fresh.pushes);
    keep_capacity(request->pulls, fresh.pulls);
    keep_capacity(request->to_device, fresh.to_device);
    keep_capacity(request->regs, fresh.regs);
    keep_capacity(request->response.pull_bytes, fresh.response.pull_bytes);
    *request = std::move(fresh);
    spare_.push_back(request);
}

}  // namespace afmesh
