// SPDX-License-Identifier: Apache-2.0
#include "fabric_floor.h"

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace afmesh::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kRoundTripLimit = std::chrono::seconds(30);
constexpr int kSreadTimeoutMs = 100;
// Receives kept posted where remote CQ data consumes one (FI_RX_CQ_DATA).
constexpr size_t kPostedReceives = 16;

void check(ssize_t rc, const char *call) {
    if (rc < 0) throw std::runtime_error(std::string("raw libfabric floor: ") + call + ": " + fi_strerror(int(-rc)));
}

template <class Fid>
void close_fid(Fid *&fid) {
    if (fid) fi_close(&fid->fid);
    fid = nullptr;
}

// One end: its own fabric, domain, address vector, CQ and endpoint, with
// a source region, a target region and (FI_RX_CQ_DATA) posted receives.
class End {
public:
    End(const fi_info *info, size_t bytes, bool wait) : info_(info), wait_(wait), src_(bytes, 0x5a), dst_(bytes, 0) {
        check(fi_fabric(info->fabric_attr, &fabric_, nullptr), "fi_fabric");
        check(fi_domain(fabric_, const_cast<fi_info *>(info), &domain_, nullptr), "fi_domain");
        fi_av_attr av_attr{};
        av_attr.type = FI_AV_TABLE;
        check(fi_av_open(domain_, &av_attr, &av_, nullptr), "fi_av_open");
        fi_cq_attr cq_attr{};
        cq_attr.format = FI_CQ_FORMAT_DATA;
        cq_attr.wait_obj = wait ? FI_WAIT_UNSPEC : FI_WAIT_NONE;
        check(fi_cq_open(domain_, &cq_attr, &cq_, nullptr), "fi_cq_open");
        check(fi_endpoint(domain_, const_cast<fi_info *>(info), &ep_, nullptr), "fi_endpoint");
        check(fi_ep_bind(ep_, &av_->fid, 0), "fi_ep_bind(av)");
        check(fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)");
        check(fi_enable(ep_), "fi_enable");
        // A zero-byte round still registers a byte: registrations are never empty.
        if (bytes == 0) {
            src_.resize(1);
            dst_.resize(1);
        }
        check(fi_mr_reg(domain_, src_.data(), src_.size(), FI_WRITE, 0, 0, 0, &src_mr_, nullptr), "fi_mr_reg(source)");
        check(fi_mr_reg(domain_, dst_.data(), dst_.size(), FI_REMOTE_WRITE, 0, 1, 0, &dst_mr_, nullptr),
              "fi_mr_reg(target)");
        if (info->mode & FI_RX_CQ_DATA) {
            check(fi_mr_reg(domain_, receive_bytes_.data(), receive_bytes_.size(), FI_RECV, 0, 2, 0, &recv_mr_,
                            nullptr),
                  "fi_mr_reg(receives)");
            for (fi_context2 &slot : receive_slots_) post_receive(&slot);
        }
    }

    ~End() {
        close_fid(ep_);
        close_fid(src_mr_);
        close_fid(dst_mr_);
        close_fid(recv_mr_);
        close_fid(cq_);
        close_fid(av_);
        close_fid(domain_);
        close_fid(fabric_);
    }

    End(const End &) = delete;
    End &operator=(const End &) = delete;

    std::vector<uint8_t> name() const {
        std::vector<uint8_t> address(256);
        size_t len = address.size();
        check(fi_getname(&ep_->fid, address.data(), &len), "fi_getname");
        address.resize(len);
        return address;
    }

