// SPDX-License-Identifier: Apache-2.0
#include "context.h"

#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdlib>
#include <cstring>

#include "address.h"
#include "byte_codec.h"
#include "fabric/wire.h"
#include "libfabric_api.h"
#include "mem_kind_names.h"
#include "monotonic.h"
#include "net_host.h"
#include "settings.h"

namespace afmesh::fabric {
namespace {

constexpr size_t kMaxTxDepth = 1024;
constexpr uint64_t kDefaultHandshakeMs = 30000;
// AFMESH_NET_MORE is a hint this module ignores: every operation is handed
// to the provider when posted (FI_MORE could leave it there until an
// operation without it, which the HAL does not promise will come).

// The mr_mode bits granted, by name, for describe().
std::string mr_mode_names(uint64_t mode) {
    static constexpr std::pair<uint64_t, const char *> kNames[] = {
        {FI_MR_LOCAL, "FI_MR_LOCAL"},       {FI_MR_VIRT_ADDR, "FI_MR_VIRT_ADDR"},
        {FI_MR_PROV_KEY, "FI_MR_PROV_KEY"}, {FI_MR_ALLOCATED, "FI_MR_ALLOCATED"},
        {FI_MR_ENDPOINT, "FI_MR_ENDPOINT"}, {FI_MR_HMEM, "FI_MR_HMEM"},
    };
    std::string out;
    for (const auto &[bit, name] : kNames)
        if (mode & bit) out += std::string(out.empty() ? "" : "|") + name;
    return out.empty() ? "none required" : out;
}

// caps.eager_send_size: up to where a send beats a write plus a send,
// measured per provider on loopback (afmesh bench, AFMESH_EAGER_BYTES 0
// against 60000, p50). shm copies a message twice through its shared
// buffers: a send is level with a write plus a send at 1-3 KiB, 1.2x
// slower at 4 KiB.
// tcp;ofi_rxm: eager 0.74-1.0x up to the largest message, whose bytes it
// copies through its own bounce buffers either way. Providers not measured
// are taken to be like rxm.
uint32_t eager_send_size(const char *provider) {
    return strcmp(provider, "shm") == 0 ? 3 * 1024 : kMaxSendSize;
}

}  // namespace

int Context::create(afmesh_net_caps *caps, Context **out) {
    std::unique_ptr<Context> context(new Context());
    Reason why;
    int rc = rule_out_without_libfabric(&why);
    if (rc != AFMESH_HAL_OK) return host_error(rc, "%s", why.text);
    if (!load_libfabric(&why)) return host_error(AFMESH_HAL_NOT_PRESENT, "%s", why.text);
    context->hmem_ = HmemProbe::run();
    rc = select_provider(context->hmem_, &context->selection_, &why);
    if (rc != AFMESH_HAL_OK) return host_error(rc, "%s", why.text);
    if ((rc = context->open_fabric(caps, &why)) != AFMESH_HAL_OK) return host_error(rc, "init: %s", why.text);
    host_log(AFMESH_LOG_INFO, "provider %s, domain %s", context->fabric_.info->fabric_attr->prov_name,
             context->fabric_.info->domain_attr->name);
    *out = context.release();
    return AFMESH_HAL_OK;
}

int Context::open_fabric(afmesh_net_caps *caps, Reason *why) {
    fi_info *info = selection_.info;
    fabric_.info = info;
    int rc = libfabric().fabric(info->fabric_attr, &fabric_.fabric, nullptr);
    if (rc != 0) {
        fabric_.fabric = nullptr;
        why->format("fi_fabric(%s): %s", info->fabric_attr->prov_name, fabric_strerror(-rc));
        return AFMESH_HAL_ERROR;
    }
    if ((rc = fi_domain(fabric_.fabric, info, &fabric_.domain, nullptr)) != 0) {
        fabric_.domain = nullptr;
        why->format("fi_domain(%s): %s", info->domain_attr->name, fabric_strerror(-rc));
        return AFMESH_HAL_ERROR;
    }
    fi_av_attr av_attr{};
    av_attr.type = info->domain_attr->av_type == FI_AV_UNSPEC ? FI_AV_TABLE : info->domain_attr->av_type;
    if ((rc = fi_av_open(fabric_.domain, &av_attr, &fabric_.av, nullptr)) != 0) {
        fabric_.av = nullptr;
        why->format("fi_av_open: %s", fabric_strerror(-rc));
        return AFMESH_HAL_ERROR;
    }
    fabric_.mr_mode = static_cast<uint64_t>(info->domain_attr->mr_mode);
    fabric_.inject_size = info->tx_attr->inject_size;
    fabric_.write_segs = static_cast<uint32_t>(
        std::min({info->tx_attr->iov_limit, info->tx_attr->rma_iov_limit, size_t{kMaxWritePieces}}));
    fabric_.tx_depth = std::clamp<size_t>(info->tx_attr->size, 16, kMaxTxDepth);
    fabric_.rx_depth = info->rx_attr->size;
    fabric_.recv_consumes_data = (info->mode & FI_RX_CQ_DATA) != 0;
    fabric_.unique_names = strcmp(info->fabric_attr->prov_name, "shm") == 0;
    fabric_.tagged_writes = info->domain_attr->cq_data_size >= sizeof(uint64_t);
    if ((rc = choose_endpoints(why)) != AFMESH_HAL_OK) return rc;
    registrar_ = std::make_unique<Registrar>(fabric_);
    const char *timeout = host_config("AFMESH_CONNECT_TIMEOUT_MS");
    handshake_ns_ = (timeout ? strtoull(timeout, nullptr, 10) : kDefaultHandshakeMs) * 1'000'000;
    if ((rc = open_wait_set(why)) != AFMESH_HAL_OK) return rc;
    // Opened here, not at the first connect: an rxm endpoint clears ~90 MB
    // of bounce buffers (more than a second under a sanitizer), which must
    // not eat into a handshake's timeout or a first push.
    if (fabric_.shared_endpoint) {
        MutexLock lock(&mu_);  // uncontended (no other thread has the context yet), but endpoints_ is mu_'s
        if ((rc = add_endpoint(&shared_, why)) != AFMESH_HAL_OK) return rc;
    }

    caps->flags = fabric_.wait_fd ? AFMESH_NET_CAP_WAIT_FD : 0;  // RDM: no ordering promised between operations
    caps->imm_bytes = sizeof(uint32_t);  // never more, whatever cq_data_size says
    caps->max_inline = static_cast<uint32_t>(std::min<size_t>(fabric_.inject_size, kMaxSendSize));
    caps->mem_kinds = AFMESH_MEM_BIT(AFMESH_MEM_HOST) | (selection_.hmem ? hmem_.device_kinds() : 0);
    caps->max_send_size = kMaxSendSize;
    caps->recv_depth = static_cast<uint32_t>(Endpoint::recv_depth());
    caps->max_addr_size = kMaxAddressBlob;
    caps->max_write_size = info->ep_attr->max_msg_size;
    caps->max_write_segs = fabric_.write_segs;
    caps->eager_send_size = eager_send_size(info->fabric_attr->prov_name);
    return AFMESH_HAL_OK;
}

int Context::choose_endpoints(Reason *why) {
    const char *asked = host_config("AFMESH_FABRIC_ENDPOINTS");
    const std::string choice = asked ? asked : kDefaultEndpoints;
    if (choice == "auto") {
        // Why not over shm: context.h.
        fabric_.shared_endpoint = fabric_.tagged_writes && strcmp(fabric_.info->fabric_attr->prov_name, "shm") != 0;
    } else if (choice == "shared") {
        fabric_.shared_endpoint = true;
        if (!fabric_.tagged_writes) {
            why->format("AFMESH_FABRIC_ENDPOINTS=shared: provider %s delivers %zu bytes of remote CQ data, and a "
                        "shared endpoint needs 8 to tell connections apart (use auto or per-connection)",
                        fabric_.info->fabric_attr->prov_name, fabric_.info->domain_attr->cq_data_size);
            return AFMESH_HAL_INVALID_ARGUMENT;
        }
    } else if (choice == "per-connection") {
        fabric_.shared_endpoint = false;
    } else {
        why->format("AFMESH_FABRIC_ENDPOINTS=%s: expected auto, shared or per-connection", choice.c_str());
        return AFMESH_HAL_INVALID_ARGUMENT;
    }
    return AFMESH_HAL_OK;
}

// Whether CQs can have wait fds here (tcp;ofi_rxm: yes; shm: no): probed
// with a throw-away CQ, since fi_info does not say.
int Context::open_wait_set(Reason *why) {
    fi_cq_attr attr{};
    attr.format = FI_CQ_FORMAT_DATA;
    attr.wait_obj = FI_WAIT_FD;
    fid_cq *probe = nullptr;
    int fd = -1;
    if (fi_cq_open(fabric_.domain, &attr, &probe, nullptr) == 0) {
        fabric_.wait_fd = fi_control(&probe->fid, FI_GETWAIT, &fd) == 0 && fd >= 0;
        fi_close(&probe->fid);
    }
    if (!fabric_.wait_fd) return AFMESH_HAL_OK;
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    timer_fd_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (epoll_fd_ < 0 || wake_fd_ < 0 || timer_fd_ < 0) {
        why->format("creating the wait set: %s", strerror(errno));
        return AFMESH_HAL_ERROR;
    }
    for (int watched : {wake_fd_, timer_fd_}) {
        epoll_event watch{};
        watch.events = EPOLLIN;
        if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, watched, &watch) != 0) {
            why->format("epoll_ctl: %s", strerror(errno));
            return AFMESH_HAL_ERROR;
        }
    }
    return AFMESH_HAL_OK;
}

