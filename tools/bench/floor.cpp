// SPDX-License-Identifier: Apache-2.0
#include "floor.h"

#include <algorithm>
#include <cstring>

#include "byte_codec.h"
#include "engine/clock.h"
#include "log.h"

namespace afmesh::bench {
namespace {

// Each message's first byte says what it is.
constexpr uint8_t kSetupTag = 'S';   // worker -> server: where answers go, which region is the worker's
constexpr uint8_t kPushTag = 'P';    // worker -> server: u32 answer size, then the push bytes
constexpr uint8_t kAnswerTag = 'A';  // server -> worker: the answer bytes
constexpr size_t kPushHeader = 1 + 4;

// With lanes, a push's immediate is lane << kLaneShift | answer size; an answer's, its lane.
constexpr unsigned kLaneShift = 26;
constexpr uint32_t kSizeMask = (uint32_t{1} << kLaneShift) - 1;
constexpr int kMaxLanes = 1 << (32 - kLaneShift);

}  // namespace

int floor_lanes(uint64_t bytes, int microbatches) {
    return bytes <= kSizeMask && microbatches <= kMaxLanes ? std::max(microbatches, 1) : 1;
}

const char *floor_primitive_name(FloorPrimitive primitive) {
    return primitive == FloorPrimitive::kWrite ? "write" : "send";
}

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

Status FloorEndpoint::create(const Config &config, PollMode mode, uint64_t bytes, int peers, int lanes,
                             std::unique_ptr<FloorEndpoint> *out) {
    std::unique_ptr<FloorEndpoint> ep(new FloorEndpoint());
    if (Status s = select_module(config, AFMESH_MODULE_TRANSPORT, &ep->transport_); !s) return s;
    ep->lane_bytes_ = bytes;
    ep->lanes_ = std::max(lanes, 1);
    ep->lane_answers_ = std::make_unique<std::atomic<int>[]>(static_cast<size_t>(ep->lanes_));
    ep->region_bytes_ = bytes * static_cast<uint64_t>(ep->lanes_);
    ep->send_buf_.assign(bytes, 0x5a);
    ep->recv_buf_.assign(ep->region_bytes_ * static_cast<uint64_t>(std::max(peers, 1)), 0);
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

int FloorEndpoint::send_message(afmesh_net_conn *conn, std::initializer_list<std::span<const uint8_t>> parts) {
    message_.clear();
    for (std::span<const uint8_t> part : parts) message_.insert(message_.end(), part.begin(), part.end());
    int rc;
    while ((rc = transport_->net().send(transport_->ctx(), conn, message_.data(), message_.size(), 0, 0)) ==
           AFMESH_HAL_AGAIN)
        progress_->poll_once();
    if (rc == AFMESH_HAL_OK) operations_.fetch_add(1, std::memory_order_relaxed);
    return rc;
}

// From the worker's own region, in place (its slot was checked when it arrived).
void FloorEndpoint::answer(afmesh_net_conn *conn, const Peer &peer, const Owed &owed) {
    // The size comes from the peer: never read past its lane.
    const uint64_t n = std::min<uint64_t>(owed.bytes, lane_bytes_);
    const uint64_t lane_offset = static_cast<uint64_t>(owed.lane) * lane_bytes_;
    const uint8_t *lane = recv_buf_.data() + peer.slot * region_bytes_ + lane_offset;
    if (owed.primitive == FloorPrimitive::kMessage) {
        (void)send_message(conn, {{&kAnswerTag, 1}, {lane, n}});
        return;
    }
    if (transport_->net().write_imm(transport_->ctx(), conn, lane, n, recv_mr_, &peer.rkey, peer.offset + lane_offset,
                                    static_cast<uint32_t>(owed.lane), 0, 0) == AFMESH_HAL_OK)
        operations_.fetch_add(1, std::memory_order_relaxed);
}

bool FloorEndpoint::fits_messages(uint64_t push_bytes, uint64_t pull_bytes) const {
    const uint64_t limit = transport_->net_caps().max_send_size;
    return kPushHeader + push_bytes <= limit && 1 + pull_bytes <= limit;
}

// A message: a worker's setup or push (server), or an answer (worker).
void FloorEndpoint::on_message(const afmesh_net_event &ev) {
    if (ev.len == 0) return;
    const auto *data = static_cast<const uint8_t *>(ev.data);
    ByteReader r(data + 1, ev.len - 1);
    if (!serving_) {
        if (data[0] != kAnswerTag) return;
        // Into this server's region here, as afmesh copies an eager answer into the pull buffer.
        const auto server = static_cast<uint64_t>(std::find(conns_.begin(), conns_.end(), ev.conn) - conns_.begin());
        if (server < conns_.size())
            memcpy(recv_buf_.data() + server * region_bytes_, data + 1, std::min<uint64_t>(ev.len - 1, lane_bytes_));
        lane_answers_[0].fetch_add(1);  // a message answers a single round trip: lane 0
        return;
    }
    Peer &peer = peers_[ev.conn];
    if (data[0] == kSetupTag) {  // where its answers go
        peer.rkey.key = r.u64();
        peer.rkey.addr = r.u64();
        peer.offset = r.u64();
        peer.slot = r.u64();
        peer.known = r.done() && peer.slot < recv_buf_.size() / region_bytes_;
    } else if (data[0] == kPushTag) {
        const uint32_t answer_bytes = r.u32();
        // Into the worker's region here, as afmesh copies an eager push into its slice.
        if (r.ok() && peer.known)
            memcpy(recv_buf_.data() + peer.slot * region_bytes_, data + kPushHeader,
                   std::min<uint64_t>(ev.len - kPushHeader, lane_bytes_));
        peer.owed.push_back({answer_bytes, FloorPrimitive::kMessage});
    }
    answer_owed();
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
        case AFMESH_NET_EV_RECV:
            on_message(ev);
            break;
        case AFMESH_NET_EV_IMM:
            if (!serving_) {
                if (ev.imm < static_cast<uint32_t>(lanes_)) lane_answers_[ev.imm].fetch_add(1);
            } else if (lanes_ == 1) {
                peers_[ev.conn].owed.push_back({ev.imm, FloorPrimitive::kWrite});  // the immediate is the answer's size
                answer_owed();
            } else if (const auto lane = static_cast<int>(ev.imm >> kLaneShift); lane < lanes_) {
                peers_[ev.conn].owed.push_back({ev.imm & kSizeMask, FloorPrimitive::kWrite, lane});
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
        if (send_message(conns_[s], {{&kSetupTag, 1}, msg}) != AFMESH_HAL_OK)
            return {Code::kPeerFailed, "floor: send failed: " + take_module_error()};
    }
    return Status::ok();
}

Status FloorEndpoint::round_trip(FloorPrimitive primitive, uint64_t push_bytes, uint64_t pull_bytes,
                                 uint64_t *elapsed_ns) {
    lane_answers_[0].store(0);  // a single round trip is lane 0's
    const uint64_t start = monotonic_ns();
    for (size_t s = 0; s < conns_.size(); ++s) {
        int rc;
        if (primitive == FloorPrimitive::kMessage) {
            // The header and the push in one message, gathered as afmesh gathers an eager push.
            uint8_t answer_bytes[4];
            store_le32(answer_bytes, static_cast<uint32_t>(pull_bytes));
            rc = send_message(conns_[s], {{&kPushTag, 1}, answer_bytes, {send_buf_.data(), push_bytes}});
        } else {
            rc = write_push(s, 0, push_bytes, pull_bytes);
        }
        if (rc != AFMESH_HAL_OK)
            return {Code::kPeerFailed, std::string("floor: ") + floor_primitive_name(primitive) +
                                           " failed: " + take_module_error()};
    }
    if (Status s = await_answers(lane_answers_[0]); !s) return s;
    *elapsed_ns = monotonic_ns() - start;
    return Status::ok();
}

int FloorEndpoint::write_push(size_t s, int lane, uint64_t push_bytes, uint64_t pull_bytes) {
    const uint32_t imm = lanes_ == 1 ? static_cast<uint32_t>(pull_bytes)
                                     : static_cast<uint32_t>(lane) << kLaneShift | static_cast<uint32_t>(pull_bytes);
    const afmesh_net_ops &ops = transport_->net();
    int rc;
    while ((rc = ops.write_imm(transport_->ctx(), conns_[s], send_buf_.data(), push_bytes, send_mr_,
                               &server_rkeys_[s], write_offset_ + static_cast<uint64_t>(lane) * lane_bytes_, imm, 0,
                               0)) == AFMESH_HAL_AGAIN)
        progress_->poll_once();
    if (rc == AFMESH_HAL_OK) operations_.fetch_add(1, std::memory_order_relaxed);
    return rc;
}

Status FloorEndpoint::await_answers(const std::atomic<int> &answers) {
    // Two pointers, no more: the std::function wait_until takes holds them
    // without allocating, as afmesh's own waits do.
    auto answered = [this, &answers] { return answers.load() >= static_cast<int>(conns_.size()) || failed_.load(); };
    if (!progress_->wait_until(answered, Clock::now() + std::chrono::seconds(30)) ||
        failed_.load())
        return {Code::kPeerFailed, "floor: a server did not answer"};
    return Status::ok();
}

Status FloorEndpoint::pipeline_layer(uint64_t push_bytes, uint64_t pull_bytes, std::vector<uint64_t> *lane_ns) {
    std::vector<uint64_t> posted(static_cast<size_t>(lanes_));
    for (int lane = 0; lane < lanes_; ++lane) lane_answers_[lane].store(0);
    for (int lane = 0; lane < lanes_; ++lane) {
        posted[lane] = monotonic_ns();
        for (size_t s = 0; s < conns_.size(); ++s)
            if (write_push(s, lane, push_bytes, pull_bytes) != AFMESH_HAL_OK)
                return {Code::kPeerFailed, "floor: write failed: " + take_module_error()};
    }
    for (int lane = 0; lane < lanes_; ++lane) {
        if (Status s = await_answers(lane_answers_[lane]); !s) return s;
        if (lane_ns) lane_ns->push_back(monotonic_ns() - posted[lane]);
    }
    return Status::ok();
}

}  // namespace afmesh::bench
