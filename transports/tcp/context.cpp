// SPDX-License-Identifier: Apache-2.0
#include "context.h"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>

#include "address.h"
#include "connection.h"
#include "mem_kind_names.h"
#include "net_host.h"
#include "settings.h"
#include "socket_io.h"
#include "tcp/wire.h"

namespace afmesh::tcp {
namespace {

// How long a closed connection waits for its peer to close too (Connection::close).
constexpr auto kLinger = std::chrono::seconds(2);

// The caller's limit is the writer's registered region; anything the
// address space can hold fits the frame's 64-bit length.
constexpr uint64_t kMaxWriteSize = SIZE_MAX;

bool is_resource_shortage(int error) {
    return error == EMFILE || error == ENFILE || error == ENOBUFS || error == ENOMEM;
}

template <class T>
void erase_all(std::vector<T> &items, const T &item) {
    items.erase(std::remove(items.begin(), items.end(), item), items.end());
}

// A connection owning `fd`; the descriptor is closed even when there is no memory for it.
std::unique_ptr<Connection> make_connection(Context &context, int fd, Connection::State state,
                                            const SocketAddress &peer) {
    try {
        return std::make_unique<Connection>(context, fd, state, peer);
    } catch (...) {
        ::close(fd);
        throw;
    }
}

// Posts one operation's frames; AFMESH_NET_SIGNAL in `flags` asks for `done` once the last is sent.
int post_frames(afmesh_net_conn *conn, OutgoingFrame *frames, size_t count, uint32_t done, uint32_t flags,
                uint64_t cookie) {
    return Connection::from(conn)->post(frames, count, (flags & AFMESH_NET_SIGNAL) ? done : 0, cookie,
                                        (flags & AFMESH_NET_MORE) != 0);
}

}  // namespace

int Context::create(afmesh_net_caps *caps, Context **out) {
    const int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    if (epoll_fd < 0) return host_error(AFMESH_HAL_ERROR, "init: epoll_create1: %s", strerror(errno));
    const int wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wake_fd < 0) {
        const int error = errno;
        ::close(epoll_fd);
        return host_error(AFMESH_HAL_ERROR, "init: eventfd: %s", strerror(error));
    }
    std::unique_ptr<Context> context(new Context(epoll_fd, wake_fd));
    epoll_event watch{};
    watch.events = EPOLLIN;
    watch.data.ptr = const_cast<int *>(&context->wake_fd_);
    if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, wake_fd, &watch) != 0)
        return host_error(AFMESH_HAL_ERROR, "init: epoll_ctl: %s", strerror(errno));

    caps->flags = AFMESH_NET_CAP_ORDERED | AFMESH_NET_CAP_WAIT_FD;  // one byte stream per connection
    caps->imm_bytes = sizeof(uint32_t);
    caps->max_inline = kMaxInline;
    caps->mem_kinds = AFMESH_MEM_BIT(AFMESH_MEM_HOST);
    caps->max_send_size = kMaxSendSize;
    // The receiver never drops: TCP flow control holds a sender back. What
    // bounds a connection is its sender's queue.
    caps->recv_depth = kSendQueueDepth;
    caps->max_addr_size = kAddressBlobSize;
    caps->max_write_size = kMaxWriteSize;
    caps->max_write_segs = kMaxWriteSegs;
    caps->eager_send_size = kEagerSendSize;
    *out = context.release();
    return AFMESH_HAL_OK;
}

Context::~Context() {
    for (Connection *conn : connections_) delete conn;
    for (const Lingering &l : lingering_) delete l.conn;
    for (Connection *conn : closed_) delete conn;
    regions_.clear();
    if (listen_fd_ >= 0) ::close(listen_fd_);
    if (spare_fd_ >= 0) ::close(spare_fd_);
    ::close(wake_fd_);
    ::close(epoll_fd_);
}