Context::~Context() {
    endpoints_.clear();  // closes every endpoint before the regions and domain they use
    for (auto &[id, conn] : connections_) delete conn;
    for (Connection *conn : closed_) delete conn;
    registrar_.reset();
    if (fabric_.av) fi_close(&fabric_.av->fid);
    if (fabric_.domain) fi_close(&fabric_.domain->fid);
    if (fabric_.fabric) fi_close(&fabric_.fabric->fid);
    if (selection_.info) libfabric().freeinfo(selection_.info);
    for (int fd : {epoll_fd_, wake_fd_, timer_fd_})
        if (fd >= 0) ::close(fd);
}

int Context::add_endpoint(Endpoint **out, Reason *why) {
    std::unique_ptr<Endpoint> endpoint;
    if (int rc = Endpoint::open(fabric_, *registrar_, &endpoint, why); rc != AFMESH_HAL_OK) return rc;
    if (epoll_fd_ >= 0) {
        epoll_event watch{};
        watch.events = EPOLLIN;
        if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, endpoint->wait_fd(), &watch) != 0) {
            why->format("epoll_ctl: %s", strerror(errno));
            return AFMESH_HAL_ERROR;
        }
    }
    endpoints_.push_back(std::move(endpoint));
    *out = endpoints_.back().get();
    return AFMESH_HAL_OK;
}

