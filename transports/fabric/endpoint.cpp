// SPDX-License-Identifier: Apache-2.0
#include "endpoint.h"

#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "fabric/wire.h"
#include "libfabric_api.h"
#include "net_host.h"

namespace afmesh::fabric {
namespace {

// shm names an endpoint's shared-memory region "<pid>:<n>:<n>" by default. A
// process killed before it closed its endpoints leaves those regions behind,
// and a later process given the same pid then fails to enable its endpoint
// (EBUSY). A name no other process can have avoids that: the pid plus a
// per-process nonce (clock and address of this function) plus a counter.
int name_uniquely(fid_ep *ep) {
    static const uint64_t nonce = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
                                  reinterpret_cast<uintptr_t>(&name_uniquely);
    static std::atomic<uint64_t> counter{0};
    char name[64];
    snprintf(name, sizeof name, "afmesh-%ld-%016" PRIx64 "-%" PRIu64, static_cast<long>(getpid()), nonce,
             counter.fetch_add(1));
    return fi_setname(&ep->fid, name, strlen(name) + 1);
}

// Posted receives per connection. Messages are small control and metadata
// records; providers buffer unexpected ones beyond this.
constexpr size_t kRecvSlots = 32;
// Message buffers per endpoint for sends in flight (more wait in the backlog).
constexpr size_t kBounceSlots = 32;
// Operations queued behind a provider that pushes back before the caller sees AGAIN.
constexpr size_t kMaxBacklog = 65536;
// Connections one drain() may find held back before it leaves the rest for the next poll.
constexpr size_t kMaxHeldPerDrain = 16;
// Room for every transmit and receive completion plus remote writes arriving between polls.
constexpr size_t kCqSize = 4096;

}  // namespace

size_t Endpoint::recv_depth() { return kRecvSlots; }

int Endpoint::open(Fabric &fabric, Registrar &registrar, std::unique_ptr<Endpoint> *out, Reason *why) {
    std::unique_ptr<Endpoint> e(new Endpoint(fabric, registrar));
    fi_cq_attr cq_attr{};
    cq_attr.size = kCqSize;
    cq_attr.format = FI_CQ_FORMAT_DATA;
    cq_attr.wait_obj = fabric.wait_fd ? FI_WAIT_FD : FI_WAIT_NONE;
    int rc = fi_cq_open(fabric.domain, &cq_attr, &e->cq_, nullptr);
    if (rc != 0) {
        e->cq_ = nullptr;
        why->format("fi_cq_open: %s", fabric_strerror(-rc));
        return AFMESH_HAL_ERROR;
    }
    if (fabric.wait_fd && (rc = fi_control(&e->cq_->fid, FI_GETWAIT, &e->wait_fd_)) != 0) {
        why->format("fi_control(FI_GETWAIT): %s", fabric_strerror(-rc));
        return AFMESH_HAL_ERROR;
    }
    rc = fi_endpoint(fabric.domain, fabric.info, &e->ep_, nullptr);
    if (rc != 0) {
        e->ep_ = nullptr;
        why->format("fi_endpoint: %s", fabric_strerror(-rc));
        return rc == -FI_ENOMEM ? AFMESH_HAL_NO_MEMORY : AFMESH_HAL_ERROR;
    }
    if (fabric.unique_names && (rc = name_uniquely(e->ep_)) != 0) {
        why->format("fi_setname: %s", fabric_strerror(-rc));
        return AFMESH_HAL_ERROR;
    }
    if ((rc = fi_ep_bind(e->ep_, &fabric.av->fid, 0)) != 0 ||
        (rc = fi_ep_bind(e->ep_, &e->cq_->fid, FI_TRANSMIT | FI_RECV)) != 0 || (rc = fi_enable(e->ep_)) != 0) {
        why->format("binding and enabling the endpoint: %s", fabric_strerror(-rc));
        return AFMESH_HAL_ERROR;
    }
    e->raw_address_.resize(256);
    size_t len = e->raw_address_.size();
    if ((rc = fi_getname(&e->ep_->fid, e->raw_address_.data(), &len)) != 0 || len == 0 || len > 256) {
        why->format("fi_getname: %s", rc ? fabric_strerror(-rc) : "bad length");
        return AFMESH_HAL_ERROR;
    }
    e->raw_address_.resize(len);

    e->bounce_memory_ = std::make_unique<uint8_t[]>(kBounceSlots * kMessageBufferSize);
    if (int status = registrar.register_raw(e->bounce_memory_.get(), kBounceSlots * kMessageBufferSize,
                                            AFMESH_MEM_HOST, -1, FI_SEND, &e->bounce_mr_, why);
        status != AFMESH_HAL_OK)
        return status;
    e->bounce_desc_ = fi_mr_desc(e->bounce_mr_);
    {
        // Uncontended (no other thread has the endpoint yet), but the pools are tx_mu_'s.
        MutexLock lock(&e->tx_mu_);
        for (size_t i = 0; i < kBounceSlots; ++i) e->free_bounces_.push_back(static_cast<int>(i));
        e->ops_.resize(fabric.tx_depth);
        for (TxOp &op : e->ops_) {
            op.next_free = e->free_ops_;
            e->free_ops_ = &op;
        }
    }
    if (int status = e->serve(1, why); status != AFMESH_HAL_OK) return status;
    *out = std::move(e);
    return AFMESH_HAL_OK;
}

Endpoint::~Endpoint() {
    // The endpoint first: closing it cancels what is still posted on it.
    if (ep_) fi_close(&ep_->fid);
    if (cq_) fi_close(&cq_->fid);
    recv_slabs_.clear();
    if (bounce_mr_) fi_close(&bounce_mr_->fid);
}

Endpoint::RecvSlab::~RecvSlab() {
    if (mr) fi_close(&mr->fid);
}

int Endpoint::serve(size_t connections, Reason *why) {
    const size_t most = std::max(fabric_.rx_depth, kRecvSlots);  // what the provider's queue holds
    const size_t wanted = std::min(connections * kRecvSlots, most);
    if (receives_ >= wanted) return AFMESH_HAL_OK;
    // Doubling keeps the slabs few.
    return add_receives(std::min(std::max(wanted, 2 * receives_), most) - receives_, why);
}

int Endpoint::add_receives(size_t count, Reason *why) {
    auto slab = std::make_unique<RecvSlab>();
    slab->memory = std::make_unique<uint8_t[]>(count * kMessageBufferSize);
    if (int status = registrar_.register_raw(slab->memory.get(), count * kMessageBufferSize, AFMESH_MEM_HOST, -1,
                                             FI_RECV, &slab->mr, why);
        status != AFMESH_HAL_OK)
        return status;
    void *desc = fi_mr_desc(slab->mr);
    slab->slots.resize(count);
    // Kept before posting: a receive posted is the endpoint's until it closes.
    recv_slabs_.push_back(std::move(slab));
    std::vector<RecvSlot> &slots = recv_slabs_.back()->slots;
    for (size_t i = 0; i < count; ++i) {
        RecvSlot &slot = slots[i];
        slot.data = recv_slabs_.back()->memory.get() + i * kMessageBufferSize;
        slot.desc = desc;
        const int rc = static_cast<int>(fi_recv(ep_, slot.data, kMessageBufferSize, desc, FI_ADDR_UNSPEC, &slot.fi));
        if (rc != 0) {
            why->format("posting receive %zu of %zu: %s", receives_ + i, receives_ + count, fabric_strerror(-rc));
            receives_ += i;
            return AFMESH_HAL_ERROR;
        }
    }
    receives_ += count;
    return AFMESH_HAL_OK;
}

int Endpoint::submit(Outgoing &&op, bool *queued, Reason *why) {
    MutexLock lock(&tx_mu_);
    if (!op.conn || op.conn->backlogged == 0) {
        const int rc = post_locked(op, why);
        if (rc != AFMESH_HAL_AGAIN) return rc;
    }
    if (backlog_.size() >= kMaxBacklog) return AFMESH_HAL_AGAIN;
    // An inline write's source and a message's payload are the caller's
    // again on return: keep a copy.
    if (op.is_write && op.copy.empty() && op.bytes > 0 && op.bytes <= fabric_.inject_size) {
        for (uint32_t i = 0; i < op.num_pieces; ++i) {
            const auto *src = static_cast<const uint8_t *>(op.pieces[i].src);
            op.copy.insert(op.copy.end(), src, src + op.pieces[i].bytes);
            op.pieces[i].desc = nullptr;  // injected: no registration needed
        }
    } else if (!op.is_write && op.payload) {
        const auto *payload = static_cast<const uint8_t *>(op.payload);
        op.copy.assign(payload, payload + op.bytes);
        op.payload = nullptr;
    }
    if (op.conn) ++op.conn->backlogged;
    backlog_.push_back(std::move(op));
    *queued = true;
    return AFMESH_HAL_OK;
}

int Endpoint::post_locked(Outgoing &op, Reason *why) {
    TxOp *ctx = free_ops_;
    if (!ctx) return AFMESH_HAL_AGAIN;
    if (!op.is_write && free_bounces_.empty()) return AFMESH_HAL_AGAIN;
    const int bounce = op.is_write ? -1 : free_bounces_.back();
    // The context is complete before the provider sees it: another thread's
    // poll() may reap the completion before the post call even returns.
    ctx->conn = op.conn;
    ctx->event = op.event;
    ctx->cookie = op.cookie;
    ctx->bounce = bounce;
    if (op.conn) op.conn->outstanding.fetch_add(1, std::memory_order_relaxed);
    int rc;
    if (op.is_write) {
        // The bytes are gathered from the local iovs in order and scattered
        // into the targets in order: piece i's source fills target i.
        iovec iov[kMaxWritePieces];
        void *desc[kMaxWritePieces];
        fi_rma_iov target[kMaxWritePieces];
        for (uint32_t i = 0; i < op.num_pieces; ++i) {
            const WritePiece &piece = op.pieces[i];
            iov[i] = {const_cast<void *>(piece.src), piece.bytes};
            desc[i] = piece.desc;
            target[i] = {piece.remote_addr, piece.bytes, piece.key};
        }
        const bool copied = !op.copy.empty();
        if (copied) iov[0] = {op.copy.data(), op.copy.size()};
        fi_msg_rma msg{};
        msg.msg_iov = iov;
        msg.desc = desc;
        msg.iov_count = copied ? 1 : op.num_pieces;
        msg.addr = op.dest;
        msg.rma_iov = target;
        msg.rma_iov_count = op.num_pieces;
        msg.context = &ctx->fi;
        msg.data = op.data;
        // Every operation completes with its context (so errors name their
        // connection), and only once the target has placed the data
        // (FI_DELIVERY_COMPLETE): a target refusing the key then fails the
        // write here, where tcp's default inject completion never would.
        // Small ones are also copied at post (FI_INJECT).
        uint64_t flags = FI_REMOTE_CQ_DATA | FI_COMPLETION | FI_DELIVERY_COMPLETE;
        if (op.bytes <= fabric_.inject_size) flags |= FI_INJECT;
        rc = static_cast<int>(fi_writemsg(ep_, &msg, flags));
    } else {
        uint8_t *buffer = bounce_memory_.get() + static_cast<size_t>(bounce) * kMessageBufferSize;
        memcpy(buffer, op.header.data(), kHeaderSize);
        if (op.bytes > 0) memcpy(buffer + kHeaderSize, op.payload ? op.payload : op.copy.data(), op.bytes);
        rc = static_cast<int>(fi_send(ep_, buffer, kHeaderSize + op.bytes, bounce_desc_, op.dest, &ctx->fi));
    }
    if (rc != 0) {
        // Not posted: the context and bounce buffer stay free.
        if (op.conn) op.conn->outstanding.fetch_sub(1, std::memory_order_relaxed);
        ctx->conn = nullptr;
        ctx->bounce = -1;
        if (rc == -FI_EAGAIN) {
            fabric_.counters.add(kPostsRefused);
            return AFMESH_HAL_AGAIN;
        }
        why->format("%s: %s", op.is_write ? "fi_writemsg" : "fi_send", fabric_strerror(-rc));
        return status_of(-rc);
    }
    fabric_.counters.add(op.is_write ? kWritePosts : kSendPosts);
    free_ops_ = ctx->next_free;
    if (bounce >= 0) free_bounces_.pop_back();
    return AFMESH_HAL_OK;
}

void Endpoint::drain(std::vector<std::pair<Connection *, Failure>> *failed) {
    MutexLock lock(&tx_mu_);
    // Connections whose next operation the provider refused this time: the
    // rest of theirs wait behind it. Bounded, so a provider that refuses
    // everything costs a few calls per poll, not one per queued operation.
    std::vector<const Connection *> held;
    for (auto it = backlog_.begin(); it != backlog_.end() && free_ops_;) {
        if (std::find(held.begin(), held.end(), it->conn) != held.end()) {
            ++it;
            continue;
        }
        Failure failure;
        const int rc = post_locked(*it, &failure.reason);
        if (rc == AFMESH_HAL_AGAIN) {
            if (held.size() == kMaxHeldPerDrain) return;
            held.push_back(it->conn);
            ++it;
            continue;
        }
        if (it->conn) {
            --it->conn->backlogged;
            if (rc != AFMESH_HAL_OK) {
                failure.status = rc;
                failed->emplace_back(it->conn, failure);
            }
        }
        it = backlog_.erase(it);
    }
}

bool Endpoint::has_backlog() {
    MutexLock lock(&tx_mu_);
    return !backlog_.empty();
}

bool Endpoint::has_backlog_of(const Connection *conn) {
    MutexLock lock(&tx_mu_);
    return conn->backlogged != 0;
}

void Endpoint::drop_backlog_of(Connection *conn) {
    MutexLock lock(&tx_mu_);
    backlog_.remove_if([&](const Outgoing &op) { return op.conn == conn; });
    conn->backlogged = 0;
}

Endpoint::Finished Endpoint::release(TxOp *op) {
    MutexLock lock(&tx_mu_);
    const Finished finished{op->conn, op->event, op->cookie};
    if (op->bounce >= 0) free_bounces_.push_back(op->bounce);
    op->bounce = -1;
    op->conn = nullptr;
    op->next_free = free_ops_;
    free_ops_ = op;
    return finished;
}

namespace {

// The element of `items` at `address`, or null: compared as integers, since
// the address may point anywhere.
template <class T>
T *element_at(std::vector<T> &items, const void *address) {
    const auto at = reinterpret_cast<uintptr_t>(address);
    const auto first = reinterpret_cast<uintptr_t>(items.data());
    if (at < first || at >= first + items.size() * sizeof(T) || (at - first) % sizeof(T) != 0) return nullptr;
    return &items[(at - first) / sizeof(T)];
}

}  // namespace

// Neither array moves once its operations are posted.
TxOp *Endpoint::transmit_op(void *context) { return element_at(ops_, context); }

RecvSlot *Endpoint::receive_slot(void *context) {
    for (auto &slab : recv_slabs_)
        if (RecvSlot *slot = element_at(slab->slots, context)) return slot;
    return nullptr;
}

void Endpoint::repost(RecvSlot *slot) {
    int rc;
    // A receive queue never holds more than it was given: -FI_EAGAIN here
    // means the provider needs progress first, which the next CQ read makes.
    for (int attempt = 0; (rc = static_cast<int>(fi_recv(ep_, slot->data, kMessageBufferSize, slot->desc,
                                                         FI_ADDR_UNSPEC, &slot->fi))) == -FI_EAGAIN &&
                          attempt < 16;
         ++attempt) {
        fabric_.counters.add(kPostsRefused);
        fi_cq_read(cq_, nullptr, 0);
        fabric_.counters.add(kCqReads);
    }
    if (rc == 0) fabric_.counters.add(kRecvPosts);
    if (rc != 0) host_log(AFMESH_LOG_WARN, "reposting a receive buffer: %s; one fewer posted", fabric_strerror(-rc));
}

}  // namespace afmesh::fabric
