// SPDX-License-Identifier: Apache-2.0
// The pieces a server's answer to one request is written in, and a cursor
// that steps through them (ServerEngine::post_response, server.cpp).
//
// What goes out, in order: a staged tensor (device memory the transport
// cannot register, sent from a pinned buffer) in chunks, each copied to
// pinned memory just before it is posted, so one chunk's copy overlaps the
// previous chunk's send; any other tensor in one write. Each piece is
// written into the worker's pull buffer for that tensor, at the piece's
// offset.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "afmesh/afmesh.h"
#include "engine/wire.h"
#include "memory_registry.h"
#include "staging.h"
#include "status.h"

namespace afmesh {

class ResponseCursor {
public:
    /**
     * At the first piece of the answer `tensors[0, count)` to the pull
     * buffers `pulls` (the request's, one per tensor). `buffers`: the staged
     * tensors' pinned buffers, by tensor (empty when none is staged);
     * `regs`: each tensor's registration, its pinned buffer's if staged
     * (null for an empty tensor); `chunk_bytes`: the size of a staged
     * tensor's pieces. All are borrowed for the cursor's life.
     */
    ResponseCursor(const afmesh_tensor *tensors, size_t count, const std::vector<Staging::Buffer> &buffers,
                   const std::vector<const Registration *> &regs, const std::vector<wire::PullMeta> &pulls,
                   uint64_t chunk_bytes);

    /** Whether the cursor has stepped past the last piece. */
    bool done() const { return tensor_ == count_; }
    /** The current piece's tensor (count when done()). */
    size_t tensor() const { return tensor_; }
    /** Whether the current piece must be copied to pinned memory before it is written (false when done()). */
    bool staged() const { return !done() && is_staged(tensor_); }
    /** Whether the current piece is the answer's last. */
    bool last() const;
    /** Whether the piece after the current one must be copied first (false when the current one is the last). */
    bool next_staged() const;
    /** Copies the current piece into its pinned buffer where staged(); OK at once otherwise. */
    Status copy(const Staging &staging) const;
    /** The current piece's write: from the tensor (or its pinned buffer) into the worker's pull buffer. */
    afmesh_net_write_seg segment() const;
    /** Moves to the next piece. */
    void step();

private:
    /** Where a piece starts: tensor `tensor` from byte `offset`. */
    struct Position {
        size_t tensor;
        uint64_t offset;
    };
    bool is_staged(size_t t) const { return !buffers_.empty() && buffers_[t].ptr; }
    /** Bytes of the piece at `at`: a chunk of a staged tensor, any other tensor whole. */
    uint64_t length(Position at) const;
    /** The piece after the current one. */
    Position next() const;

    const afmesh_tensor *tensors_;
    const size_t count_;
    const std::vector<Staging::Buffer> &buffers_;
    const std::vector<const Registration *> &regs_;
    const std::vector<wire::PullMeta> &pulls_;
    const uint64_t chunk_bytes_;
    size_t tensor_ = 0;  // the current piece: tensor tensor_ from offset_
    uint64_t offset_ = 0;
};

}  // namespace afmesh