int Context::endpoint_for_connection(Endpoint **out, Reason *why) {
    if (!shared_) return add_endpoint(out, why);
    *out = shared_;
    return shared_->serve(connections_.size() + 1, why);
}

int Context::listen(void *addr, size_t *addr_len) {
    if (!addr || !addr_len) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "listen: null address buffer");
    MutexLock lock(&mu_);
    if (listener_) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "listen: this context already listens");
    if (*addr_len < kMaxAddressBlob)
        return host_error(AFMESH_HAL_INVALID_ARGUMENT, "listen: the address needs up to %zu bytes, the buffer has %zu",
                          kMaxAddressBlob, *addr_len);
    Reason why;
    Endpoint *listener = nullptr;
    if (shared_) {
        listener = shared_;
    } else if (int rc = add_endpoint(&listener, &why); rc != AFMESH_HAL_OK) {
        return host_error(rc, "listen: %s", why.text);
    }
    std::vector<uint8_t> blob;
    if (!encode_address(fabric_.info->addr_format, listener->raw_address(), &blob)) {
        if (listener != shared_) remove_endpoint(listener);
        return host_error(AFMESH_HAL_ERROR, "listen: the provider's address does not fit an address blob");
    }
    memcpy(addr, blob.data(), blob.size());
    *addr_len = blob.size();
    listener_ = listener;
    return AFMESH_HAL_OK;
}

