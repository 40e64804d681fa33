// SPDX-License-Identifier: Apache-2.0
// Context: its creation, memory registration and the calls of the transport ABI.
#include "context.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "ibverbs/wire.h"
#include "limits.h"
#include "mem_kind_names.h"
#include "net_host.h"
#include "side_channel.h"

namespace afmesh::ibverbs {
namespace {

constexpr int kInitialCqSize = 4096;
constexpr int kCqPerQp = static_cast<int>(kSendDepth + kRecvDepth);
// AFMESH_NET_MORE is a hint this module ignores: every request is posted (and its doorbell rung) at once.

template <class T>
void erase_all(std::vector<T> &items, const T &item) {
    items.erase(std::remove(items.begin(), items.end(), item), items.end());
}

bool set_nonblocking(int fd) {
    const int flags = fcntl(fd, F_GETFL);
    return flags >= 0 && fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
}


// printf into a string: the reasons of refused calls.
__attribute__((format(printf, 1, 2))) std::string format(const char *fmt, ...) {
    char text[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    return text;
}

}  // namespace

int Context::create(afmesh_net_caps *caps, Context **out) {
    std::unique_ptr<Context> context(new Context());
    const int rc = context->open_verbs(caps);
    if (rc == AFMESH_HAL_OK) *out = context.release();
    return rc;
}

int Context::open_verbs(afmesh_net_caps *caps) {
    const char *configured = host_config("AFMESH_IBVERBS_LIBRARY");
    const bool explicit_library = configured != nullptr;
    std::string why;
    verbs_.reset(VerbsLibrary::open(explicit_library ? configured : kDefaultVerbsLibrary, &why));
    if (!verbs_)
        return explicit_library ? host_error(AFMESH_HAL_ERROR, "AFMESH_IBVERBS_LIBRARY=%s: %s", configured, why.c_str())
                                : host_error(AFMESH_HAL_NOT_PRESENT, "%s cannot be loaded (is rdma-core installed?): %s",
                                             kDefaultVerbsLibrary, why.c_str());
    api_ = &verbs_->api();
    const int found = discover(*api_, host_config("AFMESH_NET_DEVICES"), &discovery_, &why);
    if (found != AFMESH_HAL_OK) return host_error(found, "%s", why.c_str());
    for (const std::string &line : discovery_.found) host_log(AFMESH_LOG_INFO, "%s", line.c_str());

    ibv_context *device = discovery_.context;
    fabric_.api = api_;
    fabric_.port = discovery_.choice;
    fabric_.pd = api_->alloc_pd(device);
    if (!fabric_.pd) return host_error(AFMESH_HAL_ERROR, "ibv_alloc_pd: %s", strerror(errno));
    channel_ = api_->create_comp_channel(device);
    if (!channel_) return host_error(AFMESH_HAL_ERROR, "ibv_create_comp_channel: %s", strerror(errno));
    cq_capacity_ = std::min(kInitialCqSize, discovery_.device_attr.max_cqe);
    fabric_.cq = api_->create_cq(device, cq_capacity_, nullptr, channel_, 0);
    if (!fabric_.cq) return host_error(AFMESH_HAL_ERROR, "ibv_create_cq(%d): %s", cq_capacity_, strerror(errno));
    cq_capacity_ = fabric_.cq->cqe;
    pool_ = std::make_unique<SendPool>(kSendSlots, kMaxSendSize);
    if (!pool_->register_with(*api_, fabric_.pd, &why)) return host_error(AFMESH_HAL_ERROR, "init: %s", why.c_str());
    fabric_.pool = pool_.get();

    if (!set_nonblocking(channel_->fd) || !set_nonblocking(device->async_fd))
        return host_error(AFMESH_HAL_ERROR, "init: fcntl(O_NONBLOCK): %s", strerror(errno));
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (epoll_fd_ < 0 || wake_fd_ < 0) return host_error(AFMESH_HAL_ERROR, "init: epoll/eventfd: %s", strerror(errno));
    if (!watch(channel_->fd, EPOLLIN, &channel_tag_, &why) || !watch(device->async_fd, EPOLLIN, &async_tag_, &why) ||
        !watch(wake_fd_, EPOLLIN, &wake_tag_, &why))
        return host_error(AFMESH_HAL_ERROR, "init: %s", why.c_str());
    if (const int rc = api_->req_notify_cq(fabric_.cq, 0); rc != 0)
        return host_error(AFMESH_HAL_ERROR, "ibv_req_notify_cq: %s", strerror(rc));

    gpudirect_ = probe_gpudirect(*api_);
    side_host_ = side_channel_host(fabric_.port, &side_source_);

    // RC delivers one QP's writes and sends in posting order.
    caps->flags = AFMESH_NET_CAP_ORDERED | AFMESH_NET_CAP_WAIT_FD;
    caps->imm_bytes = sizeof(uint32_t);
    caps->max_inline = kMaxInline;
    caps->mem_kinds = gpudirect_.mem_kinds();
    caps->max_send_size = kMaxSendSize;
    caps->recv_depth = kRecvDepth;
    caps->max_addr_size = kAddressSize;
    caps->max_write_size = fabric_.port.max_msg_size;
    caps->max_write_segs = kMaxWriteSegs;
    caps->eager_send_size = kEagerSendSize;
    return AFMESH_HAL_OK;
}

Context::~Context() {
    for (Connection *conn : connections_) delete conn;
    for (Connection *conn : closed_) delete conn;
    {
        MutexLock lock(&regions_mu_);
        for (Registration *r : regions_) {
            api_->dereg_mr(r->mr);
            delete r;
        }
    }
    pool_.reset();
    if (fabric_.cq) api_->destroy_cq(fabric_.cq);
    if (channel_) api_->destroy_comp_channel(channel_);
    if (fabric_.pd) api_->dealloc_pd(fabric_.pd);
    if (discovery_.context) api_->close_device(discovery_.context);
    if (listen_fd_ >= 0) ::close(listen_fd_);
    if (wake_fd_ >= 0) ::close(wake_fd_);
    if (epoll_fd_ >= 0) ::close(epoll_fd_);
}

bool Context::watch(int fd, uint32_t events, void *tag, std::string *why) {
    epoll_event watch{};
    watch.events = events;
    watch.data.ptr = tag;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &watch) == 0) return true;
    *why = std::string("epoll_ctl: ") + strerror(errno);
    return false;
}