int Context::listen(void *addr, size_t *addr_len) {
    if (!addr || !addr_len) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "listen: null address buffer");
    if (*addr_len < kAddressBlobSize)
        return host_error(AFMESH_HAL_INVALID_ARGUMENT, "listen: the address needs %zu bytes, the buffer has %zu",
                          kAddressBlobSize, *addr_len);
    MutexLock lock(&progress_mu_);
    if (listen_fd_ >= 0) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "listen: this context already listens");
    const char *bind_host = host_config("AFMESH_TCP_BIND");
    if (!bind_host) bind_host = kDefaultBind;
    SocketAddress bound;
    Reason why;
    const int fd = open_listener(bind_host, &bound, &why);
    if (fd < 0) return host_error(AFMESH_HAL_ERROR, "listen (AFMESH_TCP_BIND=%s): %s", bind_host, why.text);
    epoll_event watch{};
    watch.events = EPOLLIN;
    watch.data.ptr = &listen_fd_;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &watch) != 0) {
        const int error = errno;
        ::close(fd);
        return host_error(AFMESH_HAL_ERROR, "listen: epoll_ctl: %s", strerror(error));
    }
    listen_fd_ = fd;
    spare_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
    encode_address(bound, static_cast<uint8_t *>(addr));
    *addr_len = kAddressBlobSize;
    host_log(AFMESH_LOG_INFO, "listening on %s", format_address(bound).text);
    if (is_wildcard(bound))
        host_log(AFMESH_LOG_WARN,
                 "AFMESH_TCP_BIND=%s listens on every interface but advertises the wildcard address, which only "
                 "this host can reach; set it to an address peers can route to",
                 bind_host);
    return AFMESH_HAL_OK;
}

int Context::connect(const void *addr, size_t addr_len, afmesh_net_conn **out) {
    if (!out) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "connect: null connection pointer");
    SocketAddress peer;
    Reason why;
    if (!decode_address(addr, addr_len, &peer, &why))
        return host_error(AFMESH_HAL_INVALID_ARGUMENT, "connect: %s", why.text);
    const int fd = socket(peer.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return host_error(is_resource_shortage(errno) ? AFMESH_HAL_NO_MEMORY : AFMESH_HAL_ERROR, "connect: socket: %s",
                          strerror(errno));
    set_no_delay(fd);
    // A non-blocking connect interrupted by a signal carries on in the background, like EINPROGRESS.
    const bool started = ::connect(fd, peer.get(), peer.length) == 0 || errno == EINPROGRESS || errno == EINTR;
    counters_.add(kConnectCalls);
    const int error = errno;
    auto conn = make_connection(*this, fd, Connection::State::kConnecting, peer);
    MutexLock lock(&progress_mu_);
    connections_.insert(conn.get());
    if (started) {
        conn->watch();
    } else {
        Failure failure{AFMESH_HAL_PEER_FAILED, {}};
        failure.reason.format("connect to %s failed: %s", conn->peer(), strerror(error));
        conn->fail(failure);
    }
    *out = conn.release()->handle();
    return AFMESH_HAL_OK;
}

int Context::accept(afmesh_net_conn **out) {
    if (!out) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "accept: null connection pointer");
    MutexLock lock(&progress_mu_);
    if (listen_fd_ < 0) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "accept: the context does not listen");
    if (incoming_.empty()) accept_pending();
    if (incoming_.empty()) return AFMESH_HAL_AGAIN;
    Connection *conn = incoming_.front();
    incoming_.pop_front();
    if (incoming_.empty()) incoming_announced_ = false;
    conn->watch();
    *out = conn->handle();
    return AFMESH_HAL_OK;
}

// Takes every connection the kernel has completed. They wait, unread, in
// incoming_ until the caller accepts them, so no event ever names a
// connection the caller has not seen.
void Context::accept_pending() {
    for (;;) {
        SocketAddress peer;
        peer.length = sizeof peer.storage;
        const int fd = accept4(listen_fd_, peer.get(), &peer.length, SOCK_NONBLOCK | SOCK_CLOEXEC);
        counters_.add(kAcceptCalls);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            if (errno == EMFILE || errno == ENFILE) {
                // Linux fails accept for want of a descriptor before it looks at the queue.
                if (shed_connection_without_descriptors(errno)) continue;
            } else if (!would_block(errno)) {
                host_log(AFMESH_LOG_WARN, "accept: %s", strerror(errno));
            }
            return;
        }
        set_no_delay(fd);
        auto conn = make_connection(*this, fd, Connection::State::kEstablished, peer);
        connections_.insert(conn.get());
        incoming_.push_back(conn.release());
    }
}

// Out of descriptors: the spare one makes room to take a waiting connection
// off the listener and close it, the classic way out of a busy loop on a
// level-triggered listener; said at most once a second, with the count.
// Returns whether one was taken (more may wait). Without a spare (it could
// not be reopened) the caller's next poll tries again.
bool Context::shed_connection_without_descriptors(int error) {
    bool shed = false;
    if (spare_fd_ >= 0) {
        ::close(spare_fd_);
        const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0) {
            ::close(fd);
            ++shed_;
            shed = true;
        }
        spare_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
    }
    const auto now = std::chrono::steady_clock::now();
    if ((shed || spare_fd_ < 0) && now >= next_shortage_log_) {
        next_shortage_log_ = now + std::chrono::seconds(1);
        host_log(AFMESH_LOG_WARN, "accept: %s: %llu incoming connection(s) dropped so far for want of descriptors",
                 strerror(error), static_cast<unsigned long long>(shed_));
    }
    return shed;
}

