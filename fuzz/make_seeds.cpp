// SPDX-License-Identifier: Apache-2.0
// Writes the fuzz targets' seed corpora: small valid encodings, made by the
// encoders themselves, of every message each target decodes, so the fuzzers
// start past the magic numbers, versions and length checks instead of
// spending their time discovering them.
//
//   afmesh_fuzz_seeds <dir>    writes <dir>/<target>/<seed> (existing files of
//                              the same name are replaced)
//
// ctest runs it into the build tree before the fuzz runs, so they always
// start from the current encodings; fuzz/corpus/ holds its output from the
// last time someone ran it on the source tree (see the README).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <rdma/fabric.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "control/frame.h"
#include "control/messages.h"
#include "engine/wire.h"
#include "transports/fabric/address.h"
#include "byte_codec.h"
#include "transports/fabric/wire.h"
#include "transports/ibverbs/wire.h"
#include "transports/tcp/address.h"
#include "transports/tcp/wire.h"

namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

class Corpus {
public:
    explicit Corpus(fs::path root) : root_(std::move(root)) {}

    /** Writes one seed: `selector` first when the target reads one (see fuzz_support.h), then `bytes`. */
    void add(const char *target, const char *name, const Bytes &bytes) { write(target, name, {}, bytes); }
    void add(const char *target, const char *name, uint8_t selector, const Bytes &bytes) {
        write(target, name, Bytes{selector}, bytes);
    }
    bool ok() const { return ok_; }

private:
    void write(const char *target, const char *name, const Bytes &prefix, const Bytes &bytes) {
        const fs::path dir = root_ / target;
        std::error_code ec;
        fs::create_directories(dir, ec);
        std::ofstream out(dir / name, std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char *>(prefix.data()), static_cast<std::streamsize>(prefix.size()));
        out.write(reinterpret_cast<const char *>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
        if (!out) {
            fprintf(stderr, "afmesh_fuzz_seeds: cannot write %s\n", (dir / name).c_str());
            ok_ = false;
        }
    }

    fs::path root_;
    bool ok_ = true;
};

Bytes cat(std::initializer_list<Bytes> parts) {
    Bytes out;
    for (const Bytes &p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
}

// ---- control plane ----

namespace control = afmesh::control;

control::HelloMsg sample_hello() {
    control::HelloMsg m;
    m.hello.role = afmesh::Role::kWorker;
    m.hello.requested_rank = 1;
    m.hello.transport = "tcp";
    m.hello.address = {0x41, 0x46, 0x54, 0x41, 1, 4, 0x23, 0x28};
    m.hello.device = "cpu";
    m.num_workers = 2;
    m.num_servers = 2;
    m.heartbeat_interval_ms = 1000;
    m.heartbeat_timeout_ms = 5000;
    m.auth_token = "secret";
    return m;
}

control::RosterMsg sample_roster() {
    control::RosterMsg m;
    m.your_rank = 0;
    m.roster.cluster_key.fill(0x5a);
    for (int32_t rank = 0; rank < 2; ++rank) {
        const auto incarnation = static_cast<uint64_t>(0x1000 + rank);
        m.roster.workers.push_back({afmesh::Role::kWorker, rank, "10.0.0.2", "tcp", {1, 2, 3, 4}, "cpu", incarnation});
        m.roster.servers.push_back({afmesh::Role::kServer, rank, "::1", "fabric", {5, 6, 7, 8}, "cuda", incarnation});
    }
    return m;
}

template <class Message>
void add_control(Corpus &corpus, const char *name, const Message &m, Bytes *stream) {
    const Bytes payload = control::encode(m);
    corpus.add("control_messages", name, static_cast<uint8_t>(Message::kType), payload);
    control::append_frame(Message::kType, payload, stream);
}

void control_seeds(Corpus &corpus) {
    Bytes stream;  // every message, framed, as one connection would carry them
    add_control(corpus, "hello", sample_hello(), &stream);
    add_control(corpus, "progress", control::ProgressMsg{control::ProgressPhase::kStop, 1, 0, "worker 1"}, &stream);
    add_control(corpus, "roster", sample_roster(), &stream);
    add_control(corpus, "error",
                control::ErrorMsg{{afmesh::Code::kAccess, "auth token refused"}}, &stream);
    add_control(corpus, "barrier", control::BarrierMsg{afmesh::BarrierGroup::kAll, 3}, &stream);
    add_control(corpus, "barrier_done",
                control::BarrierDoneMsg{afmesh::BarrierGroup::kWorkers, 3, afmesh::Status::ok()}, &stream);
    add_control(corpus, "heartbeat", control::HeartbeatMsg{}, &stream);
    add_control(corpus, "peer_down", control::PeerDownMsg{afmesh::Role::kServer, 1, "heartbeat timeout"}, &stream);
    add_control(corpus, "peer_up", control::PeerUpMsg{sample_roster().roster.servers[1]}, &stream);
    add_control(corpus, "peer_up_ack", control::PeerUpAckMsg{afmesh::Role::kServer, 1, 0x1001}, &stream);
    control::RosterMsg replacement = sample_roster();
    replacement.replacement = true;
    replacement.barriers_done = {4, 0, 7};
    add_control(corpus, "roster_replacement", replacement, &stream);
    control::RejoinMsg rejoin{sample_hello(), 0x2002, sample_roster().roster.cluster_key, {3, 0, 5}};
    add_control(corpus, "rejoin", rejoin, &stream);
    add_control(corpus, "stop", control::StopMsg{}, &stream);
    add_control(corpus, "stop_done",
                control::StopDoneMsg{{afmesh::Code::kPeerFailed, "server 1 died instead of stopping"}}, &stream);
    // Options byte (control_frame_fuzz.cpp): bit 0 the scheduler's limit, bits 1-7 bytes per read.
    corpus.add("control_frame", "stream_whole", 0x00, stream);
    corpus.add("control_frame", "stream_scheduler_7_per_read", 0x01 | (7 << 1), stream);
    corpus.add("control_frame", "stream_cut_mid_frame", 0x00 | (64 << 1), Bytes(stream.begin(), stream.end() - 5));
}

// ---- data plane ----

namespace wire = afmesh::wire;

wire::TensorMeta tensor(uint64_t key, uint64_t bytes) {
    wire::TensorMeta t;
    t.key = key;
    t.bytes = bytes;
    t.dtype = {2, 32, 1};
    t.ndim = 2;
    t.shape[0] = 2;
    t.shape[1] = static_cast<int64_t>(bytes / 8);
    return t;
}

template <class Message>
Bytes encoded(const Message &m) {
    Bytes out;
    wire::encode(m, out);
    return out;
}

void data_seeds(Corpus &corpus) {
    const wire::MailboxAddress mailbox{{0x1234, 0x7f0000001000}, 4096, 64};
    wire::Ident ident;
    ident.worker_rank = 1;
    ident.server_rank = 0;
    ident.nonce.fill(0x11);
    ident.mailbox = mailbox;
    corpus.add("data_wire", "ident", encoded(ident));
    wire::Challenge challenge;
    challenge.nonce.fill(0x22);
    challenge.mac.fill(0x33);
    corpus.add("data_wire", "challenge", encoded(challenge));
    wire::Proof proof;
    proof.mac.fill(0x44);
    corpus.add("data_wire", "proof", encoded(proof));
    corpus.add("data_wire", "mailbox", encoded(mailbox));
    corpus.add("data_wire", "advert", encoded(wire::Advert{7, {0x1234, 0x7f0000002000}, 256, 8192}));
    corpus.add("data_wire", "alloc_req", encoded(wire::AllocReq{7, 8192}));
    Bytes bye, heartbeat;
    wire::encode_bye(bye);
    corpus.add("data_wire", "bye", bye);
    wire::encode_heartbeat(heartbeat);
    corpus.add("data_wire", "heartbeat", heartbeat);

    wire::Request request;
    request.slot = 3;
    request.generation = 1;
    request.posted_ns = 1000;
    request.pushes = {tensor(7, 2 * wire::kMinChunkBytes), tensor(8, 16)};
    request.push_writes = 3;  // the first push in two chunks, the second in one
    wire::PullMeta pull;
    pull.tensor = tensor(9, 64);
    pull.rkey = {0x99, 0x7f0000003000};
    pull.offset = 128;
    request.pulls = {pull};
    corpus.add("data_wire", "request", encoded(request));
    request.carried = true;
    request.push_writes = 2;  // the carrier write is not counted
    corpus.add("data_wire", "request_carried", encoded(request));

    const Bytes eager_bytes(24, 0xab);
    wire::Request eager;
    eager.slot = 4;
    eager.eager = true;
    eager.eager_answers = true;
    eager.pushes = {tensor(7, 8), tensor(8, 16)};
    eager.eager_data = eager_bytes.data();
    eager.pulls = {pull};
    corpus.add("data_wire", "request_eager", encoded(eager));

    wire::Response response;
    response.slot = 3;
    response.generation = 1;
    response.arrived_ns = 1;
    response.processed_ns = 2;
    response.responded_ns = 3;
    response.pull_bytes = {wire::kMinChunkBytes + 1};
    response.pull_writes = 2;
    corpus.add("data_wire", "response", encoded(response));
    response.pull_bytes = {8, 16};
    response.pull_writes = 0;
    response.eager = true;
    response.eager_data = eager_bytes.data();
    corpus.add("data_wire", "response_eager", encoded(response));
}

// ---- transports ----

void tcp_seeds(Corpus &corpus) {
    namespace tcp = afmesh::tcp;
    const struct {
        const char *name;
        tcp::FrameHeader header;
    } frames[] = {
        {"write_imm", {tcp::FrameType::kWriteImm, 0x10002, 5, 4096, 8192}},
        {"send", {tcp::FrameType::kSend, 0, 0, 0, 120}},
        {"write", {tcp::FrameType::kWrite, 0, 5, 0, 65536}},
    };
    for (const auto &f : frames) {
        Bytes bytes(tcp::kFrameHeaderSize);
        tcp::encode_frame_header(f.header, bytes.data());
        corpus.add("tcp_wire", f.name, 0, bytes);
    }

    tcp::SocketAddress v4, v6;
    auto *in = reinterpret_cast<sockaddr_in *>(&v4.storage);
    in->sin_family = AF_INET;
    in->sin_port = htons(9000);
    inet_pton(AF_INET, "10.0.0.1", &in->sin_addr);
    auto *in6 = reinterpret_cast<sockaddr_in6 *>(&v6.storage);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(9001);
    in6->sin6_scope_id = 2;
    inet_pton(AF_INET6, "fe80::1", &in6->sin6_addr);
    for (const auto &[name, address] : {std::pair{"address_v4", &v4}, std::pair{"address_v6", &v6}}) {
        Bytes blob(tcp::kAddressBlobSize);
        tcp::encode_address(*address, blob.data());
        corpus.add("tcp_wire", name, 1, blob);
    }
}

void fabric_seeds(Corpus &corpus) {
    namespace fabric = afmesh::fabric;
    // A sockaddr_in as tcp;ofi_rxm's fi_getname gives it: the format fabric_wire_fuzz reads handshakes with.
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    sin.sin_port = htons(40000);
    inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
    const auto *raw_begin = reinterpret_cast<const uint8_t *>(&sin);
    Bytes blob;
    fabric::encode_address(FI_SOCKADDR_IN, Bytes(raw_begin, raw_begin + sizeof sin), &blob);

    auto message = [](fabric::MessageType type, uint32_t dst, uint32_t src, const Bytes &payload) {
        Bytes bytes(fabric::kHeaderSize);
        fabric::encode_header({type, dst, src}, bytes.data());
        return cat({bytes, payload});
    };
    Bytes imm(fabric::kImmPayloadSize);
    afmesh::store_le32(imm.data(), 0x10002);
    // Selector 0: one received message (fabric_wire_fuzz.cpp).
    corpus.add("fabric_wire", "hello", 0, message(fabric::MessageType::kHello, 0, 1, blob));
    corpus.add("fabric_wire", "accept", 0, message(fabric::MessageType::kAccept, 1, 2, blob));
    corpus.add("fabric_wire", "data", 0, message(fabric::MessageType::kData, 1, 2, Bytes{'h', 'i'}));
    corpus.add("fabric_wire", "bye", 0, message(fabric::MessageType::kBye, 0, 2, {}));
    corpus.add("fabric_wire", "imm", 0, message(fabric::MessageType::kImm, 1, 2, imm));
    corpus.add("fabric_wire", "reject", 0, message(fabric::MessageType::kReject, 1, 0, {}));
    // Selector 1: the expected format, then a blob.
    Bytes format(4);
    afmesh::store_le32(format.data(), FI_SOCKADDR_IN);
    corpus.add("fabric_wire", "address", 1, cat({format, blob}));
}

void ibverbs_seeds(Corpus &corpus) {
    namespace ibverbs = afmesh::ibverbs;
    ibverbs::EndpointAddress v4, v6;
    auto &in = reinterpret_cast<sockaddr_in &>(v4.side_channel);
    in.sin_family = AF_INET;
    in.sin_port = htons(18515);
    inet_pton(AF_INET, "192.168.1.10", &in.sin_addr);
    v4.link = ibverbs::kLinkInfiniBand;
    v4.lid = 7;
    auto &in6 = reinterpret_cast<sockaddr_in6 &>(v6.side_channel);
    in6.sin6_family = AF_INET6;
    in6.sin6_port = htons(18516);
    inet_pton(AF_INET6, "fd00::10", &in6.sin6_addr);
    v6.link = ibverbs::kLinkEthernet;
    inet_pton(AF_INET6, "::ffff:192.168.1.10", v6.gid.raw);  // a RoCE v2 GID
    for (const auto &[name, address] : {std::pair{"address_v4", &v4}, std::pair{"address_v6", &v6}}) {
        Bytes blob(ibverbs::kAddressSize);
        ibverbs::encode_address(*address, blob.data());
        corpus.add("ibverbs_wire", name, 0, blob);
    }

    ibverbs::QpInfo info;
    info.link = ibverbs::kLinkEthernet;
    info.mtu = IBV_MTU_1024;
    info.qpn = 0x123;
    info.psn = 0x456;
    memcpy(info.gid.raw, v6.gid.raw, sizeof info.gid.raw);
    const struct {
        const char *name;
        ibverbs::HandshakeType type;
    } handshakes[] = {{"request", ibverbs::HandshakeType::kRequest},
                      {"reply", ibverbs::HandshakeType::kReply},
                      {"ready", ibverbs::HandshakeType::kReady}};
    for (const auto &h : handshakes) {
        Bytes bytes(ibverbs::kHandshakeSize);
        ibverbs::encode_handshake(h.type, info, bytes.data());
        corpus.add("ibverbs_wire", h.name, static_cast<uint8_t>(h.type), bytes);
    }
}

// ---- configuration ----

using namespace std::string_view_literals;

Bytes text(std::string_view s) { return Bytes(s.begin(), s.end()); }

void config_seeds(Corpus &corpus) {
    corpus.add("config", "afmesh",
               text("AFMESH_ROLE=worker\nAFMESH_NUM_WORKERS=2\nAFMESH_NUM_SERVERS=2\nAFMESH_RANK=1\n"
                    "AFMESH_SCHEDULER=10.0.0.1:9000\nAFMESH_TRANSPORT=fabric,tcp\nAFMESH_POLL=busy\n"
                    "AFMESH_EAGER_BYTES=4096\nAFMESH_CPU_CORES=4,5\nPATH=/usr/bin"));
    // StepMesh and ps-lite names, NUL-separated as in a real environment block (sv keeps the NULs).
    corpus.add("config", "stepmesh",
               text("DMLC_ROLE=server\0DMLC_NUM_WORKER=4\0DMLC_NUM_SERVER=1\0DMLC_PS_ROOT_URI=::1\0"
                    "DMLC_PS_ROOT_PORT=9000\0STEPMESH_BACKEND=GPU\0STEPMESH_GPU=3"sv));
    // Typos, values out of range and conflicts: every kind of note.
    corpus.add("config", "mistakes",
               text("AFMESH_NUM_WORKER=2\nAFMESH_HEARTBEAT_MS=5\nAFMESH_POLL=spin\nAFMESH_RANK= 3\n"
                    "AFMESH_ROLE=worker\nDMLC_ROLE=server\nDMLC_PS_ROOT_URI=host"));
    // A place taken from a job manager: AFMESH_LAYOUT with Open MPI's and Slurm's variables.
    corpus.add("config", "job",
               text("AFMESH_LAYOUT=servers:2\nAFMESH_SCHEDULER=10.0.0.1:9000\nOMPI_COMM_WORLD_RANK=3\n"
                    "OMPI_COMM_WORLD_SIZE=6\nOMPI_COMM_WORLD_LOCAL_RANK=1\nSLURM_PROCID=3\nSLURM_NTASKS=6"));
}

}  // namespace

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s <dir>   (writes <dir>/<fuzz target>/<seed>)\n", argv[0]);
        return 2;
    }
    Corpus corpus(argv[1]);
    control_seeds(corpus);
    data_seeds(corpus);
    tcp_seeds(corpus);
    fabric_seeds(corpus);
    ibverbs_seeds(corpus);
    config_seeds(corpus);
    return corpus.ok() ? 0 : 1;
}