void Context::set_interest(Connection *conn, uint32_t events) {
    if (conn->fd() < 0 || conn->interest == events) return;
    epoll_event watch{};
    watch.events = events;
    watch.data.ptr = conn;
    const int op = conn->interest == 0 ? EPOLL_CTL_ADD : events == 0 ? EPOLL_CTL_DEL : EPOLL_CTL_MOD;
    if (epoll_ctl(epoll_fd_, op, conn->fd(), &watch) != 0)
        host_log(AFMESH_LOG_WARN, "epoll_ctl on the side channel to %s: %s", conn->peer().c_str(), strerror(errno));
    conn->interest = events;
}

// Every QP's queues complete into the one CQ, which must never overflow:
// grow it before a QP that could overflow it exists.
bool Context::reserve_cq(std::string *why) {
    const int needed = cq_reserved_ + kCqPerQp;
    if (needed > cq_capacity_) {
        const int size = std::max(needed, std::min(2 * cq_capacity_, discovery_.device_attr.max_cqe));
        if (size < needed) {
            *why = "the completion queue is at the device's limit of " +
                   std::to_string(discovery_.device_attr.max_cqe) + " entries";
            return false;
        }
        if (const int rc = api_->resize_cq(fabric_.cq, size); rc != 0) {
            *why = "ibv_resize_cq(" + std::to_string(size) + "): " + strerror(rc);
            return false;
        }
        cq_capacity_ = fabric_.cq->cqe;
    }
    cq_reserved_ = needed;
    return true;
}

void Context::release_cq() { cq_reserved_ -= kCqPerQp; }

int Context::listen(void *addr, size_t *addr_len) {
    if (!addr || !addr_len) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "listen: null address buffer");
    if (*addr_len < kAddressSize)
        return host_error(AFMESH_HAL_INVALID_ARGUMENT, "listen: the address needs %zu bytes, the buffer has %zu",
                          kAddressSize, *addr_len);
    MutexLock lock(&progress_mu_);
    if (listen_fd_ >= 0) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "listen: this context already listens");
    std::string why;
    const int fd = open_listener(side_host_, &listen_address_, &why);
    if (fd < 0 || !watch(fd, EPOLLIN, &listen_tag_, &why)) {
        if (fd >= 0) ::close(fd);
        return host_error(AFMESH_HAL_ERROR, "listen: side channel on %s: %s", format_sockaddr(side_host_).c_str(),
                          why.c_str());
    }
    listen_fd_ = fd;
    EndpointAddress address;
    address.side_channel = listen_address_;
    address.link = fabric_.port.roce ? kLinkEthernet : kLinkInfiniBand;
    address.lid = fabric_.port.lid;
    address.gid = fabric_.port.gid;
    encode_address(address, static_cast<uint8_t *>(addr));
    *addr_len = kAddressSize;
    host_log(AFMESH_LOG_INFO, "side channel listens on %s", format_sockaddr(listen_address_).c_str());
    return AFMESH_HAL_OK;
}

