// SPDX-License-Identifier: Apache-2.0
// Context's progress half: poll(), arm(), and what each completion means.
#include <arpa/inet.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "context.h"
#include "net_host.h"

namespace afmesh::ibverbs {
namespace {

// Access and protection errors are the peer's or the caller's fault with
// memory; every other completion error means the connection is unusable.
int status_of(ibv_wc_status status) {
    switch (status) {
    case IBV_WC_LOC_ACCESS_ERR:
    case IBV_WC_LOC_PROT_ERR:
    case IBV_WC_REM_ACCESS_ERR:
    case IBV_WC_MW_BIND_ERR: return AFMESH_HAL_ACCESS;
    default: return AFMESH_HAL_PEER_FAILED;
    }
}

}  // namespace

int Context::poll(afmesh_net_event *events, int max) {
    if (max < 0 || (max > 0 && !events))
        return host_error(AFMESH_HAL_INVALID_ARGUMENT, "poll: need an array for max >= 0 events");
    MutexLock lock(&progress_mu_);
    sleeping_.store(false, std::memory_order_seq_cst);
    // The previous poll's events are stale now: free what they pointed into.
    for (Connection *conn : closed_) delete conn;
    closed_.clear();
    for (const auto &[conn, slot] : reposts_) {
        std::string why;
        if (conn->state() != Connection::State::kFailed && !conn->repost(slot, &why))
            fail(conn, AFMESH_HAL_ERROR, why);
    }
    reposts_.clear();

    epoll_event ready[kEpollBatch];
    const int n = epoll_wait(epoll_fd_, ready, kEpollBatch, 0);
    fabric_.counters.add(kEpollWaitCalls);
    if (n < 0 && errno != EINTR) return host_error(AFMESH_HAL_ERROR, "poll: epoll_wait: %s", strerror(errno));
    for (int i = 0; i < n; ++i) dispatch(ready[i].data.ptr, ready[i].events);

    EventSink sink(events, max);
    replay_early(sink);
    reap(sink);
    report(sink);
    return sink.count();
}

void Context::dispatch(void *tag, uint32_t events) {
    if (tag == &wake_tag_) {
        uint64_t count;
        [[maybe_unused]] ssize_t n = read(wake_fd_, &count, sizeof count);
        fabric_.counters.add(kEventfdCalls);
    } else if (tag == &channel_tag_) {
        drain_channel();
    } else if (tag == &async_tag_) {
        handle_async_events();
    } else if (tag == &listen_tag_) {
        accept_side_channels();
    } else if (auto *conn = static_cast<Connection *>(tag); connections_.count(conn)) {
        progress_handshake(conn, events);  // (one failed by an earlier event of this batch may be gone)
    }
}

// Consumes the channel's notifications (acknowledged at once: destroy_cq
// waits for every one) so the level-triggered fd quiets; re-armed by arm().
void Context::drain_channel() {
    ibv_cq *cq = nullptr;
    void *cq_context = nullptr;
    unsigned count = 0;
    while (api_->get_cq_event(channel_, &cq, &cq_context) == 0) ++count;
    fabric_.counters.add(kCqEventReads, count + 1);  // the last read finds nothing
    if (count) api_->ack_cq_events(fabric_.cq, count);
}

void Context::handle_async_events() {
    ibv_async_event event;
    while (api_->get_async_event(discovery_.context, &event) == 0) {
        const char *name = api_->event_type_str(event.event_type);
        switch (event.event_type) {
        case IBV_EVENT_QP_FATAL:
        case IBV_EVENT_QP_REQ_ERR:
        case IBV_EVENT_QP_ACCESS_ERR: {
            const auto it = by_qpn_.find(event.element.qp->qp_num);
            host_log(AFMESH_LOG_WARN, "async event %s on QP %" PRIu32, name, event.element.qp->qp_num);
            if (it != by_qpn_.end())
                fail(it->second, event.event_type == IBV_EVENT_QP_ACCESS_ERR ? AFMESH_HAL_ACCESS : AFMESH_HAL_PEER_FAILED,
                     std::string("the QP reported ") + name);
            break;
        }
        case IBV_EVENT_CQ_ERR:
        case IBV_EVENT_DEVICE_FATAL:
            host_log(AFMESH_LOG_ERROR, "async event %s on %s: every connection fails", name,
                     fabric_.port.device.c_str());
            for (Connection *conn : std::vector<Connection *>(connections_.begin(), connections_.end()))
                fail(conn, AFMESH_HAL_ERROR, std::string("the device reported ") + name);
            break;
        default: host_log(AFMESH_LOG_INFO, "async event %s on %s", name, fabric_.port.device.c_str()); break;
        }
        api_->ack_async_event(&event);
    }
}

// Takes up to the sink's room of completions (each makes at most one
// event), first those arm() took.
void Context::reap(EventSink &sink) {
    while (!stash_.empty() && !sink.full()) {
        const ibv_wc wc = stash_.front();
        stash_.pop_front();
        complete(wc, sink);
    }
    ibv_wc batch[32];
    while (!sink.full()) {
        const int want = std::min<int>(sink.room(), 32);
        const int n = api_->poll_cq(fabric_.cq, want, batch);
        fabric_.counters.add(kPollCqCalls);
        if (n < 0) {
            host_log(AFMESH_LOG_ERROR, "ibv_poll_cq failed: %d", n);
            return;
        }
        for (int i = 0; i < n; ++i) complete(batch[i], sink);
        if (n < want) return;  // drained
    }
}

void Context::complete(const ibv_wc &wc, EventSink &sink) {
    const auto it = by_qpn_.find(wc.qp_num);
    if (it == by_qpn_.end()) return;  // a connection closed since
    Connection *conn = it->second;
    if (conn->state() == Connection::State::kFailed) return;  // flushes after the failure
    if (wc.status != IBV_WC_SUCCESS) {
        // The opcode of an error completion is undefined; the wr_id says which queue.
        const char *queue = (wc.wr_id & kRecvTag) ? "receive" : "send";
        char reason[256];
        snprintf(reason, sizeof reason, "%s completion failed: %s (status %d, vendor error 0x%x)", queue,
                 api_->wc_status_str(wc.status), static_cast<int>(wc.status), wc.vendor_err);
        return fail(conn, status_of(wc.status), reason);
    }
    if (!conn->visible) {
        conn->early.push_back(wc);
        return;
    }
    if (!(wc.wr_id & kRecvTag)) {
        std::string why;
        bool ok = false;
        conn->on_send_completion(wc, sink, &why, &ok);
        if (!ok) fail(conn, AFMESH_HAL_ERROR, why);
        return;
    }
    const auto slot = static_cast<uint32_t>(wc.wr_id & ~kRecvTag);
    if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
        sink.add(AFMESH_NET_EV_IMM, conn->handle()).imm = ntohl(wc.imm_data);
        std::string why;
        if (!conn->repost(slot, &why)) fail(conn, AFMESH_HAL_ERROR, why);
        return;
    }
    afmesh_net_event &event = sink.add(AFMESH_NET_EV_RECV, conn->handle());
    event.data = conn->recv_slot(slot);
    event.len = wc.byte_len;
    reposts_.emplace_back(conn, slot);  // once the caller is done with the data
}