// Tells the caller, once, that connections wait for accept(); announced
// again only after accept() has drained them, so a full event array never
// loses the notice.
void Context::announce_incoming(EventSink &sink) {
    if (incoming_.empty() || incoming_announced_ || sink.full()) return;
    sink.add(AFMESH_NET_EV_INCOMING, nullptr);
    incoming_announced_ = true;
}

int Context::close(afmesh_net_conn *handle) {
    Connection *conn = Connection::from(handle);
    MutexLock lock(&progress_mu_);
    if (!handle || !connections_.erase(conn))
        return host_error(AFMESH_HAL_INVALID_ARGUMENT, "close: not an open connection of this context");
    forget(conn);
    if (conn->close())
        lingering_.push_back({conn, std::chrono::steady_clock::now() + kLinger});
    else
        closed_.push_back(conn);
    return AFMESH_HAL_OK;
}

// A closed connection's peer has closed too, or the linger is over.
void Context::end_linger(Connection *conn) {
    std::erase_if(lingering_, [conn](const Lingering &l) { return l.conn == conn; });
    closed_.push_back(conn);
}

void Context::expire_lingering() {
    if (lingering_.empty()) return;
    const auto now = std::chrono::steady_clock::now();
    for (size_t i = lingering_.size(); i-- > 0;)
        if (now >= lingering_[i].until) end_linger(lingering_[i].conn);
}

// Removes `conn` from every work list, so no later event names it.
void Context::forget(Connection *conn) {
    erase_all(receive_ready_, conn);
    MutexLock lock(&lists_mu_);
    erase_all(harvest_, conn);
    erase_all(failed_, conn);
}

int Context::mem_register(void *ptr, size_t bytes, const afmesh_net_mem *mem, uint32_t access, afmesh_net_mr **mr,
                          afmesh_net_rkey *rkey) {
    if (mem->kind != AFMESH_MEM_HOST)
        return host_error(AFMESH_HAL_NOT_SUPPORTED,
                          "mem_register: the tcp transport registers host memory only, not %s memory (stage it "
                          "through pinned host memory)",
                          mem_kind_name(mem->kind));
    Region *region = regions_.add(static_cast<uint8_t *>(ptr), bytes, access);
    if (!region) return host_error(AFMESH_HAL_ERROR, "mem_register: no random region id: getrandom: %s", strerror(errno));
    *mr = reinterpret_cast<afmesh_net_mr *>(region);
    rkey->key = region->id();
    rkey->addr = 0;  // writes address the region by offset
    return AFMESH_HAL_OK;
}

int Context::mem_deregister(afmesh_net_mr *mr) {
    if (!mr || !regions_.remove(reinterpret_cast<Region *>(mr)))
        return host_error(AFMESH_HAL_INVALID_ARGUMENT, "mem_deregister: not a registration of this context");
    return AFMESH_HAL_OK;
}

int Context::prepare_write(const void *src, uint64_t bytes, afmesh_net_mr *src_mr, uint64_t total,
                           const afmesh_net_rkey *dst, uint64_t dst_offset, OutgoingFrame *frame, Reason *why) {
    if (dst_offset > UINT64_MAX - bytes) {
        why->format("%" PRIu64 " bytes at offset %" PRIu64 " overflow", bytes, dst_offset);
        return AFMESH_HAL_INVALID_ARGUMENT;
    }
    if (total > kMaxInline) {
        if (!src_mr) {
            why->format("a %" PRIu64 "-byte write (above max_inline %" PRIu32 ") needs its source registration",
                        total, kMaxInline);
            return AFMESH_HAL_INVALID_ARGUMENT;
        }
        frame->source = regions_.find(reinterpret_cast<Region *>(src_mr));
        if (!frame->source) {
            why->format("src_mr is not a live registration");
            return AFMESH_HAL_INVALID_ARGUMENT;
        }
        if (!frame->source->allows(AFMESH_NET_ACCESS_LOCAL)) {
            why->format("the source registration lacks AFMESH_NET_ACCESS_LOCAL");
            return AFMESH_HAL_ACCESS;
        }
        if (!frame->source->contains(src, bytes)) {
            why->format("%" PRIu64 " bytes at %p are not inside the source registration", bytes, src);
            return AFMESH_HAL_ACCESS;
        }
    }
    frame->header.key = dst->key;
    frame->header.offset = dst_offset;
    frame->header.length = bytes;
    frame->payload = src;
    return AFMESH_HAL_OK;
}

