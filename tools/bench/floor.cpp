// SPDX-License-Identifier: Apache-2.0
#include "floor.h"

#include <algorithm>
#include <cstring>

#include "byte_codec.h"
#include "engine/clock.h"
#include "log.h"

namespace afmesh::bench {

std::vector<uint8_t> FloorCard::encode() const {
    std::vector<uint8_t> out;
    ByteWriter w(out);
    w.bytes(address.data(), address.size());
    w.u64(rkey.key);
    w.u64(rkey.addr);
    return out;
}

bool FloorCard::decode(const uint8_t *data, size_t len, FloorCard *out) {
    ByteReader r(data, len);
    out->address = r.bytes(4096);
    out->rkey.key = r.u64();
    out->rkey.addr = r.u64();
    return r.ok();
}

Status FloorEndpoint::create(const Config &config, PollMode mode, uint64_t bytes, int peers,
                             std::unique_ptr<FloorEndpoint> *out) {
    std::unique_ptr<FloorEndpoint> ep(new FloorEndpoint());
    if (Status s = select_module(config, AFMESH_MODULE_TRANSPORT, &ep->transport_); !s) return s;
    ep->region_bytes_ = bytes;
    ep->send_buf_.assign(bytes, 0x5a);
    ep->recv_buf_.assign(bytes * static_cast<uint64_t>(std::max(peers, 1)), 0);
    afmesh_net_mem mem{};
    mem.struct_size = sizeof mem;
    mem.kind = AFMESH_MEM_HOST;
    mem.device = -1;
    mem.dmabuf_fd = -1;
    const afmesh_net_ops &ops = ep->transport_->net();
    afmesh_net_rkey unused;
    if (ops.mem_register(ep->transport_->ctx(), ep->send_buf_.data(), bytes, &mem, AFMESH_NET_ACCESS_LOCAL,
                         &ep->send_mr_, &unused) != AFMESH_HAL_OK ||
        ops.mem_register(ep->transport_->ctx(), ep->recv_buf_.data(), ep->recv_buf_.size(), &mem,
                         AFMESH_NET_ACCESS_LOCAL | AFMESH_NET_ACCESS_REMOTE_WRITE, &ep->recv_mr_,
                         &ep->recv_rkey_) != AFMESH_HAL_OK)
        return {Code::kError, "floor: cannot register buffers: " + take_module_error()};
    ep->progress_ = std::make_unique<Progress>(*ep->transport_, mode, adaptive_spin(config, *ep->transport_),
                                               [raw = ep.get()](const afmesh_net_event *e, int n) { raw->dispatch(e, n); });
    if (Status s = ep->progress_->start({}); !s) return s;
    *out = std::move(ep);
    return Status::ok();
}

FloorEndpoint::~FloorEndpoint() {
    if (progress_) progress_->stop();
    if (!transport_) return;
    const afmesh_net_ops &ops = transport_->net();
    for (afmesh_net_conn *c : conns_) ops.close(transport_->ctx(), c);
    if (send_mr_) ops.mem_deregister(transport_->ctx(), send_mr_);
    if (recv_mr_) ops.mem_deregister(transport_->ctx(), recv_mr_);
}

Status FloorEndpoint::serve(int batch_workers, FloorCard *card) {
    batch_workers_ = std::max(batch_workers, 1);
    card->address.resize(transport_->net_caps().max_addr_size);
    size_t len = card->address.size();
    if (transport_->net().listen(transport_->ctx(), card->address.data(), &len) != AFMESH_HAL_OK)
        return {Code::kError, "floor: listen failed: " + take_module_error()};
    card->address.resize(len);
    card->rkey = recv_rkey_;
    serving_ = true;
    return Status::ok();
}

// From the worker's own region, in place (its slot was checked when it arrived).
void FloorEndpoint::answer(afmesh_net_conn *conn, const Peer &peer, uint32_t bytes) {
    // The size comes from the peer: never read past its region.
    const uint64_t n = std::min<uint64_t>(bytes, region_bytes_);
    const uint8_t *region = recv_buf_.data() + peer.slot * region_bytes_;
    if (transport_->net().write_imm(transport_->ctx(), conn, region, n, recv_mr_, &peer.rkey, peer.offset, 0, 0, 0) ==
        AFMESH_HAL_OK)
        operations_.fetch_add(1, std::memory_order_relaxed);
}

// Answers as writes land: every answer owed to a known worker. Batching:
// one answer to each owed worker, while at least batch_workers_ are owed.
void FloorEndpoint::answer_owed() {
    auto owed = [](const Peer &peer) { return peer.known && !peer.owed.empty(); };
    auto num_owed = [&] {
        return std::count_if(peers_.begin(), peers_.end(), [&](const auto &entry) { return owed(entry.second); });
    };
    while (num_owed() >= batch_workers_)
        for (auto &[conn, peer] : peers_)
            if (owed(peer)) {
                answer(conn, peer, peer.owed.front());
                peer.owed.pop_front();
            }
}

void FloorEndpoint::dispatch(const afmesh_net_event *events, int count) {
    const afmesh_net_ops &ops = transport_->net();
    for (int i = 0; i < count; ++i) {
        const afmesh_net_event &ev = events[i];
        switch (ev.type) {
        case AFMESH_NET_EV_INCOMING:
            for (afmesh_net_conn *c = nullptr; ops.accept(transport_->ctx(), &c) == AFMESH_HAL_OK;) conns_.push_back(c);
            break;
        case AFMESH_NET_EV_CONNECTED:
            connected_.fetch_add(1);
            break;
        case AFMESH_NET_EV_RECV: {  // server: a worker says where its answers go
            ByteReader r(ev.data, ev.len);
            Peer &peer = peers_[ev.conn];
            peer.rkey.key = r.u64();
            peer.rkey.addr = r.u64();
            peer.offset = r.u64();
            peer.slot = r.u64();
            peer.known = r.done() && peer.slot < recv_buf_.size() / region_bytes_;
            answer_owed();
            break;
        }
        case AFMESH_NET_EV_IMM:
            if (!serving_) {
                answers_.fetch_add(1);
            } else {
                peers_[ev.conn].owed.push_back(ev.imm);  // the immediate names the answer's size
                answer_owed();
            }
            break;
        case AFMESH_NET_EV_CONN_ERROR:
            // A worker leaving at the end is normal for a server.
            if (!serving_) failed_.store(true);
            break;
        default:
            break;
        }
    }
    if (count > 0) progress_->notify_waiters();
}

Status FloorEndpoint::connect(const std::vector<FloorCard> &servers, int slot, std::chrono::milliseconds timeout) {
    write_offset_ = static_cast<uint64_t>(slot) * region_bytes_;
    const afmesh_net_ops &ops = transport_->net();
    for (const FloorCard &card : servers) {
        afmesh_net_conn *conn = nullptr;
        if (ops.connect(transport_->ctx(), card.address.data(), card.address.size(), &conn) != AFMESH_HAL_OK)
            return {Code::kPeerFailed, "floor: connect failed: " + take_module_error()};
        conns_.push_back(conn);
        server_rkeys_.push_back(card.rkey);
    }
    const auto n = static_cast<int>(servers.size());
    if (!progress_->wait_until([&] { return connected_.load() == n || failed_.load(); }, Clock::now() + timeout) ||
        failed_.load())
        return {Code::kPeerFailed, "floor: not every server accepted"};
    for (size_t s = 0; s < conns_.size(); ++s) {
        // Where server s answers (its own region here), and which region of its this worker writes into.
        std::vector<uint8_t> msg;
        ByteWriter w(msg);
        w.u64(recv_rkey_.key);
        w.u64(recv_rkey_.addr);
        w.u64(s * region_bytes_);
        w.u64(static_cast<uint64_t>(slot));
        if (ops.send(transport_->ctx(), conns_[s], msg.data(), msg.size(), 0, 0) != AFMESH_HAL_OK)
            return {Code::kPeerFailed, "floor: send failed: " + take_module_error()};
        operations_.fetch_add(1, std::memory_order_relaxed);
    }
    return Status::ok();
}

Status FloorEndpoint::round_trip(uint64_t push_bytes, uint64_t pull_bytes, uint64_t *elapsed_ns) {
    const afmesh_net_ops &ops = transport_->net();
    answers_.store(0);
    const uint64_t start = monotonic_ns();
    for (size_t s = 0; s < conns_.size(); ++s) {
        int rc;
        while ((rc = ops.write_imm(transport_->ctx(), conns_[s], send_buf_.data(), push_bytes, send_mr_,
                                   &server_rkeys_[s], write_offset_, static_cast<uint32_t>(pull_bytes), 0, 0)) ==
               AFMESH_HAL_AGAIN)
            progress_->poll_once();
        if (rc != AFMESH_HAL_OK) return {Code::kPeerFailed, "floor: write failed: " + take_module_error()};
        operations_.fetch_add(1, std::memory_order_relaxed);
    }
    const int n = static_cast<int>(conns_.size());
    if (!progress_->wait_until([&] { return answers_.load() >= n || failed_.load(); },
                               Clock::now() + std::chrono::seconds(30)) ||
        failed_.load())
        return {Code::kPeerFailed, "floor: a server did not answer"};
    *elapsed_ns = monotonic_ns() - start;
    return Status::ok();
}

}  // namespace afmesh::bench
