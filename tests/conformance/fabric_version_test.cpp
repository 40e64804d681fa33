// SPDX-License-Identifier: Apache-2.0
// The fabric module against a raw libfabric endpoint of the provider it uses
// (AFMESH_FABRIC_PROVIDER), which speaks to it with hand-built messages and
// writes. Peers of different wire versions must not talk, and each must
// learn why at once instead of at the handshake deadline: the module's
// listener answers a HELLO of another version with REJECT, and a connect
// that is answered with REJECT fails naming both versions. Version 3's
// writes name their connection in the CQ data's high word; the module must
// believe that tag at a shared endpoint and check it at a connection's own.
#include <gtest/gtest.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>

#include "log.h"
#include "module_params.h"
#include "transport_fixture.h"
#include "transports/fabric/address.h"
#include "transports/fabric/wire.h"

namespace afmesh::test {
namespace {

using fabric::Header;
using fabric::kHeaderSize;
using fabric::kMessageBufferSize;
using fabric::kWireVersion;
using fabric::MessageType;

/** One RDM endpoint of the provider, sending and receiving raw messages. */
class RawFabricPeer {
public:
    /** Check error(): empty once the endpoint is up, else the call that failed and why. */
    explicit RawFabricPeer(const char *provider) {
        fi_info *hints = fi_allocinfo();
        hints->caps = FI_MSG | FI_RMA;
        hints->mode = FI_CONTEXT | FI_CONTEXT2;
        hints->ep_attr->type = FI_EP_RDM;
        hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
        hints->fabric_attr->prov_name = strdup(provider);
        const int rc = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info_);
        fi_freeinfo(hints);
        if (!ok(rc, "fi_getinfo") || !ok(fi_fabric(info_->fabric_attr, &fabric_, nullptr), "fi_fabric") ||
            !ok(fi_domain(fabric_, info_, &domain_, nullptr), "fi_domain"))
            return;
        fi_av_attr av_attr{};
        av_attr.type = FI_AV_TABLE;
        fi_cq_attr cq_attr{};
        cq_attr.format = FI_CQ_FORMAT_DATA;
        if (!ok(fi_av_open(domain_, &av_attr, &av_, nullptr), "fi_av_open") ||
            !ok(fi_cq_open(domain_, &cq_attr, &cq_, nullptr), "fi_cq_open") ||
            !ok(fi_endpoint(domain_, info_, &ep_, nullptr), "fi_endpoint") || !ok(name_uniquely(), "fi_setname") ||
            !ok(fi_ep_bind(ep_, &av_->fid, 0), "fi_ep_bind(av)") ||
            !ok(fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)") ||
            !ok(fi_enable(ep_), "fi_enable"))
            return;
        ok(fi_recv(ep_, received_.data(), received_.size(), nullptr, FI_ADDR_UNSPEC, &recv_context_), "fi_recv");
    }

    ~RawFabricPeer() {
        for (fid *f : {ep_ ? &ep_->fid : nullptr, cq_ ? &cq_->fid : nullptr, av_ ? &av_->fid : nullptr,
                       domain_ ? &domain_->fid : nullptr, fabric_ ? &fabric_->fid : nullptr})
            if (f) fi_close(f);
        if (info_) fi_freeinfo(info_);
    }
    RawFabricPeer(const RawFabricPeer &) = delete;
    RawFabricPeer &operator=(const RawFabricPeer &) = delete;

    const std::string &error() const { return error_; }
    uint32_t addr_format() const { return info_->addr_format; }

    /** This endpoint's address as the module's connect() takes it. */
    std::vector<uint8_t> address_blob() const {
        std::vector<uint8_t> raw(fabric::kMaxRawAddress), blob;
        size_t len = raw.size();
        EXPECT_EQ(fi_getname(&ep_->fid, raw.data(), &len), 0);
        raw.resize(len);
        EXPECT_TRUE(fabric::encode_address(info_->addr_format, raw, &blob));
        return blob;
    }

