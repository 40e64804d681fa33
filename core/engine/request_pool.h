// SPDX-License-Identifier: Apache-2.0
// A server's requests (afmesh_request, the handle get_batch gives the
// application), and the pool they come from. A request answered is kept,
// not freed, with the vectors it grew (its pushes and pulls, and the
// answer's scratch): a server in its steady state allocates nothing per
// request. The pool also knows every request it made, so a pointer the
// application hands back can be checked without a set entry per request
// (an allocation on insert and a free on erase, every time).
#pragma once

#include <cstdint>
#include <unordered_set>
#include <utility>
#include <vector>

#include "afmesh/afmesh.h"
#include "engine/wire.h"
#include "memory_registry.h"

struct afmesh_request {
    int32_t worker = -1;
    uint32_t incarnation = 0;  // the worker's, counted by this server: a replaced worker's requests are not answered
    uint16_t slot = 0, generation = 0;
    std::vector<std::pair<uint64_t, afmesh_tensor>> pushes;
    std::vector<afmesh::wire::PullMeta> pulls;
    bool eager_answers = false;  // the worker takes answers inside the RESPONSE
    int32_t entry = -1;          // the mailbox entry the REQUEST came in, where the RESPONSE may go; -1: none
    uint64_t arrived_ns = 0, processed_ns = 0;
    /** Staged pushes: get_batch copies them from the pinned slice to the device before handing this out. */
    struct Copy {
        void *dst;
        const void *src;
        uint64_t bytes;
    };
    std::vector<Copy> to_device;
    /** Handed to the application by get_batch and not yet answered. */
    bool handed_out = false;
    // The answer's scratch, filled by the one respond() that owns the request.
    std::vector<const afmesh::Registration *> regs;  // each response tensor's registration
    afmesh::wire::Response response;
};

namespace afmesh {

/** Not thread-safe: the server engine guards it with its lock. */
class RequestPool {
public:
    RequestPool() = default;
    ~RequestPool();
    RequestPool(const RequestPool &) = delete;
    RequestPool &operator=(const RequestPool &) = delete;

    /** A request with every field at its default (its vectors empty, their capacity kept). */
    afmesh_request *take();
    /** Takes `request` back; it must be one of this pool's and not given back already. */
    void give_back(afmesh_request *request);
    /** Whether `request` is one of this pool's (taken or spare): safe for any pointer. */
    bool owns(const afmesh_request *request) const { return all_.count(request) != 0; }

private:
    std::unordered_set<const afmesh_request *> all_;
    std::vector<afmesh_request *> spare_;
};

}  // namespace afmesh