void Context::replay_early(EventSink &sink) {
    size_t done = 0;
    for (; done < replay_.size() && !sink.full(); ++done) {
        Connection *conn = replay_[done];
        size_t used = 0;
        for (; used < conn->early.size() && !sink.full(); ++used) complete(conn->early[used], sink);
        conn->early.erase(conn->early.begin(), conn->early.begin() + static_cast<ptrdiff_t>(used));
        if (!conn->early.empty()) break;
    }
    replay_.erase(replay_.begin(), replay_.begin() + static_cast<ptrdiff_t>(done));
}

// Set-up results and failures, after the completions reaped in this poll,
// which precede the failure of their connection.
void Context::report(EventSink &sink) {
    size_t n = 0;
    for (; n < connected_.size() && !sink.full(); ++n) sink.add(AFMESH_NET_EV_CONNECTED, connected_[n]->handle());
    connected_.erase(connected_.begin(), connected_.begin() + static_cast<ptrdiff_t>(n));
    for (n = 0; n < failed_.size() && !sink.full(); ++n) {
        afmesh_net_event &event = sink.add(AFMESH_NET_EV_CONN_ERROR, failed_[n]->handle());
        event.status = failed_[n]->failure_status();
        event.reason = failed_[n]->failure_reason();
    }
    failed_.erase(failed_.begin(), failed_.begin() + static_cast<ptrdiff_t>(n));
    if (!incoming_.empty() && !incoming_announced_ && !sink.full()) {
        sink.add(AFMESH_NET_EV_INCOMING, nullptr);
        incoming_announced_ = true;
    }
}

int Context::wait_fd(int *fd) const {
    *fd = epoll_fd_;
    return AFMESH_HAL_OK;
}

// The ibv_req_notify_cq pattern: arm the CQ, then look once more, since a
// completion that landed before the arm raises no notification. What that
// look finds is kept for the next poll().
int Context::arm() {
    MutexLock lock(&progress_mu_);
    sleeping_.store(true, std::memory_order_seq_cst);
    drain_channel();
    fabric_.counters.add(kReqNotifyCalls);
    if (const int rc = api_->req_notify_cq(fabric_.cq, 0); rc != 0) {
        sleeping_.store(false, std::memory_order_seq_cst);
        return host_error(AFMESH_HAL_ERROR, "ibv_req_notify_cq: %s", strerror(rc));
    }
    ibv_wc batch[32];
    int n;
    while ((n = api_->poll_cq(fabric_.cq, 32, batch)) > 0) {
        fabric_.counters.add(kPollCqCalls);
        stash_.insert(stash_.end(), batch, batch + n);
    }
    fabric_.counters.add(kPollCqCalls);  // the one that found the CQ empty
    const bool pending = !stash_.empty() || !connected_.empty() || !failed_.empty() || !replay_.empty() ||
                         !reposts_.empty() || (!incoming_.empty() && !incoming_announced_);
    if (!pending) return AFMESH_HAL_OK;
    sleeping_.store(false, std::memory_order_seq_cst);
    return AFMESH_HAL_AGAIN;
}

void Context::wake() {
    if (!sleeping_.exchange(false, std::memory_order_seq_cst)) return;
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(wake_fd_, &one, sizeof one);  // fails only when already signalled
    fabric_.counters.add(kEventfdCalls);
}

}  // namespace afmesh::ibverbs