    /** Adds the endpoint a module address blob names. */
    fi_addr_t insert(const std::vector<uint8_t> &blob) {
        std::vector<uint8_t> raw;
        fabric::Reason why;
        EXPECT_TRUE(fabric::decode_address(blob.data(), blob.size(), info_->addr_format, &raw, &why)) << why.text;
        fi_addr_t addr = FI_ADDR_NOTAVAIL;
        EXPECT_EQ(fi_av_insert(av_, raw.data(), 1, &addr, 0, nullptr), 1);
        return addr;
    }

    /** A message: `header` (its version byte overwritten with `version`) and `payload`. */
    void send(const Header &header, uint8_t version, const std::vector<uint8_t> &payload, fi_addr_t to,
              NetEndpoint &module) {
        outgoing_.assign(kHeaderSize, 0);
        fabric::encode_header(header, outgoing_.data());
        outgoing_[4] = version;
        outgoing_.insert(outgoing_.end(), payload.begin(), payload.end());
        complete(module, &sent_, "the raw send to complete", [&] {
            return fi_send(ep_, outgoing_.data(), outgoing_.size(), nullptr, to, &send_context_);
        });
    }

    /** Writes `byte` into the module's region `rkey` at `offset`, with remote CQ data `data`. */
    void write(uint8_t byte, const afmesh_net_rkey &rkey, uint64_t offset, uint64_t data, fi_addr_t to,
               NetEndpoint &module) {
        written_byte_ = byte;
        complete(module, &written_, "the raw write to complete", [&] {
            return fi_writedata(ep_, &written_byte_, 1, nullptr, data, to, rkey.addr + offset, rkey.key,
                                &write_context_);
        });
    }

    /** Waits (polling the module too) for the next message, and decodes it. */
    ::testing::AssertionResult receive(NetEndpoint &module, Header *header, std::vector<uint8_t> *payload) {
        ::testing::AssertionResult arrived =
            poll_until({&module},
                       [&] {
                           progress();
                           return arrived_.has_value();
                       },
                       "a message at the raw peer");
        if (!arrived) return arrived;
        const std::vector<uint8_t> bytes = std::move(*arrived_);
        arrived_.reset();
        fabric::Reason why;
        if (!fabric::decode_header(bytes.data(), bytes.size(), header, &why))
            return ::testing::AssertionFailure() << "the module sent a message its own decoder refuses: " << why.text;
        payload->assign(bytes.begin() + kHeaderSize, bytes.end());
        return ::testing::AssertionSuccess();
    }

private:
    // shm names an endpoint's region after the pid by default, and a region
    // left by a killed process of an earlier test with the same pid makes
    // fi_enable fail with EBUSY: the module names its own uniquely, and so
    // does this peer (pid and clock).
    int name_uniquely() {
        if (strcmp(info_->fabric_attr->prov_name, "shm") != 0) return 0;
        std::string name = "afmesh-test-" + std::to_string(getpid()) + "-" +
                           std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
        return fi_setname(&ep_->fid, name.data(), name.size() + 1);
    }

    bool ok(int rc, const char *call) {
        if (rc >= 0 || !error_.empty()) return error_.empty();
        error_ = std::string(call) + ": " + fi_strerror(-rc);
        return false;
    }

    /** Posts with `post`, again while the provider pushes back, then waits until its completion sets `*done`. */
    void complete(NetEndpoint &module, bool *done, const char *what, const std::function<ssize_t()> &post) {
        *done = false;
        ASSERT_EQ(post_retrying({&module},
                                [&] {
                                    const ssize_t rc = post();
                                    return rc == -FI_EAGAIN ? AFMESH_HAL_AGAIN : static_cast<int>(rc);
                                }),
                  0);
        ASSERT_TRUE(poll_until(
            {&module},
            [&] {
                progress();
                return *done;
            },
            what));
    }

    void progress() {
        fi_cq_data_entry entry{};
        if (fi_cq_read(cq_, &entry, 1) != 1) return;
        if (entry.op_context == &send_context_) {
            sent_ = true;
        } else if (entry.op_context == &write_context_) {
            written_ = true;
        } else if (entry.op_context == &recv_context_) {
            arrived_.emplace(received_.begin(), received_.begin() + static_cast<long>(entry.len));
            fi_recv(ep_, received_.data(), received_.size(), nullptr, FI_ADDR_UNSPEC, &recv_context_);
        }
    }