int Context::connect(const void *addr, size_t addr_len, afmesh_net_conn **out) {
    if (!out) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "connect: null connection pointer");
    EndpointAddress peer;
    std::string why;
    if (!decode_address(addr, addr_len, &peer, &why))
        return host_error(AFMESH_HAL_INVALID_ARGUMENT, "connect: %s", why.c_str());
    const uint8_t local_link = fabric_.port.roce ? kLinkEthernet : kLinkInfiniBand;
    if (peer.link != local_link)
        return host_error(AFMESH_HAL_INVALID_ARGUMENT, "connect: the peer's port is %s, this context's %s is %s",
                          peer.link == kLinkEthernet ? "RoCE" : "InfiniBand", fabric_.port.device.c_str(),
                          local_link == kLinkEthernet ? "RoCE" : "InfiniBand");
    const std::string name = format_sockaddr(peer.side_channel);
    MutexLock lock(&progress_mu_);
    if (!reserve_cq(&why)) return host_error(AFMESH_HAL_NO_MEMORY, "connect to %s: %s", name.c_str(), why.c_str());
    const int fd = start_connect(peer.side_channel, &why);
    if (fd < 0) {
        release_cq();
        return host_error(AFMESH_HAL_PEER_FAILED, "connect to %s: %s", name.c_str(), why.c_str());
    }
    auto conn = std::make_unique<Connection>(fabric_, fd, Connection::State::kDialing, name);
    if (!conn->create_qp(&why)) {
        release_cq();
        return host_error(AFMESH_HAL_NO_MEMORY, "connect to %s: %s", name.c_str(), why.c_str());
    }
    conn->visible = true;
    by_qpn_[conn->qpn()] = conn.get();
    connections_.insert(conn.get());
    *out = conn->handle();
    // A connect that completed at once (loopback, a near peer) sends its
    // REQUEST now, so the listener can set up without waiting for our poll().
    pollfd ready{fd, POLLOUT, 0};
    if (::poll(&ready, 1, 0) == 1)
        send_request(conn.release());
    else
        set_interest(conn.release(), EPOLLOUT | EPOLLIN);
    return AFMESH_HAL_OK;
}

int Context::accept(afmesh_net_conn **out) {
    if (!out) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "accept: null connection pointer");
    MutexLock lock(&progress_mu_);
    if (listen_fd_ < 0) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "accept: the context does not listen");
    if (incoming_.empty()) return AFMESH_HAL_AGAIN;
    Connection *conn = incoming_.front();
    incoming_.pop_front();
    if (incoming_.empty()) incoming_announced_ = false;
    conn->visible = true;
    if (conn->state() == Connection::State::kFailed)
        failed_.push_back(conn);
    else if (!conn->early.empty())
        replay_.push_back(conn);
    if (!failed_.empty() || !replay_.empty()) wake();
    *out = conn->handle();
    return AFMESH_HAL_OK;
}

int Context::close(afmesh_net_conn *handle) {
    Connection *conn = Connection::from(handle);
    MutexLock lock(&progress_mu_);
    if (!handle || !connections_.count(conn) || !conn->visible)
        return host_error(AFMESH_HAL_INVALID_ARGUMENT, "close: not an open connection of this context");
    forget(conn);
    closed_.push_back(conn);
    return AFMESH_HAL_OK;
}

// Removes `conn` from every list and destroys its QP and socket, so no later event names it.
void Context::forget(Connection *conn) {
    connections_.erase(conn);
    if (conn->qpn() != 0) {
        by_qpn_.erase(conn->qpn());
        release_cq();
    }
    incoming_.erase(std::remove(incoming_.begin(), incoming_.end(), conn), incoming_.end());
    erase_all(connected_, conn);
    erase_all(failed_, conn);
    erase_all(replay_, conn);
    reposts_.erase(std::remove_if(reposts_.begin(), reposts_.end(), [&](const auto &r) { return r.first == conn; }),
                   reposts_.end());
    stash_.erase(std::remove_if(stash_.begin(), stash_.end(), [&](const ibv_wc &wc) { return wc.qp_num == conn->qpn(); }),
                 stash_.end());
    set_interest(conn, 0);
    conn->shut();
}