void Context::remove_endpoint(Endpoint *endpoint) {
    if (epoll_fd_ >= 0) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, endpoint->wait_fd(), nullptr);
    std::erase_if(endpoints_, [&](const std::unique_ptr<Endpoint> &e) { return e.get() == endpoint; });
}

int Context::insert_address(const std::vector<uint8_t> &raw, fi_addr_t *out, Reason *why) {
    if (auto it = addresses_.find(raw); it != addresses_.end()) {
        *out = it->second;
        return AFMESH_HAL_OK;
    }
    fi_addr_t inserted = FI_ADDR_NOTAVAIL;
    const int rc = fi_av_insert(fabric_.av, raw.data(), 1, &inserted, 0, nullptr);
    if (rc != 1) {
        why->format("fi_av_insert: %s", rc < 0 ? fabric_strerror(-rc) : "the provider refused the address");
        return AFMESH_HAL_INVALID_ARGUMENT;
    }
    addresses_.emplace(raw, inserted);
    *out = inserted;
    return AFMESH_HAL_OK;
}

bool Context::insert_peer(const uint8_t *blob, size_t len, fi_addr_t *out, Reason *why) {
    std::vector<uint8_t> raw;
    return decode_address(blob, len, fabric_.info->addr_format, &raw, why) &&
           insert_address(raw, out, why) == AFMESH_HAL_OK;
}

// A connection, with the endpoint it uses, registered under a fresh id.
Connection *Context::new_connection(fi_addr_t peer, Reason *why) {
    Endpoint *endpoint = nullptr;
    if (endpoint_for_connection(&endpoint, why) != AFMESH_HAL_OK) return nullptr;
    while (next_id_ == 0 || connections_.count(next_id_)) ++next_id_;
    auto *conn = new Connection(endpoint, peer, next_id_++);
    connections_.emplace(conn->id, conn);
    if (endpoint != shared_) endpoint->owner = conn;
    return conn;
}

// A message to `conn`'s peer: the header and `len` bytes of payload, read
// when it is posted (or copied, when it must wait) before submit() returns.
static Outgoing message_to(Connection *conn, MessageType type, const void *payload, size_t len) {
    Outgoing op;
    op.conn = conn;
    op.dest = conn->peer;
    encode_header({type, conn->remote_id, conn->id}, op.header.data());
    op.payload = len > 0 ? payload : nullptr;
    op.bytes = len;
    return op;
}

int Context::send_control(Connection *conn, MessageType type, const std::vector<uint8_t> &payload, Reason *why) {
    bool queued = false;
    return conn->endpoint->submit(message_to(conn, type, payload.data(), payload.size()), &queued, why);
}

int Context::connect(const void *addr, size_t addr_len, afmesh_net_conn **out) {
    if (!out) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "connect: null connection pointer");
    Reason why;
    std::vector<uint8_t> raw;
    if (!decode_address(addr, addr_len, fabric_.info->addr_format, &raw, &why))
        return host_error(AFMESH_HAL_INVALID_ARGUMENT, "connect: %s", why.text);
    MutexLock lock(&mu_);
    fi_addr_t target;
    if (int rc = insert_address(raw, &target, &why); rc != AFMESH_HAL_OK)
        return host_error(rc, "connect: %s", why.text);
    Connection *conn = new_connection(target, &why);
    if (!conn) return host_error(AFMESH_HAL_ERROR, "connect: %s", why.text);
    conn->deadline_ns = monotonic_ns() + handshake_ns_;
    connecting_.push_back(conn);
    std::vector<uint8_t> own;
    encode_address(fabric_.info->addr_format, conn->endpoint->raw_address(), &own);
    const int rc = send_control(conn, MessageType::kHello, own, &why);
    if (rc != AFMESH_HAL_OK) fail(conn, rc == AFMESH_HAL_AGAIN ? AFMESH_HAL_NO_MEMORY : rc, why.text);
    *out = conn->handle();
    return AFMESH_HAL_OK;
}