    std::string error_;
    fi_info *info_ = nullptr;
    fid_fabric *fabric_ = nullptr;
    fid_domain *domain_ = nullptr;
    fid_av *av_ = nullptr;
    fid_cq *cq_ = nullptr;
    fid_ep *ep_ = nullptr;
    fi_context2 send_context_{}, recv_context_{}, write_context_{};
    std::array<uint8_t, kMessageBufferSize> received_{};
    std::vector<uint8_t> outgoing_;
    bool sent_ = false;
    uint8_t written_byte_ = 0;
    bool written_ = false;
    std::optional<std::vector<uint8_t>> arrived_;
};

class FabricVersion : public ::testing::Test {
protected:
    void SetUp() override {
        const char *provider = getenv("AFMESH_FABRIC_PROVIDER");
        if (!provider) GTEST_SKIP() << "AFMESH_FABRIC_PROVIDER names no provider for the raw peer";
        for (ModuleRecord &record : modules_of_kind(AFMESH_MODULE_TRANSPORT)) {
            if (record.name != "fabric") continue;
            Status s = NetEndpoint::open(record, &module_);
            ASSERT_TRUE(s) << s.to_string();
        }
        ASSERT_NE(module_, nullptr) << "libafmesh_net_fabric.so is not on the module search path";
        peer_ = std::make_unique<RawFabricPeer>(provider);
        ASSERT_TRUE(peer_->error().empty()) << peer_->error();
    }

