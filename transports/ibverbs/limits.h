// SPDX-License-Identifier: Apache-2.0
// The module's fixed sizes, reported in caps and used to size queues.
#pragma once

#include <cstdint>

namespace afmesh::ibverbs {

/** Largest send(): one receive buffer. Control and metadata messages only. */
inline constexpr uint32_t kMaxSendSize = 8192;
/**
 * caps.eager_send_size: one send into a posted receive beats a write plus
 * a send for all a receive buffer holds. Not measured here (no RDMA on the
 * machines this is built on); UCX's rc transports leave bcopy for zcopy
 * around the same size.
 */
inline constexpr uint32_t kEagerSendSize = kMaxSendSize;
/** Receives posted per QP (caps.recv_depth); a sender that finds none posted retries (queue_pair.cpp). */
inline constexpr uint32_t kRecvDepth = 32;
/** Work requests per send queue. */
inline constexpr uint32_t kSendDepth = 128;
/** A signal is forced at least this often so unsignalled requests retire their send-queue slots. */
inline constexpr uint32_t kSignalInterval = kSendDepth / 4;
/** Writes and sends up to this size go inline in the work request (requested as max_inline_data). */
inline constexpr uint32_t kMaxInline = 128;
/** Bounce buffers shared by a context's sends above kMaxInline. */
inline constexpr uint32_t kSendSlots = 256;
/**
 * Segments one write_imm_v takes (caps.max_write_segs): a tensor and the
 * message describing it, with room to spare. Each is one work request of a
 * chain, with the one SGE every send-queue entry has.
 */
inline constexpr uint32_t kMaxWriteSegs = 4;
static_assert(kMaxWriteSegs <= kSendDepth, "a chain longer than the send queue could never be posted");

}  // namespace afmesh::ibverbs