int Context::write_imm(afmesh_net_conn *conn, const void *src, size_t bytes, afmesh_net_mr *src_mr,
                       const afmesh_net_rkey *dst, uint64_t dst_offset, uint32_t imm, uint32_t flags, uint64_t cookie) {
    OutgoingFrame frame;
    Reason why;
    if (const int rc = prepare_write(src, bytes, src_mr, bytes, dst, dst_offset, &frame, &why); rc != AFMESH_HAL_OK)
        return host_error(rc, "write_imm: %s", why.text);
    frame.header.type = FrameType::kWriteImm;
    frame.header.imm = imm;
    return post_frames(conn, &frame, 1, AFMESH_NET_EV_WRITE_DONE, flags, cookie);
}

// Every segment is checked before any frame is queued, so a refused call
// posts nothing. No total exceeds kMaxWriteSize (SIZE_MAX, 64 bits): the
// entry has refused those that overflow.
int Context::write_imm_v(afmesh_net_conn *conn, const afmesh_net_write_seg *segs, uint32_t count, uint64_t total,
                         uint32_t imm, uint32_t flags, uint64_t cookie) {
    if (count > kMaxWriteSegs)
        return host_error(AFMESH_HAL_INVALID_ARGUMENT,
                          "write_imm_v: %" PRIu32 " segments exceed max_write_segs %" PRIu32, count, kMaxWriteSegs);
    OutgoingFrame frames[kMaxWriteSegs];
    for (uint32_t i = 0; i < count; ++i) {
        const afmesh_net_write_seg &seg = segs[i];
        Reason why;
        if (const int rc = prepare_write(seg.src, seg.bytes, seg.src_mr, total, seg.dst, seg.dst_offset, &frames[i],
                                         &why);
            rc != AFMESH_HAL_OK)
            return host_error(rc, "write_imm_v: segment %" PRIu32 ": %s", i, why.text);
        frames[i].header.type = FrameType::kWrite;
    }
    FrameHeader &last = frames[count - 1].header;
    last.type = FrameType::kWriteImm;
    last.imm = imm;
    return post_frames(conn, frames, count, AFMESH_NET_EV_WRITE_DONE, flags, cookie);
}

int Context::send(afmesh_net_conn *conn, const void *buf, size_t len, uint32_t flags, uint64_t cookie) {
    if (len > kMaxSendSize)
        return host_error(AFMESH_HAL_INVALID_ARGUMENT, "send: %zu bytes exceed max_send_size %" PRIu32, len,
                          kMaxSendSize);
    OutgoingFrame frame;
    frame.header.type = FrameType::kSend;
    frame.header.length = len;
    frame.payload = buf;
    return post_frames(conn, &frame, 1, AFMESH_NET_EV_SEND_DONE, flags, cookie);
}

int Context::poll(afmesh_net_event *events, int max) {
    if (max < 0 || (max > 0 && !events))
        return host_error(AFMESH_HAL_INVALID_ARGUMENT, "poll: need an array for max >= 0 events");
    MutexLock lock(&progress_mu_);
    sleeping_.store(false, std::memory_order_seq_cst);
    // The previous poll's events are stale now, and with them any pointer into a closed connection.
    for (Connection *conn : closed_) delete conn;
    closed_.clear();

    EventSink sink(events, max);
    scratch_.swap(receive_ready_);
    for (Connection *conn : scratch_) {
        conn->receive_queued = false;
        conn->receiver().reclaim();
        receive(conn, sink, false);
    }
    scratch_.clear();

    const int ready = epoll_wait(epoll_fd_, ready_, kEpollBatch, 0);
    counters_.add(kEpollWaitCalls);
    if (ready < 0 && errno != EINTR) return host_error(AFMESH_HAL_ERROR, "poll: epoll_wait: %s", strerror(errno));
    for (int i = 0; i < ready; ++i) dispatch(ready_[i], sink);

    harvest(sink);
    report_failures(sink);
    announce_incoming(sink);
    expire_lingering();
    return sink.count();
}

void Context::dispatch(const epoll_event &ready, EventSink &sink) {
    if (ready.data.ptr == &wake_fd_) {
        uint64_t count;
        [[maybe_unused]] ssize_t n = read(wake_fd_, &count, sizeof count);
        counters_.add(kEventfdCalls);
        return;
    }
    if (ready.data.ptr == &listen_fd_) {
        accept_pending();
        return;
    }
    auto *conn = static_cast<Connection *>(ready.data.ptr);
    if (conn->state() == Connection::State::kClosed) {
        if (conn->drain()) end_linger(conn);
        return;
    }
    // While connecting, any readiness (including an error) settles the connect.
    if ((ready.events & EPOLLOUT) || conn->state() == Connection::State::kConnecting) conn->on_writable(sink);
    if (ready.events & (EPOLLIN | EPOLLERR | EPOLLHUP)) receive(conn, sink, true);
}