int Context::accept(afmesh_net_conn **out) {
    if (!out) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "accept: null connection pointer");
    MutexLock lock(&mu_);
    if (!listener_) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "accept: the context does not listen");
    if (incoming_.empty()) return AFMESH_HAL_AGAIN;
    Connection *conn = incoming_.front();
    incoming_.pop_front();
    if (incoming_.empty()) incoming_announced_ = false;
    conn->state.store(Connection::State::kEstablished, std::memory_order_release);
    release_held(conn);
    *out = conn->handle();
    return AFMESH_HAL_OK;
}

int Context::close(afmesh_net_conn *handle) {
    Connection *conn = Connection::from(handle);
    MutexLock lock(&mu_);
    auto it = handle ? connections_.find(conn->id) : connections_.end();
    if (it == connections_.end() || it->second != conn)
        return host_error(AFMESH_HAL_INVALID_ARGUMENT, "close: not an open connection of this context");
    connections_.erase(it);
    const Connection::State before = conn->state.exchange(Connection::State::kClosed);
    std::erase(connecting_, conn);
    std::erase(incoming_, conn);
    conn->endpoint->drop_backlog_of(conn);
    purge_events_of(conn);
    {
        MutexLock lists(&lists_mu_);
        std::erase_if(poster_failures_, [&](const auto &f) { return f.first == conn; });
    }
    if (before != Connection::State::kFailed) {
        // Best effort: the peer learns of the close at once instead of on its next failed operation.
        Reason why;
        if (send_control(conn, MessageType::kBye, {}, &why) != AFMESH_HAL_OK)
            host_log(AFMESH_LOG_DEBUG, "close: the goodbye was not sent: %s", why.text);
    }
    closed_.push_back(conn);
    return AFMESH_HAL_OK;
}

int Context::mem_register(void *ptr, size_t bytes, const afmesh_net_mem *mem, uint32_t access, afmesh_net_mr **mr,
                          afmesh_net_rkey *rkey) {
    if (mem->kind >= 32 || !(AFMESH_MEM_BIT(mem->kind) & (AFMESH_MEM_BIT(AFMESH_MEM_HOST) |
                                                          (selection_.hmem ? hmem_.device_kinds() : 0))))
        return host_error(AFMESH_HAL_NOT_SUPPORTED,
                          "mem_register: provider %s registers host memory only here, not %s memory (stage it "
                          "through pinned host memory; see `afmesh info`)",
                          fabric_.info->fabric_attr->prov_name,
                          mem_kind_name(mem->kind));
    Reason why;
    Registration *region = nullptr;
    const int rc = registrar_->add(ptr, bytes, *mem, access, &region, rkey, &why);
    if (rc != AFMESH_HAL_OK) return host_error(rc, "mem_register: %s", why.text);
    *mr = reinterpret_cast<afmesh_net_mr *>(region);
    return AFMESH_HAL_OK;
}

int Context::mem_deregister(afmesh_net_mr *mr) {
    if (!mr || !registrar_->remove(reinterpret_cast<Registration *>(mr)))
        return host_error(AFMESH_HAL_INVALID_ARGUMENT, "mem_deregister: not a registration of this context");
    return AFMESH_HAL_OK;
}

// The state check shared by write_imm and send: OK for an established connection.
static int usable(const Connection *conn, const char *what) {
    switch (conn->state.load(std::memory_order_acquire)) {
    case Connection::State::kEstablished: return AFMESH_HAL_OK;
    case Connection::State::kFailed:
        return host_error(AFMESH_HAL_PEER_FAILED, "%s: the connection has failed: %s", what,
                          conn->failure.reason.text);
    case Connection::State::kClosed:
        return host_error(AFMESH_HAL_PEER_FAILED, "%s: the connection is closed", what);
    default:
        return host_error(AFMESH_HAL_INVALID_ARGUMENT, "%s: the connection is not established yet (wait for "
                          "EV_CONNECTED)", what);
    }
}