// Fails `conn` once. A connection nobody holds yet is dropped quietly (its
// dialer hears of it through the side channel); one in incoming_ keeps its
// failure for when it is accepted.
void Context::fail(Connection *conn, int status, const std::string &reason) {
    const bool in_incoming = std::find(incoming_.begin(), incoming_.end(), conn) != incoming_.end();
    if (!conn->fail(status, reason)) return;
    set_interest(conn, 0);
    if (conn->visible) {
        host_log(AFMESH_LOG_INFO, "connection to %s failed: %s", conn->peer().c_str(), reason.c_str());
        failed_.push_back(conn);
        wake();
    } else if (!in_incoming) {
        host_log(AFMESH_LOG_INFO, "dropping a connection from %s during set-up: %s", conn->peer().c_str(),
                 reason.c_str());
        forget(conn);
        delete conn;
    }
}

int Context::mem_register(void *ptr, size_t bytes, const afmesh_net_mem *mem, uint32_t access, afmesh_net_mr **mr,
                          afmesh_net_rkey *rkey) {
    const char *kind = mem_kind_name(mem->kind);
    if (mem->kind >= 32 || !(gpudirect_.mem_kinds() & AFMESH_MEM_BIT(mem->kind)))
        return host_error(AFMESH_HAL_NOT_SUPPORTED,
                          "mem_register: %s memory cannot be registered with %s (no dma-buf registration or "
                          "peer-memory client for it); stage it through host memory",
                          kind, fabric_.port.device.c_str());
    // Remote write needs local write too (a verbs rule).
    const int flags = (access & AFMESH_NET_ACCESS_REMOTE_WRITE) ? IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE : 0;
    ibv_mr *region = nullptr;
    const char *how = "ibv_reg_mr";
    if (mem->kind != AFMESH_MEM_HOST && mem->dmabuf_fd >= 0 && api_->reg_dmabuf_mr) {
        how = "ibv_reg_dmabuf_mr";
        region = api_->reg_dmabuf_mr(fabric_.pd, mem->dmabuf_offset, bytes, reinterpret_cast<uintptr_t>(ptr),
                                     mem->dmabuf_fd, flags);
    } else if (mem->kind == AFMESH_MEM_HOST || gpudirect_.peer_memory_for(mem->kind)) {
        region = api_->reg_mr(fabric_.pd, ptr, bytes, flags);
    } else {
        return host_error(AFMESH_HAL_NOT_SUPPORTED,
                          "mem_register: %s memory needs a dma-buf (mem.dmabuf_fd) here: no peer-memory client", kind);
    }
    if (!region)
        return host_error(errno == ENOMEM ? AFMESH_HAL_NO_MEMORY : AFMESH_HAL_ERROR, "mem_register: %s(%zu bytes of %s): %s",
                          how, bytes, kind, strerror(errno));
    auto registration = std::make_unique<Registration>(Registration{region, access});
    {
        MutexLock lock(&regions_mu_);
        regions_.insert(registration.get());
    }
    rkey->key = region->rkey;
    rkey->addr = reinterpret_cast<uintptr_t>(ptr);  // remote writes address the region by virtual address
    *mr = reinterpret_cast<afmesh_net_mr *>(registration.release());
    return AFMESH_HAL_OK;
}

int Context::mem_deregister(afmesh_net_mr *handle) {
    auto *registration = reinterpret_cast<Registration *>(handle);
    {
        MutexLock lock(&regions_mu_);
        if (!handle || !regions_.erase(registration))
            return host_error(AFMESH_HAL_INVALID_ARGUMENT, "mem_deregister: not a registration of this context");
    }
    const int rc = api_->dereg_mr(registration->mr);
    delete registration;
    if (rc != 0) return host_error(AFMESH_HAL_ERROR, "ibv_dereg_mr: %s", strerror(rc));
    return AFMESH_HAL_OK;
}

int Context::prepare_write(const void *src, uint64_t bytes, afmesh_net_mr *src_mr, uint64_t total,
                           const afmesh_net_rkey *dst, uint64_t dst_offset, WriteSegment *seg, std::string *why) {
    if (dst->addr > UINT64_MAX - bytes || dst_offset > UINT64_MAX - dst->addr - bytes) {
        *why = format("%" PRIu64 " bytes at offset %" PRIu64 " overflow", bytes, dst_offset);
        return AFMESH_HAL_INVALID_ARGUMENT;
    }
    seg->src = src;
    seg->bytes = static_cast<uint32_t>(bytes);  // within max_msg_sz, a 32-bit size
    seg->lkey = 0;
    seg->remote_addr = dst->addr + dst_offset;
    seg->rkey = static_cast<uint32_t>(dst->key);
    if (total <= kMaxInline) return AFMESH_HAL_OK;
    if (!src_mr) {
        *why = format("a %" PRIu64 "-byte write (above max_inline %" PRIu32 ") needs its source registration", total,
                      kMaxInline);
        return AFMESH_HAL_INVALID_ARGUMENT;
    }
    auto *registration = reinterpret_cast<Registration *>(src_mr);
    MutexLock lock(&regions_mu_);
    if (!regions_.count(registration)) {
        *why = "src_mr is not a live registration";
        return AFMESH_HAL_INVALID_ARGUMENT;
    }
    if (!(registration->access & AFMESH_NET_ACCESS_LOCAL)) {
        *why = "the source registration lacks AFMESH_NET_ACCESS_LOCAL";
        return AFMESH_HAL_ACCESS;
    }
    const auto start = reinterpret_cast<uintptr_t>(registration->mr->addr);
    const auto from = reinterpret_cast<uintptr_t>(src);
    if (from < start || from - start > registration->mr->length || bytes > registration->mr->length - (from - start)) {
        *why = format("%" PRIu64 " bytes at %p are not inside the source registration", bytes, src);
        return AFMESH_HAL_ACCESS;
    }
    seg->lkey = registration->mr->lkey;
    return AFMESH_HAL_OK;
}