    /** Learns where `peer` is and which of its regions to write. */
    void meet(const End &peer) {
        const std::vector<uint8_t> address = peer.name();
        if (fi_av_insert(av_, address.data(), 1, &peer_, 0, nullptr) != 1)
            throw std::runtime_error("raw libfabric floor: fi_av_insert failed");
        peer_key_ = fi_mr_key(peer.dst_mr_);
        peer_addr_ = (info_->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? reinterpret_cast<uint64_t>(peer.dst_.data()) : 0;
    }

    /** Writes `bytes` into the peer's region with `imm` as remote CQ data. */
    void write(size_t bytes, uint32_t imm) {
        for (;;) {
            iovec iov{src_.data(), bytes};
            void *desc = fi_mr_desc(src_mr_);
            fi_rma_iov target{peer_addr_, bytes, peer_key_};
            fi_msg_rma msg{};
            msg.msg_iov = &iov;
            msg.desc = &desc;
            msg.iov_count = 1;
            msg.addr = peer_;
            msg.rma_iov = &target;
            msg.rma_iov_count = 1;
            msg.context = &write_context_;
            msg.data = imm;
            uint64_t flags = FI_REMOTE_CQ_DATA | FI_COMPLETION | FI_DELIVERY_COMPLETE;
            if (bytes <= info_->tx_attr->inject_size) flags |= FI_INJECT;
            const ssize_t rc = fi_writemsg(ep_, &msg, flags);
            if (rc != -FI_EAGAIN) return check(rc, "fi_writedata");
            reap(nullptr);  // progress frees transmit resources
        }
    }

    /** Polls (or sleeps) until remote CQ data arrives; returns it. */
    uint32_t await_imm(const std::atomic<bool> &abandoned) {
        const auto deadline = Clock::now() + kRoundTripLimit;
        for (uint32_t imm = 0;;) {
            if (reap(&imm)) return imm;
            if (abandoned.load(std::memory_order_relaxed)) throw std::runtime_error("raw libfabric floor: abandoned");
            if (Clock::now() > deadline) throw std::runtime_error("raw libfabric floor: a round trip took over 30 s");
        }
    }

private:
    void post_receive(fi_context2 *slot) {
        const size_t index = static_cast<size_t>(slot - receive_slots_.data());
        for (;;) {
            const ssize_t rc = fi_recv(ep_, receive_bytes_.data() + index * kReceiveSize, kReceiveSize,
                                       fi_mr_desc(recv_mr_), FI_ADDR_UNSPEC, slot);
            if (rc != -FI_EAGAIN) return check(rc, "fi_recv");
            fi_cq_read(cq_, nullptr, 0);
        }
    }

    bool is_receive(void *context) const {
        auto *slot = static_cast<fi_context2 *>(context);
        return slot >= receive_slots_.data() && slot < receive_slots_.data() + receive_slots_.size();
    }

    // One CQ read (or a bounded sleep for one): true with *imm set when remote CQ data came.
    bool reap(uint32_t *imm) {
        std::array<fi_cq_data_entry, 8> entries;
        const ssize_t got = wait_ ? fi_cq_sread(cq_, entries.data(), entries.size(), nullptr, kSreadTimeoutMs)
                                  : fi_cq_read(cq_, entries.data(), entries.size());
        if (got == -FI_EAGAIN) return false;
        if (got == -FI_EAVAIL) {
            fi_cq_err_entry error{};
            fi_cq_readerr(cq_, &error, 0);
            throw std::runtime_error(std::string("raw libfabric floor: completion error: ") + fi_strerror(error.err));
        }
        check(got, wait_ ? "fi_cq_sread" : "fi_cq_read");
        bool arrived = false;
        for (ssize_t i = 0; i < got; ++i) {
            if (!(entries[i].flags & FI_REMOTE_CQ_DATA)) continue;  // our own write's completion
            if (is_receive(entries[i].op_context)) post_receive(static_cast<fi_context2 *>(entries[i].op_context));
            if (imm) *imm = static_cast<uint32_t>(entries[i].data);
            arrived = true;
        }
        return arrived;
    }

    static constexpr size_t kReceiveSize = 64;

    const fi_info *info_;
    const bool wait_;
    std::vector<uint8_t> src_, dst_;
    std::array<uint8_t, kPostedReceives * kReceiveSize> receive_bytes_{};
    std::array<fi_context2, kPostedReceives> receive_slots_{};
    fi_context2 write_context_{};
    fid_fabric *fabric_ = nullptr;
    fid_domain *domain_ = nullptr;
    fid_av *av_ = nullptr;
    fid_cq *cq_ = nullptr;
    fid_ep *ep_ = nullptr;
    fid_mr *src_mr_ = nullptr, *dst_mr_ = nullptr, *recv_mr_ = nullptr;
    fi_addr_t peer_ = FI_ADDR_UNSPEC;
    uint64_t peer_key_ = 0, peer_addr_ = 0;
};

// The provider's RDM endpoint with RMA writes and remote CQ data, in the
// registration modes a plain ping-pong can meet. Like the fabric module,
// it asks for FI_HMEM first: with it, providers may choose other protocols
// (shm 1.17 injects nothing and skips CMA), and the floor must take the
// same paths the module's writes take.
fi_info *find_provider(const std::string &provider) {
    for (const bool hmem : {true, false}) {
        fi_info *hints = fi_allocinfo();
        if (!hints) throw std::runtime_error("raw libfabric floor: fi_allocinfo failed");
        hints->caps = FI_MSG | FI_RMA | FI_WRITE | FI_REMOTE_WRITE | (hmem ? FI_HMEM : 0);
        hints->mode = FI_CONTEXT | FI_CONTEXT2 | FI_RX_CQ_DATA;
        hints->ep_attr->type = FI_EP_RDM;
        hints->domain_attr->mr_mode =
            FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | (hmem ? FI_MR_HMEM : 0);
        hints->domain_attr->threading = FI_THREAD_SAFE;
        hints->domain_attr->control_progress = FI_PROGRESS_MANUAL;
        hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
        hints->fabric_attr->prov_name = strdup(provider.c_str());
        fi_info *info = nullptr;
        const int rc = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info);
        fi_freeinfo(hints);
        if (rc == 0 && info) return info;
    }
    throw std::runtime_error("raw libfabric floor: provider '" + provider +
                             "' offers no RDM endpoint with RMA and remote CQ data");
}

}  // namespace

std::vector<double> fabric_pingpong(const std::string &provider, size_t bytes, size_t warmup, size_t iters,
                                    bool wait) {
    std::unique_ptr<fi_info, decltype(&fi_freeinfo)> info(find_provider(provider), &fi_freeinfo);
    End ping(info.get(), bytes, wait), pong(info.get(), bytes, wait);
    ping.meet(pong);
    pong.meet(ping);

    std::atomic<bool> abandoned{false};
    std::string pong_error;
    std::thread echo([&] {
        try {
            for (size_t i = 0; i < warmup + iters; ++i) pong.write(bytes, pong.await_imm(abandoned));
        } catch (const std::exception &e) {
            pong_error = e.what();
        }
    });
    std::vector<double> rtt;
    rtt.reserve(iters);
    try {
        for (size_t i = 0; i < warmup + iters; ++i) {
            const auto start = Clock::now();
            ping.write(bytes, static_cast<uint32_t>(i));
            if (ping.await_imm(abandoned) != static_cast<uint32_t>(i))
                throw std::runtime_error("raw libfabric floor: an answer out of turn");
            if (i >= warmup) rtt.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
        }
    } catch (...) {
        abandoned = true;
        echo.join();
        throw;
    }
    echo.join();
    if (!pong_error.empty()) throw std::runtime_error(pong_error);
    return rtt;
}

}  // namespace afmesh::bench