int Context::write_imm(afmesh_net_conn *handle, const void *src, size_t bytes, afmesh_net_mr *src_mr,
                       const afmesh_net_rkey *dst, uint64_t dst_offset, uint32_t imm, uint32_t flags, uint64_t cookie) {
    if (bytes > 0) {
        const afmesh_net_write_seg seg{src, src_mr, bytes, dst, dst_offset};
        return post_write(handle, &seg, 1, bytes, imm, flags, cookie, "write_imm");
    }
    // Nothing to place: the immediate goes as a message (see wire.h).
    Connection *conn = Connection::from(handle);
    if (int rc = usable(conn, "write_imm"); rc != AFMESH_HAL_OK) return rc;
    uint8_t payload[kImmPayloadSize];
    store_le32(payload, imm);
    Outgoing op = message_to(conn, MessageType::kImm, payload, sizeof payload);
    op.event = (flags & AFMESH_NET_SIGNAL) ? AFMESH_NET_EV_WRITE_DONE : 0;
    op.cookie = cookie;
    return submit(conn, std::move(op), "write_imm");
}

int Context::write_imm_v(afmesh_net_conn *handle, const afmesh_net_write_seg *segs, uint32_t count, uint64_t total,
                         uint32_t imm, uint32_t flags, uint64_t cookie) {
    if (count > fabric_.write_segs)
        return host_error(AFMESH_HAL_INVALID_ARGUMENT, "write_imm_v: %u segments exceed max_write_segs %u (provider "
                          "%s)", count, fabric_.write_segs, fabric_.info->fabric_attr->prov_name);
    return post_write(handle, segs, count, total, imm, flags, cookie, "write_imm_v");
}

int Context::post_write(afmesh_net_conn *handle, const afmesh_net_write_seg *segs, uint32_t count, uint64_t total,
                   uint32_t imm, uint32_t flags, uint64_t cookie, const char *what) {
    if (total > fabric_.info->ep_attr->max_msg_size)
        return host_error(AFMESH_HAL_INVALID_ARGUMENT, "%s: %" PRIu64 " bytes exceed max_write_size %zu", what, total,
                          fabric_.info->ep_attr->max_msg_size);
    Connection *conn = Connection::from(handle);
    if (int rc = usable(conn, what); rc != AFMESH_HAL_OK) return rc;
    Outgoing op;
    op.is_write = true;
    op.conn = conn;
    op.dest = conn->peer;
    op.bytes = total;
    op.num_pieces = count;
    op.data = write_data(imm, conn->remote_id, fabric_.tagged_writes);
    op.event = (flags & AFMESH_NET_SIGNAL) ? AFMESH_NET_EV_WRITE_DONE : 0;
    op.cookie = cookie;
    for (uint32_t i = 0; i < count; ++i) {
        const afmesh_net_write_seg &seg = segs[i];
        if (seg.dst_offset > UINT64_MAX - seg.bytes || seg.dst->addr > UINT64_MAX - seg.bytes - seg.dst_offset)
            return host_error(AFMESH_HAL_INVALID_ARGUMENT, "%s: %" PRIu64 " bytes at offset %" PRIu64 " overflow",
                              what, seg.bytes, seg.dst_offset);
        WritePiece &piece = op.pieces[i];
        piece.src = seg.src;
        piece.bytes = seg.bytes;
        piece.remote_addr = seg.dst->addr + seg.dst_offset;
        piece.key = seg.dst->key;
        if (total <= fabric_.inject_size) continue;  // injected: copied at post, no registration needed
        if (!seg.src_mr)
            return host_error(AFMESH_HAL_INVALID_ARGUMENT,
                              "%s: a %" PRIu64 "-byte write (above max_inline %zu) needs its source registration",
                              what, total, fabric_.inject_size);
        Reason why;
        if (int rc = registrar_->source_desc(reinterpret_cast<Registration *>(seg.src_mr), seg.src, seg.bytes,
                                             &piece.desc, &why);
            rc != AFMESH_HAL_OK)
            return host_error(rc, "%s: %s", what, why.text);
    }
    return submit(conn, std::move(op), what);
}

int Context::send(afmesh_net_conn *handle, const void *buf, size_t len, uint32_t flags, uint64_t cookie) {
    if (len > kMaxSendSize)
        return host_error(AFMESH_HAL_INVALID_ARGUMENT, "send: %zu bytes exceed max_send_size %" PRIu32, len,
                          kMaxSendSize);
    Connection *conn = Connection::from(handle);
    if (int rc = usable(conn, "send"); rc != AFMESH_HAL_OK) return rc;
    Outgoing op = message_to(conn, MessageType::kData, buf, len);
    op.event = (flags & AFMESH_NET_SIGNAL) ? AFMESH_NET_EV_SEND_DONE : 0;
    op.cookie = cookie;
    return submit(conn, std::move(op), "send");
}