int Context::write_imm(afmesh_net_conn *conn, const void *src, size_t bytes, afmesh_net_mr *src_mr,
                       const afmesh_net_rkey *dst, uint64_t dst_offset, uint32_t imm, uint32_t flags, uint64_t cookie) {
    if (bytes > fabric_.port.max_msg_size)
        return host_error(AFMESH_HAL_INVALID_ARGUMENT, "write_imm: %zu bytes exceed the port's max_msg_sz %" PRIu32,
                          bytes, fabric_.port.max_msg_size);
    WriteSegment seg;
    std::string why;
    if (const int rc = prepare_write(src, bytes, src_mr, bytes, dst, dst_offset, &seg, &why); rc != AFMESH_HAL_OK)
        return host_error(rc, "write_imm: %s", why.c_str());
    return Connection::from(conn)->write_imm(&seg, 1, imm, flags, cookie, "write_imm");
}

// Every segment is checked before the chain is built, so a refused call posts nothing.
int Context::write_imm_v(afmesh_net_conn *conn, const afmesh_net_write_seg *segs, uint32_t count, uint64_t total,
                         uint32_t imm, uint32_t flags, uint64_t cookie) {
    if (count > kMaxWriteSegs)
        return host_error(AFMESH_HAL_INVALID_ARGUMENT,
                          "write_imm_v: %" PRIu32 " segments exceed max_write_segs %" PRIu32, count, kMaxWriteSegs);
    if (total > fabric_.port.max_msg_size)
        return host_error(AFMESH_HAL_INVALID_ARGUMENT,
                          "write_imm_v: %" PRIu64 " bytes in all exceed the port's max_msg_sz %" PRIu32, total,
                          fabric_.port.max_msg_size);
    WriteSegment chain[kMaxWriteSegs];
    for (uint32_t i = 0; i < count; ++i) {
        const afmesh_net_write_seg &seg = segs[i];
        std::string why;
        if (const int rc = prepare_write(seg.src, seg.bytes, seg.src_mr, total, seg.dst, seg.dst_offset, &chain[i],
                                         &why);
            rc != AFMESH_HAL_OK)
            return host_error(rc, "write_imm_v: segment %" PRIu32 ": %s", i, why.c_str());
    }
    return Connection::from(conn)->write_imm(chain, count, imm, flags, cookie, "write_imm_v");
}

int Context::send(afmesh_net_conn *conn, const void *buf, size_t len, uint32_t flags, uint64_t cookie) {
    if (len > kMaxSendSize)
        return host_error(AFMESH_HAL_INVALID_ARGUMENT, "send: %zu bytes exceed max_send_size %" PRIu32, len,
                          kMaxSendSize);
    return Connection::from(conn)->send(buf, len, flags, cookie);
}

int Context::describe(char *buf, size_t len) {
    std::string text = "verbs library: " + verbs_->path() + "\n";
    for (const std::string &line : discovery_.found) text += line + "\n";
    text += "side channel (connection set-up and liveness only): " + format_sockaddr(side_host_) + ", from " +
            side_source_ + "\n";
    text += "RC QPs: " + std::to_string(kSendDepth) + " send / " + std::to_string(kRecvDepth) +
            " receive work requests, inline up to " + std::to_string(kMaxInline) + " B, messages up to " +
            std::to_string(kMaxSendSize) + " B, path MTU " + mtu_name(fabric_.port.mtu) + "\n";
    text += gpudirect_.describe();
    snprintf(buf, len, "%s", text.c_str());
    return AFMESH_HAL_OK;
}

}  // namespace afmesh::ibverbs