    std::unique_ptr<NetEndpoint> module_;
    std::unique_ptr<RawFabricPeer> peer_;
};

TEST_F(FabricVersion, AHelloOfAnotherVersionIsAnsweredWithReject) {
    const fi_addr_t listener = peer_->insert(module_->address());
    constexpr uint32_t kClientId = 77;
    for (uint8_t version : {uint8_t{1}, uint8_t{kWireVersion - 1}, uint8_t{kWireVersion + 1}}) {
        SCOPED_TRACE(static_cast<int>(version));
        peer_->send({MessageType::kHello, 0, kClientId}, version, peer_->address_blob(), listener, *module_);
        Header header;
        std::vector<uint8_t> payload;
        ASSERT_TRUE(peer_->receive(*module_, &header, &payload));
        EXPECT_EQ(header.type, MessageType::kReject);
        EXPECT_EQ(header.dst_conn, kClientId);
        EXPECT_EQ(header.version, kWireVersion);
    }
    // No connection was offered to the caller.
    afmesh_net_conn *conn = nullptr;
    module_->poll_once();
    EXPECT_EQ(module_->ops().accept(module_->ctx(), &conn), AFMESH_HAL_AGAIN);
}

TEST_F(FabricVersion, AConnectAnsweredWithRejectFailsAtOnceNamingBothVersions) {
    const std::vector<uint8_t> blob = peer_->address_blob();
    afmesh_net_conn *conn = nullptr;
    ASSERT_EQ(module_->ops().connect(module_->ctx(), blob.data(), blob.size(), &conn), AFMESH_HAL_OK)
        << take_module_error();
    // The raw peer plays a listener of a newer version.
    Header header;
    std::vector<uint8_t> client;  // a HELLO's payload: the address to answer
    ASSERT_TRUE(peer_->receive(*module_, &header, &client));
    ASSERT_EQ(header.type, MessageType::kHello);
    const fi_addr_t to = peer_->insert(client);
    peer_->send({MessageType::kReject, header.src_conn, 0}, kWireVersion + 1, {}, to, *module_);
    ASSERT_TRUE(poll_until(
        {module_.get()}, [&] { return module_->count(AFMESH_NET_EV_CONN_ERROR, conn) == 1; },
        "the connect to fail"));
    const std::optional<NetEvent> error = module_->take(AFMESH_NET_EV_CONN_ERROR, conn);
    EXPECT_EQ(error->status, AFMESH_HAL_UNSUPPORTED_VERSION);
    const std::string both = "fabric wire protocol " + std::to_string(kWireVersion + 1) + ", this module " +
                             std::to_string(kWireVersion);
    EXPECT_NE(error->reason.find(both), std::string::npos) << error->reason;
    EXPECT_EQ(module_->count(AFMESH_NET_EV_CONNECTED, conn), 0u);
    EXPECT_EQ(module_->ops().close(module_->ctx(), conn), AFMESH_HAL_OK);
}

TEST_F(FabricVersion, AWriteCountsForTheConnectionItsTagNames) {
    RegisteredBuffer target(*module_, 2, AFMESH_NET_ACCESS_REMOTE_WRITE);
    ASSERT_TRUE(target.registered()) << take_module_error();
    memset(target.data(), 0, target.size());
    // Two connections from the raw peer, each with the id and endpoint its ACCEPT names.
    struct Offered {
        uint32_t id = 0;
        std::vector<uint8_t> endpoint;
        afmesh_net_conn *conn = nullptr;
    };
    std::array<Offered, 2> offered;
    const fi_addr_t listener = peer_->insert(module_->address());
    for (uint32_t i = 0; i < offered.size(); ++i) {
        const uint32_t client_id = 11 + i;
        peer_->send({MessageType::kHello, 0, client_id}, kWireVersion, peer_->address_blob(), listener, *module_);
        Header header;
        ASSERT_TRUE(peer_->receive(*module_, &header, &offered[i].endpoint));
        ASSERT_EQ(header.type, MessageType::kAccept);
        ASSERT_EQ(header.dst_conn, client_id);
        offered[i].id = header.src_conn;
        ASSERT_TRUE(poll_until(
            {module_.get()}, [&] { return module_->ops().accept(module_->ctx(), &offered[i].conn) == AFMESH_HAL_OK; },
            "the module to accept"));
    }
    const Offered &a = offered[0], &b = offered[1];
    const fi_addr_t at_a = peer_->insert(a.endpoint), at_b = peer_->insert(b.endpoint);

    // Tagged for B, at B's endpoint: B's immediate.
    peer_->write(0xb1, target.rkey(), 1, fabric::write_data(0x1234, b.id, true), at_b, *module_);
    ASSERT_TRUE(poll_until({module_.get()}, [&] { return module_->count(AFMESH_NET_EV_IMM) == 1; }, "B's immediate"));
    std::optional<NetEvent> imm = module_->take(AFMESH_NET_EV_IMM);
    EXPECT_EQ(imm->conn, b.conn);
    EXPECT_EQ(imm->imm, 0x1234u);
    EXPECT_EQ(target.data()[1], 0xb1);

    // Tagged for B, at A's endpoint: B's too when the endpoint is shared; else A's endpoint refuses it.
    peer_->write(0xa1, target.rkey(), 0, fabric::write_data(0x5678, b.id, true), at_a, *module_);
    if (a.endpoint == b.endpoint) {
        ASSERT_TRUE(
            poll_until({module_.get()}, [&] { return module_->count(AFMESH_NET_EV_IMM) == 1; }, "the second immediate"));
        imm = module_->take(AFMESH_NET_EV_IMM);
        EXPECT_EQ(imm->conn, b.conn);
        EXPECT_EQ(imm->imm, 0x5678u);
    } else {
        ASSERT_TRUE(poll_until({module_.get()}, [&] { return module_->count(AFMESH_NET_EV_CONN_ERROR, a.conn) == 1; },
                               "A to fail"));
        const std::string reason = module_->take(AFMESH_NET_EV_CONN_ERROR, a.conn)->reason;
        EXPECT_NE(reason.find("tagged a write for connection " + std::to_string(b.id)), std::string::npos) << reason;
        EXPECT_EQ(module_->count(AFMESH_NET_EV_IMM), 0u);
    }
    EXPECT_EQ(module_->count(AFMESH_NET_EV_CONN_ERROR, b.conn), 0u);
    for (const Offered &o : offered) EXPECT_EQ(module_->ops().close(module_->ctx(), o.conn), AFMESH_HAL_OK);
}

}  // namespace
}  // namespace afmesh::test