// The data path's post: at once, or behind the backlog poll() drains.
int Context::submit(Connection *conn, Outgoing &&op, const char *what) {
    Reason why;
    bool queued = false;
    const int rc = conn->endpoint->submit(std::move(op), &queued, &why);
    if (queued) wake();
    if (rc < 0) {
        queue_failure(conn, rc, why);
        return host_error(AFMESH_HAL_PEER_FAILED, "%s: %s", what, why.text);
    }
    return rc;
}

void Context::queue_failure(Connection *conn, int status, const Reason &why) {
    {
        MutexLock lock(&lists_mu_);
        Failure failure;
        failure.status = status;
        failure.reason = why;
        poster_failures_.emplace_back(conn, failure);
    }
    wake();
}

void Context::wake() {
    if (wake_fd_ < 0 || !sleeping_.load(std::memory_order_seq_cst) ||
        !sleeping_.exchange(false, std::memory_order_seq_cst))
        return;
    const uint64_t one = 1;
    // Fails only when the counter is saturated, i.e. already signalled.
    [[maybe_unused]] ssize_t n = write(wake_fd_, &one, sizeof one);
    fabric_.counters.add(kEventfdCalls);
}

int Context::wait_fd(int *fd) const {
    if (epoll_fd_ < 0)
        return host_error(AFMESH_HAL_NOT_SUPPORTED, "get_wait_fd: provider %s has no FI_WAIT_FD completion queues",
                          fabric_.info->fabric_attr->prov_name);
    *fd = epoll_fd_;
    return AFMESH_HAL_OK;
}

int Context::describe(char *buf, size_t len) {
    const fi_info *info = fabric_.info;
    size_t endpoints;
    {
        MutexLock lock(&mu_);
        endpoints = endpoints_.size();
    }
    const char *requested = host_config("AFMESH_FABRIC_PROVIDER");
    snprintf(buf, len,
             "%s"
             "using provider %s, domain %s (%s), libfabric %u.%u\n"
             "registration modes: %s; remote CQ data %zu bytes (%s)%s\n"
             "writes up to %zu B are injected (copied when posted), of up to %u pieces; messages up to %u B\n"
             "progress: manual, driven by poll(); %s\n"
             "device memory: %s\n"
             "endpoints open: %zu (%s)\n",
             selection_.survey.c_str(), info->fabric_attr->prov_name, info->domain_attr->name,
             requested ? "AFMESH_FABRIC_PROVIDER" : "libfabric's choice; set AFMESH_FABRIC_PROVIDER",
             FI_MAJOR(libfabric().version()), FI_MINOR(libfabric().version()), mr_mode_names(fabric_.mr_mode).c_str(),
             info->domain_attr->cq_data_size,
             fabric_.tagged_writes ? "the immediate, tagged with the target connection" : "the immediate",
             fabric_.recv_consumes_data ? "; remote writes consume posted receives (FI_RX_CQ_DATA)" : "",
             fabric_.inject_size, fabric_.write_segs, kMaxSendSize,
             fabric_.wait_fd ? "wait fd: epoll over each CQ's FI_WAIT_FD, armed with fi_trywait"
                             : "no wait fd (the provider's CQs have no FI_WAIT_FD): the core naps between polls",
             selection_.hmem ? ("FI_HMEM granted; registers " + std::string(hmem_.summary())).c_str()
                             : ("host only, the engine stages device memory; runtimes: " + hmem_.summary() +
                                (hmem_.any() ? "; the provider did not grant FI_HMEM" : ""))
                                   .c_str(),
             endpoints,
             fabric_.shared_endpoint ? "one shared by every connection"
             : fabric_.tagged_writes ? "one per connection, plus the listener (AFMESH_FABRIC_ENDPOINTS)"
                                     : "one per connection, plus the listener: 4-byte CQ data cannot name a connection");
    return AFMESH_HAL_OK;
}

}  // namespace afmesh::fabric
