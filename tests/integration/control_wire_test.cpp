// SPDX-License-Identifier: Apache-2.0
// The control protocol's codec and addressing, without sockets: every message
// survives a round trip, and every truncation, oversized field or lying count
// is refused with a named field instead of being read past (the sanitizer
// builds turn any over-read into a failure).
#include <gtest/gtest.h>

#include "control/frame.h"
#include "control/messages.h"
#include "control/socket_util.h"

namespace afmesh::control {
namespace {

Roster sample_roster() {
    Roster r;
    r.workers = {{Role::kWorker, 0, "10.0.0.1", "tcp", {1, 2}, "cuda", 11},
                 {Role::kWorker, 1, "10.0.0.2", "tcp", {}, "", 12}};
    r.servers = {{Role::kServer, 0, "::1", "fabric", {9, 9, 9}, "hip", 0xfedcba9876543210}};
    for (size_t i = 0; i < r.cluster_key.size(); ++i) r.cluster_key[i] = static_cast<uint8_t>(i * 7 + 1);
    return r;
}

template <class Message>
Status decode_as(std::span<const uint8_t> payload) {
    Message m;
    return decode(payload, &m);
}

struct Sample {
    const char *what;
    std::vector<uint8_t> payload;
    Status (*decode)(std::span<const uint8_t>);
};

RejoinMsg sample_rejoin() {
    return {{{Role::kWorker, 1, "fabric", {1, 2}, "cpu"}, 2, 4, 100, 5000, ""}, 0x1234, sample_roster().cluster_key,
            {5, 0, 2}};
}

/** One encoded sample of every message type with a payload, and its decoder. */
std::vector<Sample> samples() {
    HelloMsg hello{{Role::kServer, 3, "tcp", {7, 8, 9}, "cpu"}, 2, 4, 100, 5000, "token"};
    return {
        {"HELLO", encode(hello), decode_as<HelloMsg>},
        {"PROGRESS", encode(ProgressMsg{ProgressPhase::kStop, 1, 2, "worker 1, server 0"}), decode_as<ProgressMsg>},
        {"ROSTER", encode(RosterMsg{1, sample_roster()}), decode_as<RosterMsg>},
        {"ERROR", encode(ErrorMsg{{Code::kAccess, "wrong auth token"}}), decode_as<ErrorMsg>},
        {"BARRIER", encode(BarrierMsg{BarrierGroup::kServers, 42}), decode_as<BarrierMsg>},
        {"BARRIER_DONE", encode(BarrierDoneMsg{BarrierGroup::kAll, 7, {Code::kPeerFailed, "server 0 failed"}}),
         decode_as<BarrierDoneMsg>},
        {"PEER_DOWN", encode(PeerDownMsg{Role::kWorker, 5, "no heartbeat for 5000 ms"}), decode_as<PeerDownMsg>},
        {"PEER_UP", encode(PeerUpMsg{sample_roster().workers.at(1)}), decode_as<PeerUpMsg>},
        {"PEER_UP_ACK", encode(PeerUpAckMsg{Role::kServer, 0, 77}), decode_as<PeerUpAckMsg>},
        {"ROSTER (replacement)", encode(RosterMsg{0, sample_roster(), true, {3, 0, 9}}), decode_as<RosterMsg>},
        {"STOP_DONE", encode(StopDoneMsg{Status::ok()}), decode_as<StopDoneMsg>},
        {"REJOIN", encode(sample_rejoin()), decode_as<RejoinMsg>},
    };
}

TEST(ControlWire, MessagesRoundTrip) {
    HelloMsg hello{{Role::kServer, 3, "tcp", {7, 8, 9}, "cpu"}, 2, 4, 100, 5000, "token"};
    HelloMsg hello_back;
    ASSERT_TRUE(decode(encode(hello), &hello_back));
    EXPECT_EQ(hello_back.hello.role, Role::kServer);
    EXPECT_EQ(hello_back.hello.requested_rank, 3);
    EXPECT_EQ(hello_back.hello.address, (std::vector<uint8_t>{7, 8, 9}));
    EXPECT_EQ(hello_back.hello.device, "cpu");
    EXPECT_EQ(hello_back.num_servers, 4);
    EXPECT_EQ(hello_back.heartbeat_timeout_ms, 5000u);
    EXPECT_EQ(hello_back.auth_token, "token");

    RosterMsg roster_back;
    ASSERT_TRUE(decode(with_your_rank(encode(RosterMsg{0, sample_roster()}), 1), &roster_back));
    EXPECT_EQ(roster_back.your_rank, 1);
    ASSERT_EQ(roster_back.roster.workers.size(), 2u);
    EXPECT_EQ(roster_back.roster.servers.at(0).host, "::1");
    EXPECT_EQ(roster_back.roster.servers.at(0).address, (std::vector<uint8_t>{9, 9, 9}));
    EXPECT_EQ(roster_back.roster.servers.at(0).incarnation, 0xfedcba9876543210u);
    EXPECT_EQ(roster_back.roster.workers.at(1).incarnation, 12u);
    EXPECT_EQ(roster_back.roster.cluster_key, sample_roster().cluster_key);
    EXPECT_FALSE(roster_back.replacement);

    RosterMsg replacement_back;
    ASSERT_TRUE(decode(encode(RosterMsg{1, sample_roster(), true, {3, 0, 9}}), &replacement_back));
    EXPECT_TRUE(replacement_back.replacement);
    EXPECT_EQ(replacement_back.barriers_done, (std::array<uint64_t, 3>{3, 0, 9}));
    RosterMsg with_down{1, sample_roster(), true, {}, {{Role::kServer, 0}}};
    ASSERT_TRUE(decode(encode(with_down), &replacement_back));
    ASSERT_EQ(replacement_back.down.size(), 1u);
    EXPECT_EQ(replacement_back.down[0], (NodeId{Role::kServer, 0}));
    with_down.down = {{Role::kServer, 1}};  // the sample roster has one server
    EXPECT_EQ(decode_as<RosterMsg>(encode(with_down)).code(), Code::kInvalidArgument);
    std::vector<uint8_t> bad_flag = encode(RosterMsg{1, sample_roster(), true, {}});
    bad_flag.at(4) = 2;  // the replacement flag follows your_rank
    EXPECT_EQ(decode_as<RosterMsg>(bad_flag).code(), Code::kInvalidArgument);

    PeerUpMsg up_back;
    ASSERT_TRUE(decode(encode(PeerUpMsg{sample_roster().servers.at(0)}), &up_back));
    EXPECT_EQ(up_back.entry.role, Role::kServer);
    EXPECT_EQ(up_back.entry.address, (std::vector<uint8_t>{9, 9, 9}));
    EXPECT_EQ(up_back.entry.incarnation, 0xfedcba9876543210u);

    RejoinMsg rejoin_back;
    ASSERT_TRUE(decode(encode(sample_rejoin()), &rejoin_back));
    EXPECT_EQ(rejoin_back.hello.hello.requested_rank, 1);
    EXPECT_EQ(rejoin_back.hello.hello.transport, "fabric");
    EXPECT_EQ(rejoin_back.incarnation, 0x1234u);
    EXPECT_EQ(rejoin_back.cluster_key, sample_roster().cluster_key);
    EXPECT_EQ(rejoin_back.barriers_entered, (std::array<uint64_t, 3>{5, 0, 2}));
    RejoinMsg rankless = sample_rejoin();
    rankless.hello.hello.requested_rank = -1;  // a rejoining node knows its rank
    EXPECT_EQ(decode_as<RejoinMsg>(encode(rankless)).code(), Code::kInvalidArgument);
    rankless = sample_rejoin();
    rankless.incarnation = 0;
    EXPECT_EQ(decode_as<RejoinMsg>(encode(rankless)).code(), Code::kInvalidArgument);

    BarrierDoneMsg done_back;
    ASSERT_TRUE(decode(encode(BarrierDoneMsg{BarrierGroup::kAll, 7, {Code::kPeerFailed, "gone"}}), &done_back));
    EXPECT_EQ(done_back.seq, 7u);
    EXPECT_EQ(done_back.status.code(), Code::kPeerFailed);
    EXPECT_EQ(done_back.status.message(), "gone");

    for (const Sample &sample : samples()) EXPECT_TRUE(sample.decode(sample.payload)) << sample.what;
    EXPECT_TRUE(decode_as<HeartbeatMsg>({}));
    EXPECT_TRUE(decode_as<StopMsg>({}));
    EXPECT_EQ(decode_as<StopMsg>(std::vector<uint8_t>{0}).code(), Code::kInvalidArgument);
}

TEST(ControlWire, EveryTruncationAndEveryExtraByteIsRefused) {
    for (const Sample &sample : samples()) {
        for (size_t cut = 0; cut < sample.payload.size(); ++cut) {
            // A copy of exactly `cut` bytes, so the sanitizers catch any read past it.
            std::vector<uint8_t> prefix(sample.payload.begin(), sample.payload.begin() + static_cast<std::ptrdiff_t>(cut));
            Status s = sample.decode(prefix);
            EXPECT_EQ(s.code(), Code::kInvalidArgument) << sample.what << " cut to " << cut << " bytes";
            EXPECT_NE(s.message().find("malformed"), std::string::npos) << s.to_string();
        }
        std::vector<uint8_t> longer = sample.payload;
        longer.push_back(0);
        EXPECT_EQ(sample.decode(longer).code(), Code::kInvalidArgument) << sample.what << " with a trailing byte";
    }
}

TEST(ControlWire, OutOfRangeFieldsAreRefusedByName) {
    std::vector<uint8_t> hello = encode(HelloMsg{{Role::kWorker, -1, "tcp", {}, "cpu"}, 1, 1, 10, 100, ""});
    hello[0] = 0;  // role: the scheduler is not a node
    HelloMsg m;
    Status s = decode(hello, &m);
    EXPECT_NE(s.message().find("'role'"), std::string::npos) << s.to_string();

    std::vector<uint8_t> barrier = encode(BarrierMsg{BarrierGroup::kAll, 1});
    barrier[0] = 9;
    BarrierMsg b;
    s = decode(barrier, &b);
    EXPECT_NE(s.message().find("'group'"), std::string::npos) << s.to_string();

    std::vector<uint8_t> error = encode(ErrorMsg{{Code::kAccess, "x"}});
    error[0] = 0x7f;  // no such status code
    ErrorMsg e;
    s = decode(error, &e);
    EXPECT_NE(s.message().find("'code'"), std::string::npos) << s.to_string();
}

TEST(ControlWire, ARosterThatLiesAboutItsSizeOrOrderIsRefused) {
    std::vector<uint8_t> roster = encode(RosterMsg{0, sample_roster()});
    std::vector<uint8_t> lying = roster;
    // The worker count (u32 after your_rank, the replacement flag, three barrier numbers, an empty
    // list of nodes down and the key), little-endian high byte: ~2 billion entries.
    lying[4 + 1 + 3 * 8 + 4 + crypto::kKeyBytes + 3] = 0x7f;
    RosterMsg m;
    Status s = decode(lying, &m);
    EXPECT_NE(s.message().find("cannot hold them"), std::string::npos) << s.to_string();

    Roster swapped = sample_roster();
    std::swap(swapped.workers[0], swapped.workers[1]);
    s = decode(encode(RosterMsg{0, swapped}), &m);
    EXPECT_NE(s.message().find("entry 0 is worker rank 1"), std::string::npos) << s.to_string();

    Roster unborn = sample_roster();
    unborn.servers[0].incarnation = 0;
    s = decode(encode(RosterMsg{0, unborn}), &m);
    EXPECT_NE(s.message().find("'entry incarnation' is 0"), std::string::npos) << s.to_string();
}

TEST(ControlWire, StringsOverTheirLimitAreRefusedAndFreeTextIsClipped) {
    HelloMsg hello{{Role::kWorker, -1, std::string(kMaxNameBytes + 1, 't'), {}, "cpu"}, 1, 1, 10, 100, ""};
    EXPECT_EQ(check_hello(hello).code(), Code::kInvalidArgument);
    HelloMsg back;
    Status s = decode(encode(hello), &back);
    EXPECT_NE(s.message().find("'transport' is 257 bytes, over its limit of 256"), std::string::npos) << s.to_string();

    PeerDownMsg down{Role::kServer, 0, std::string(kMaxTextBytes + 100, 'r')};
    PeerDownMsg down_back;
    ASSERT_TRUE(decode(encode(down), &down_back));
    EXPECT_EQ(down_back.reason.size(), kMaxTextBytes);
}

TEST(ControlWire, FrameHeadersAreChecked) {
    std::vector<uint8_t> frame;
    append_frame(MessageType::kHeartbeat, {}, &frame);
    ASSERT_EQ(frame.size(), kFrameHeaderBytes);
    FrameHeader header;
    auto head = [&] { return std::span<const uint8_t, kFrameHeaderBytes>(frame.data(), kFrameHeaderBytes); };
    ASSERT_TRUE(decode_frame_header(head(), &header));
    EXPECT_EQ(header.type, MessageType::kHeartbeat);
    EXPECT_EQ(header.payload_bytes, 0u);

    frame[0] ^= 0xff;
    EXPECT_EQ(decode_frame_header(head(), &header).code(), Code::kInvalidArgument);
    frame[0] ^= 0xff;
    frame[4] = static_cast<uint8_t>(kProtocolVersion + 1);  // version
    EXPECT_EQ(decode_frame_header(head(), &header).code(), Code::kUnsupportedVersion);
    frame[4] = static_cast<uint8_t>(kProtocolVersion);
    frame[11] = 0x01;  // length 16 MiB
    Status s = decode_frame_header(head(), &header);
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
    EXPECT_NE(s.message().find("frame limit"), std::string::npos) << s.to_string();
}

TEST(ControlWire, AddressesParse) {
    HostPort hp;
    ASSERT_TRUE(parse_host_port("127.0.0.1:5000", &hp));
    EXPECT_EQ(hp.host, "127.0.0.1");
    EXPECT_EQ(hp.port, "5000");
    ASSERT_TRUE(parse_host_port("[::1]:0", &hp));
    EXPECT_EQ(hp.host, "::1");
    EXPECT_EQ(hp.port, "0");
    ASSERT_TRUE(parse_host_port("scheduler.example:80", &hp));
    ASSERT_TRUE(parse_host_port(":7", &hp));
    EXPECT_EQ(hp.host, "");
    for (const char *bad : {"", "host", "::1:5000", "[::1]", "[::1]5000", "[::1:5000", "h:", "h:65536", "h:12a",
                            "h:-1", "h:123456"}) {
        EXPECT_EQ(parse_host_port(bad, &hp).code(), Code::kInvalidArgument) << bad;
    }
}

}  // namespace
}  // namespace afmesh::control