void Context::receive(Connection *conn, EventSink &sink, bool readable) {
    if (conn->state() != Connection::State::kEstablished) return;
    switch (conn->receiver().progress(conn->fd(), conn->handle(), regions_, sink, readable)) {
    case FrameReceiver::Result::kDrained: return;
    case FrameReceiver::Result::kPaused: queue_receive(conn); return;
    case FrameReceiver::Result::kFailed: conn->fail(conn->receiver().failure()); return;
    }
}

void Context::queue_receive(Connection *conn) {
    if (conn->receive_queued) return;
    conn->receive_queued = true;
    receive_ready_.push_back(conn);
}

void Context::queue_harvest(Connection *conn) {
    if (conn->harvest_queued.exchange(true, std::memory_order_acq_rel)) return;
    {
        MutexLock lock(&lists_mu_);
        harvest_.push_back(conn);
    }
    wake();
}

void Context::queue_failure(Connection *conn) {
    {
        MutexLock lock(&lists_mu_);
        failed_.push_back(conn);
    }
    wake();
}

void Context::harvest(EventSink &sink) {
    {
        MutexLock lock(&lists_mu_);
        scratch_.swap(harvest_);
    }
    for (Connection *conn : scratch_) {
        conn->harvest_queued.store(false, std::memory_order_release);
        if (conn->harvest(sink)) queue_harvest(conn);
    }
    scratch_.clear();
}

// Last, so that completions reaped in this poll precede the failure of their connection.
void Context::report_failures(EventSink &sink) {
    MutexLock lock(&lists_mu_);
    size_t reported = 0;
    for (; reported < failed_.size() && !sink.full(); ++reported) {
        Connection *conn = failed_[reported];
        afmesh_net_event &event = sink.add(AFMESH_NET_EV_CONN_ERROR, conn->handle());
        event.status = conn->failure().status;
        event.reason = conn->failure().reason.text;
    }
    failed_.erase(failed_.begin(), failed_.begin() + static_cast<ptrdiff_t>(reported));
}

int Context::wait_fd(int *fd) const {
    *fd = epoll_fd_;
    return AFMESH_HAL_OK;
}

// The fi_trywait pattern. sleeping_ is set before the work lists are
// checked, and posting threads fill a list before they read sleeping_, so
// either arm() sees the work or the poster sees the sleeper and wakes it.
int Context::arm() {
    MutexLock lock(&progress_mu_);
    sleeping_.store(true, std::memory_order_seq_cst);
    bool pending = !receive_ready_.empty() || (!incoming_.empty() && !incoming_announced_);
    {
        MutexLock lists(&lists_mu_);
        pending = pending || !harvest_.empty() || !failed_.empty();
    }
    if (!pending) return AFMESH_HAL_OK;
    sleeping_.store(false, std::memory_order_seq_cst);
    return AFMESH_HAL_AGAIN;
}

int Context::describe(char *buf, size_t len) const {
    const char *bind_host = host_config("AFMESH_TCP_BIND");
    snprintf(buf, len,
             "listens on %s (AFMESH_TCP_BIND)\n"
             "writes up to %u B are copied when posted; larger ones go out straight from the registered source\n"
             "memory kinds: host only\n",
             bind_host ? bind_host : kDefaultBind, kMaxInline);
    return AFMESH_HAL_OK;
}

void Context::wake() {
    if (!sleeping_.load(std::memory_order_seq_cst) || !sleeping_.exchange(false, std::memory_order_seq_cst)) return;
    const uint64_t one = 1;
    // Fails only when the counter is saturated, i.e. already signalled.
    [[maybe_unused]] ssize_t n = write(wake_fd_, &one, sizeof one);
    counters_.add(kEventfdCalls);
}

bool Context::set_interest(int fd, uint32_t from, uint32_t to, Connection *conn) {
    epoll_event watch{};
    watch.events = to;
    watch.data.ptr = conn;
    const int op = from == 0 ? EPOLL_CTL_ADD : to == 0 ? EPOLL_CTL_DEL : EPOLL_CTL_MOD;
    counters_.add(kEpollCtlCalls);
    return epoll_ctl(epoll_fd_, op, fd, &watch) == 0;
}

}  // namespace afmesh::tcp
