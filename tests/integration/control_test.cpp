// SPDX-License-Identifier: Apache-2.0
// The control plane end to end: a scheduler and its workers and servers as
// threads of this process over loopback TCP, plus raw sockets that join and
// then fall silent or send garbage. Failure detection is checked only against
// generous deadlines, never exact timings.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "control_harness.h"

namespace afmesh::testing {
namespace {

using control::MessageType;

std::string describe(const RosterEntry &e) {
    return std::string(role_name(e.role)) + " " + std::to_string(e.rank) + " host=" + e.host + " transport=" +
           e.transport + " address=" + std::string(e.address.begin(), e.address.end()) + " device=" + e.device;
}

std::string describe(const Roster &roster) {
    std::string text;
    for (const auto *list : {&roster.workers, &roster.servers}) {
        for (const RosterEntry &e : *list) text += describe(e) + "\n";
    }
    return text;
}

/** This client's own entry in its roster. */
const RosterEntry &self(const ControlClient &client, Role role) {
    const auto &list = role == Role::kWorker ? client.roster().workers : client.roster().servers;
    return list.at(static_cast<size_t>(client.rank()));
}

Hello hello_as(Role role, int32_t rank = -1) { return {role, rank, "tcp", {}, "cpu"}; }

bool contains(const std::string &text, const std::string &part) { return text.find(part) != std::string::npos; }

TEST(ControlPlane, EveryNodeGetsTheSameRosterWithRanksAndAddresses) {
    ControlOptions options = test_options(2, 2);
    auto scheduler = start_scheduler(options);
    ASSERT_TRUE(scheduler);
    options.scheduler = scheduler->address();

    Joiner joiner(options);
    std::vector<Role> roles = {Role::kWorker, Role::kServer, Role::kWorker, Role::kServer};
    for (Role role : roles) joiner.start({role});
    std::vector<std::unique_ptr<ControlClient>> clients;
    for (size_t i = 0; i < roles.size(); ++i) {
        ASSERT_TRUE(joiner.status(i)) << joiner.status(i).to_string();
        clients.push_back(joiner.take(i));
    }

    const Roster &first = clients[0]->roster();
    ASSERT_EQ(first.workers.size(), 2u);
    ASSERT_EQ(first.servers.size(), 2u);
    std::set<std::pair<Role, int32_t>> seen;
    for (size_t i = 0; i < clients.size(); ++i) {
        EXPECT_EQ(describe(clients[i]->roster()), describe(first)) << "node " << i;
        const RosterEntry &mine = self(*clients[i], roles[i]);
        EXPECT_EQ(mine.role, roles[i]);
        EXPECT_EQ(mine.address, address_of(i)) << "node " << i << " is listed with another node's address";
        EXPECT_EQ(mine.host, "127.0.0.1");
        EXPECT_EQ(mine.transport, "tcp");
        EXPECT_EQ(mine.device, "cpu");
        seen.insert({roles[i], clients[i]->rank()});
    }
    EXPECT_EQ(seen.size(), 4u) << "two nodes got the same rank";

    for (const Status &s : stop_all(clients, 10s)) {
        EXPECT_TRUE(s) << s.to_string();
    }
    Status done = scheduler->wait(10s);
    EXPECT_TRUE(done) << done.to_string();
}

TEST(ControlPlane, RequestedRanksAreHonouredAndTheRestFillTheGaps) {
    ControlOptions options = test_options(3, 2);
    auto scheduler = start_scheduler(options);
    ASSERT_TRUE(scheduler);
    options.scheduler = scheduler->address();

    Joiner joiner(options);
    size_t w_any1 = joiner.start({Role::kWorker, -1});
    size_t w_two = joiner.start({Role::kWorker, 2});
    size_t w_any2 = joiner.start({Role::kWorker, -1});
    size_t s_any = joiner.start({Role::kServer, -1});
    size_t s_zero = joiner.start({Role::kServer, 0});
    for (size_t i : {w_any1, w_two, w_any2, s_any, s_zero}) ASSERT_TRUE(joiner.status(i)) << joiner.status(i).to_string();

    auto worker_any1 = joiner.take(w_any1), worker_two = joiner.take(w_two), worker_any2 = joiner.take(w_any2);
    auto server_any = joiner.take(s_any), server_zero = joiner.take(s_zero);
    EXPECT_EQ(worker_two->rank(), 2);
    EXPECT_EQ(server_zero->rank(), 0);
    EXPECT_EQ(server_any->rank(), 1);
    std::set<int32_t> filled = {worker_any1->rank(), worker_any2->rank()};
    EXPECT_EQ(filled, (std::set<int32_t>{0, 1}));
    EXPECT_EQ(self(*worker_two, Role::kWorker).address, address_of(w_two));
    EXPECT_EQ(self(*server_zero, Role::kServer).address, address_of(s_zero));
}

TEST(ControlPlane, ARankClashIsRefused) {
    ControlOptions options = test_options(2, 1);
    auto scheduler = start_scheduler(options);
    ASSERT_TRUE(scheduler);
    options.scheduler = scheduler->address();

    // Two nodes want worker rank 0. No roster can form without the others, so
    // the first to return is the one refused; the other joins once the rest come.
    Joiner joiner(options);
    joiner.start({Role::kWorker, 0});
    joiner.start({Role::kWorker, 0});
    std::optional<size_t> first = joiner.next_done(20s);
    ASSERT_TRUE(first);
    const Status &refused = joiner.status(*first);
    EXPECT_EQ(refused.code(), Code::kInvalidArgument) << refused.to_string();
    EXPECT_TRUE(contains(refused.message(), "worker rank 0 is already taken")) << refused.to_string();

    size_t c = joiner.start({Role::kWorker, 1});
    size_t s = joiner.start({Role::kServer, -1});
    size_t winner = 1 - *first;
    EXPECT_TRUE(joiner.status(winner)) << joiner.status(winner).to_string();
    EXPECT_TRUE(joiner.status(c)) << joiner.status(c).to_string();
    EXPECT_TRUE(joiner.status(s)) << joiner.status(s).to_string();
    EXPECT_EQ(joiner.take(winner)->rank(), 0);
}

TEST(ControlPlane, OneNodeMoreOfARoleThanTheClusterHasIsRefused) {
    ControlOptions options = test_options(2, 1);
    auto scheduler = start_scheduler(options);
    ASSERT_TRUE(scheduler);
    options.scheduler = scheduler->address();

    // No server yet, so no roster: the third worker can only be refused for the topology.
    Joiner joiner(options);
    for (int i = 0; i < 3; ++i) joiner.start({Role::kWorker});
    std::optional<size_t> first = joiner.next_done(20s);
    ASSERT_TRUE(first);
    const Status &refused = joiner.status(*first);
    EXPECT_EQ(refused.code(), Code::kInvalidArgument) << refused.to_string();
    EXPECT_TRUE(contains(refused.message(), "topology mismatch")) << refused.to_string();

    size_t server = joiner.start({Role::kServer});
    EXPECT_TRUE(joiner.status(server)) << joiner.status(server).to_string();
    for (size_t i = 0; i < 3; ++i) {
        if (i == *first) continue;
        EXPECT_TRUE(joiner.status(i)) << joiner.status(i).to_string();
    }
}

TEST(ControlPlane, ANodeWithAnotherTopologyIsRefused) {
    ControlOptions options = test_options(2, 2);
    auto scheduler = start_scheduler(options);
    ASSERT_TRUE(scheduler);
    options.scheduler = scheduler->address();

    Joiner joiner(options);
    size_t odd = joiner.start(NodeSpec(Role::kWorker).workers(3));
    EXPECT_EQ(joiner.status(odd).code(), Code::kInvalidArgument) << joiner.status(odd).to_string();
    EXPECT_TRUE(contains(joiner.status(odd).message(), "expects 3 workers and 2 servers, the scheduler 2 and 2"))
        << joiner.status(odd).to_string();
}

TEST(ControlPlane, AWrongOrMissingAuthTokenIsRefusedAndTheRightOneWorks) {
    ControlOptions options = test_options(1, 1);
    options.auth_token = "s3cret";
    auto scheduler = start_scheduler(options);
    ASSERT_TRUE(scheduler);
    options.scheduler = scheduler->address();

    Joiner joiner(options);
    size_t wrong = joiner.start(NodeSpec(Role::kWorker).token("guess"));
    EXPECT_EQ(joiner.status(wrong).code(), Code::kAccess) << joiner.status(wrong).to_string();
    EXPECT_TRUE(contains(joiner.status(wrong).message(), "wrong auth token")) << joiner.status(wrong).to_string();
    size_t missing = joiner.start(NodeSpec(Role::kServer).token(""));
    EXPECT_EQ(joiner.status(missing).code(), Code::kAccess) << joiner.status(missing).to_string();
    EXPECT_TRUE(contains(joiner.status(missing).message(), "requires an auth token"))
        << joiner.status(missing).to_string();

    size_t worker = joiner.start({Role::kWorker});
    size_t server = joiner.start({Role::kServer});
    EXPECT_TRUE(joiner.status(worker)) << joiner.status(worker).to_string();
    EXPECT_TRUE(joiner.status(server)) << joiner.status(server).to_string();
}

TEST(ControlPlane, ANodeThatNeverComesTimesEveryoneOutNamingWhatIsMissing) {
    ControlOptions options = test_options(2, 2);
    options.connect_timeout = 1500ms;
    auto scheduler = start_scheduler(options);
    ASSERT_TRUE(scheduler);
    options.scheduler = scheduler->address();

    Joiner joiner(options);
    for (Role role : {Role::kWorker, Role::kWorker, Role::kServer}) joiner.start({role});
    for (size_t i = 0; i < 3; ++i) {
        const Status &s = joiner.status(i);
        EXPECT_EQ(s.code(), Code::kTimeout) << s.to_string();
        // The report can be one heartbeat old (how many workers had joined
        // then), but the server that never comes is always named.
        EXPECT_TRUE(contains(s.message(), "still waiting for")) << s.to_string();
        EXPECT_TRUE(contains(s.message(), "and 1 of 2 server(s)")) << s.to_string();
    }
    Status waiting = scheduler->wait(10ms);
    EXPECT_EQ(waiting.code(), Code::kTimeout);
}

TEST(ControlPlane, AnUnreachableSchedulerTimesOut) {
    // A port that was free a moment ago and has no listener now.
    std::string address;
    {
        control::UniqueFd fd;
        ASSERT_TRUE(control::listen_tcp("127.0.0.1:0", &fd, &address));
    }
    ControlOptions options = test_options(1, 1);
    options.scheduler = address;
    options.connect_timeout = 300ms;
    std::unique_ptr<ControlClient> client;
    Status s = ControlClient::connect(options, hello_as(Role::kWorker), {}, &client);
    EXPECT_EQ(s.code(), Code::kTimeout) << s.to_string();
    EXPECT_TRUE(contains(s.message(), "could not reach the scheduler at " + address)) << s.to_string();
}

TEST(ControlPlane, ConnectRefusesBadArgumentsBeforeDialling) {
    ControlOptions options = test_options(2, 2);
    options.scheduler = "127.0.0.1:1";
    std::unique_ptr<ControlClient> client;
    EXPECT_EQ(ControlClient::connect(options, hello_as(Role::kScheduler), {}, &client).code(), Code::kInvalidArgument);
    EXPECT_EQ(ControlClient::connect(options, hello_as(Role::kWorker, 2), {}, &client).code(), Code::kInvalidArgument);
    ControlOptions no_port = options;
    no_port.scheduler = "localhost";
    EXPECT_EQ(ControlClient::connect(no_port, hello_as(Role::kWorker), {}, &client).code(), Code::kInvalidArgument);
    ControlOptions bare_v6 = options;
    bare_v6.scheduler = "::1:5000";
    EXPECT_EQ(ControlClient::connect(bare_v6, hello_as(Role::kWorker), {}, &client).code(), Code::kInvalidArgument);
    ControlOptions slow_heartbeat = options;
    slow_heartbeat.heartbeat_interval = slow_heartbeat.heartbeat_timeout;
    EXPECT_EQ(ControlClient::connect(slow_heartbeat, hello_as(Role::kWorker), {}, &client).code(), Code::kInvalidArgument);
    Hello huge{Role::kWorker, -1, "tcp", std::vector<uint8_t>(control::kMaxAddressBytes + 1), "cpu"};
    EXPECT_EQ(ControlClient::connect(options, huge, {}, &client).code(), Code::kInvalidArgument);
    EXPECT_FALSE(client);
}

TEST(ControlPlane, BarriersOverEachGroupRelease) {
    auto cluster = start_cluster(test_options(2, 2));
    ASSERT_TRUE(cluster);
    auto &[options, scheduler, log, clients] = *cluster;
    std::vector<ControlClient *> workers = {clients[0].get(), clients[1].get()};
    std::vector<ControlClient *> servers = {clients[2].get(), clients[3].get()};

    for (int round = 0; round < 2; ++round) {
        for (const Status &s : on_each(workers, [](ControlClient &c) { return c.barrier(BarrierGroup::kWorkers, 10s); })) {
            EXPECT_TRUE(s) << s.to_string();
        }
        for (const Status &s : on_each(servers, [](ControlClient &c) { return c.barrier(BarrierGroup::kServers, 10s); })) {
            EXPECT_TRUE(s) << s.to_string();
        }
        for (const Status &s : barrier_all(clients, 10s)) {
            EXPECT_TRUE(s) << s.to_string();
        }
    }
    Status outsider = servers[0]->barrier(BarrierGroup::kWorkers, 10s);
    EXPECT_EQ(outsider.code(), Code::kInvalidArgument) << outsider.to_string();
}

TEST(ControlPlane, ABarrierTimesOutWhileAMemberIsAbsentThenStillLinesUp) {
    auto cluster = start_cluster(test_options(2, 1));
    ASSERT_TRUE(cluster);
    auto &[options, scheduler, log, clients] = *cluster;

    Status alone = clients[0]->barrier(BarrierGroup::kWorkers, 100ms);
    EXPECT_EQ(alone.code(), Code::kTimeout) << alone.to_string();
    // The late worker releases barrier 1 (which worker 0 gave up on); both then meet at barrier 2.
    EXPECT_TRUE(clients[1]->barrier(BarrierGroup::kWorkers, 10s));
    std::vector<ControlClient *> workers = {clients[0].get(), clients[1].get()};
    for (const Status &s : on_each(workers, [](ControlClient &c) { return c.barrier(BarrierGroup::kWorkers, 10s); })) {
        EXPECT_TRUE(s) << s.to_string();
    }
}

TEST(ControlPlane, ABarrierFailsWhenAMemberDies) {
    auto cluster = start_cluster(test_options(2, 1));
    ASSERT_TRUE(cluster);
    auto &[options, scheduler, log, clients] = *cluster;

    std::thread kill([&] { cluster->clients[2].reset(); });  // clang 14 captures no structured binding
    Status s = clients[0]->barrier(BarrierGroup::kAll, 20s);
    kill.join();
    EXPECT_EQ(s.code(), Code::kPeerFailed) << s.to_string();
    EXPECT_TRUE(contains(s.message(), "server 0 failed")) << s.to_string();
}

TEST(ControlPlane, StopWithADeadNodeReturnsAndNamesIt) {
    auto cluster = start_cluster(test_options(2, 2));
    ASSERT_TRUE(cluster);
    auto &[options, scheduler, log, clients] = *cluster;
    // join_cluster lists workers first, so the servers are the last two.
    size_t dead = clients[2]->rank() == 1 ? 2 : 3;
    clients[dead].reset();  // abrupt: no stop()

    ASSERT_TRUE(log.wait_for_count(3, 20s)) << "PEER_DOWN did not reach every survivor";
    for (const auto &notice : log.notices()) {
        EXPECT_EQ(notice.role, Role::kServer) << notice.observer;
        EXPECT_EQ(notice.rank, 1) << notice.observer;
        EXPECT_TRUE(contains(notice.reason, "connection closed")) << notice.reason;
    }
    for (const Status &s : stop_all(clients, 20s)) {
        EXPECT_EQ(s.code(), Code::kPeerFailed) << s.to_string();
        EXPECT_TRUE(contains(s.message(), "server 1 (connection closed")) << s.to_string();
    }
    Status done = scheduler->wait(20s);
    EXPECT_EQ(done.code(), Code::kPeerFailed) << done.to_string();
    EXPECT_TRUE(contains(done.message(), "server 1")) << done.to_string();
}

TEST(ControlPlane, StopTimesOutNamingWhoIsMissingAndCompletesLater) {
    auto cluster = start_cluster(test_options(1, 2));
    ASSERT_TRUE(cluster);
    auto &[options, scheduler, log, clients] = *cluster;
    ControlClient *late = clients[1]->rank() == 1 ? clients[1].get() : clients[2].get();
    std::vector<ControlClient *> early;
    for (const auto &c : clients) {
        if (c.get() != late) early.push_back(c.get());
    }

    for (const Status &s : on_each(early, [](ControlClient &c) { return c.stop(1500ms); })) {
        EXPECT_EQ(s.code(), Code::kTimeout) << s.to_string();
        EXPECT_TRUE(contains(s.message(), "still waiting for server 1")) << s.to_string();
    }
    EXPECT_EQ(late->barrier(BarrierGroup::kServers, 10s).code(), Code::kPeerFailed)
        << "a barrier with a stopped member must fail, not hang";
    Status last = late->stop(20s);
    EXPECT_TRUE(last) << last.to_string();
    for (ControlClient *c : early) {
        Status again = c->stop(20s);
        EXPECT_TRUE(again) << again.to_string();
    }
    Status done = scheduler->wait(20s);
    EXPECT_TRUE(done) << done.to_string();
}

TEST(ControlPlane, ASilentNodeIsDeclaredDeadAndReportedToTheOthers) {
    ControlOptions options = test_options(2, 1);
    options.heartbeat_timeout = 1000ms;
    auto scheduler = start_scheduler(options);
    ASSERT_TRUE(scheduler);
    options.scheduler = scheduler->address();

    MembershipLog log;
    Joiner joiner(options, &log);
    joiner.start({Role::kWorker});
    joiner.start({Role::kWorker});

    // The server is a raw socket: it heartbeats until the roster arrives, then goes silent.
    RawPeer silent(options.scheduler);
    ASSERT_TRUE(silent.connected());
    ASSERT_TRUE(silent.send_frame(MessageType::kHello, hello_payload(options, Role::kServer, 0)));
    auto deadline = control::Clock::now() + 20s;
    bool rostered = false;
    while (!rostered && control::Clock::now() < deadline) {
        control::Frame frame;
        RawPeer::Event event = silent.read(&frame, 50ms);
        ASSERT_NE(event, RawPeer::Event::kClosed);
        rostered = event == RawPeer::Event::kFrame && frame.type == MessageType::kRoster;
        ASSERT_TRUE(silent.send_frame(MessageType::kHeartbeat, {}));
    }
    ASSERT_TRUE(rostered);
    auto worker0 = joiner.take(0), worker1 = joiner.take(1);
    ASSERT_TRUE(worker0 && worker1);

    // Generous bound: the timeout, plus slack for a loaded machine.
    ASSERT_TRUE(log.wait_for_count(2, options.heartbeat_timeout + 15s));
    for (const auto &notice : log.notices()) {
        EXPECT_EQ(notice.role, Role::kServer);
        EXPECT_EQ(notice.rank, 0);
        EXPECT_TRUE(contains(notice.reason, "no heartbeat")) << notice.reason;
    }
    std::optional<Status> eviction;
    EXPECT_TRUE(silent.wait_closed(10s, &eviction));
    ASSERT_TRUE(eviction);
    EXPECT_EQ(eviction->code(), Code::kPeerFailed);
    EXPECT_TRUE(contains(eviction->message(), "declared dead")) << eviction->to_string();
}

TEST(ControlPlane, LosingTheSchedulerIsReportedToEveryClient) {
    auto cluster = start_cluster(test_options(1, 1));
    ASSERT_TRUE(cluster);
    auto &[options, scheduler, log, clients] = *cluster;

    scheduler.reset();
    ASSERT_TRUE(log.wait_for_count(2, 20s));
    for (const auto &notice : log.notices()) EXPECT_EQ(notice.role, Role::kScheduler) << notice.observer;
    Status after = clients[0]->barrier(BarrierGroup::kAll, 10s);
    EXPECT_EQ(after.code(), Code::kPeerFailed) << after.to_string();
    EXPECT_EQ(clients[1]->stop(10s).code(), Code::kPeerFailed);
}

/** Sends `bytes` as a fresh connection and expects the scheduler to close it, returning its ERROR if any. */
std::optional<Status> expect_rejected(const std::string &scheduler, const std::vector<uint8_t> &bytes,
                                      bool half_close = false) {
    RawPeer peer(scheduler);
    EXPECT_TRUE(peer.connected());
    EXPECT_TRUE(peer.send_bytes(bytes));
    if (half_close) peer.shutdown_write();
    std::optional<Status> error;
    EXPECT_TRUE(peer.wait_closed(20s, &error)) << "the scheduler kept a malformed connection open";
    return error;
}

TEST(ControlPlane, MalformedFramesAreRejectedWithoutHarmingOthers) {
    ControlOptions options = test_options(1, 1);
    auto scheduler = start_scheduler(options);
    ASSERT_TRUE(scheduler);
    options.scheduler = scheduler->address();
    const auto hello = static_cast<uint16_t>(MessageType::kHello);

    // A peer stuck half-way through a header must not hold anyone up.
    RawPeer stalled(options.scheduler);
    ASSERT_TRUE(stalled.send_bytes(std::vector<uint8_t>(5, 0x41)));

    std::string http = "GET / HTTP/1.1\r\n\r\n";
    auto bad_magic = expect_rejected(options.scheduler, {http.begin(), http.end()});
    ASSERT_TRUE(bad_magic);
    EXPECT_TRUE(contains(bad_magic->message(), "bad frame magic")) << bad_magic->to_string();

    auto huge = expect_rejected(options.scheduler, raw_header(control::kFrameMagic, control::kProtocolVersion, hello,
                                                              0xffffffffu));
    ASSERT_TRUE(huge);
    EXPECT_EQ(huge->code(), Code::kInvalidArgument);
    EXPECT_TRUE(contains(huge->message(), "frame limit")) << huge->to_string();

    // Within the protocol's frame limit, but bigger than anything a node sends.
    auto oversized = expect_rejected(options.scheduler, raw_header(control::kFrameMagic, control::kProtocolVersion,
                                                                   hello, control::kMaxNodePayload + 1));
    ASSERT_TRUE(oversized);
    EXPECT_TRUE(contains(oversized->message(), "limit for what this side receives")) << oversized->to_string();

    auto version = expect_rejected(options.scheduler, raw_header(control::kFrameMagic, 99, hello, 0));
    ASSERT_TRUE(version);
    EXPECT_EQ(version->code(), Code::kUnsupportedVersion) << version->to_string();

    // Truncated frame: the header promises 100 bytes, 10 come, then end of stream.
    std::vector<uint8_t> cut = raw_header(control::kFrameMagic, control::kProtocolVersion, hello, 100);
    cut.resize(cut.size() + 10, 0);
    expect_rejected(options.scheduler, cut, /*half_close=*/true);

    // Truncated HELLO: a complete frame whose payload stops inside a field.
    std::vector<uint8_t> short_hello = hello_payload(options, Role::kWorker, -1);
    short_hello.resize(7);
    std::vector<uint8_t> frame;
    control::append_frame(MessageType::kHello, short_hello, &frame);
    auto malformed = expect_rejected(options.scheduler, frame);
    ASSERT_TRUE(malformed);
    EXPECT_TRUE(contains(malformed->message(), "malformed HELLO")) << malformed->to_string();

    // A string length that runs past the payload.
    std::vector<uint8_t> lying = hello_payload(options, Role::kWorker, -1);
    lying[24] = 0xff;  // the auth token's length is the u32 (little-endian) after role, rank, counts and timings
    frame.clear();
    control::append_frame(MessageType::kHello, lying, &frame);
    auto overlong = expect_rejected(options.scheduler, frame);
    ASSERT_TRUE(overlong);
    EXPECT_TRUE(contains(overlong->message(), "auth_token")) << overlong->to_string();

    frame.clear();
    control::append_frame(MessageType::kStop, {}, &frame);
    auto not_hello = expect_rejected(options.scheduler, frame);
    ASSERT_TRUE(not_hello);
    EXPECT_TRUE(contains(not_hello->message(), "unexpected STOP")) << not_hello->to_string();

    frame.clear();
    control::append_frame(MessageType::kHello, hello_payload(options, Role::kWorker, 5), &frame);
    auto out_of_range = expect_rejected(options.scheduler, frame);
    ASSERT_TRUE(out_of_range);
    EXPECT_EQ(out_of_range->code(), Code::kInvalidArgument);
    EXPECT_TRUE(contains(out_of_range->message(), "rank 5 is out of range")) << out_of_range->to_string();

    auto clients = join_cluster(options);
    ASSERT_EQ(pointers(clients).size(), 2u);
    for (const Status &s : stop_all(clients, 10s)) {
        EXPECT_TRUE(s) << s.to_string();
    }
    EXPECT_TRUE(scheduler->wait(20s));
}

TEST(ControlPlane, WorksOverIpv6Loopback) {
    ControlOptions options = test_options(1, 1);
    std::unique_ptr<Scheduler> scheduler;
    Status s = Scheduler::start(options, "[::1]:0", &scheduler);
    if (!s) GTEST_SKIP() << "no IPv6 loopback here: " << s.to_string();
    options.scheduler = scheduler->address();
    EXPECT_TRUE(contains(options.scheduler, "[::1]:")) << options.scheduler;
    auto clients = join_cluster(options);
    ASSERT_EQ(pointers(clients).size(), 2u);
    EXPECT_EQ(clients[0]->roster().workers.at(0).host, "::1");
    for (const Status &stopped : stop_all(clients, 10s)) {
        EXPECT_TRUE(stopped) << stopped.to_string();
    }
}

// A failed node's place is taken by a new process under the same role and
// rank: the survivors hear PEER_UP with its new incarnation, barriers line up
// with it, and the cluster stops cleanly. A node that replaces nobody alive
// is refused.
TEST(ControlPlane, AFailedNodeIsReplacedUnderItsRank) {
    auto cluster = start_cluster(test_options(2, 1));
    ASSERT_TRUE(cluster);
    auto &[options, scheduler, log, clients] = *cluster;
    const int32_t dead_rank = clients[1]->rank();  // workers come first
    const uint64_t old_incarnation = clients[0]->roster().workers.at(static_cast<size_t>(dead_rank)).incarnation;
    clients[1].reset();  // abrupt: no stop()
    ASSERT_TRUE(log.wait_for_count(2, 20s)) << "PEER_DOWN did not reach both survivors";

    std::unique_ptr<ControlClient> intruder;
    Status refused = ControlClient::connect(options, hello_as(Role::kServer, 0), {}, &intruder);
    EXPECT_EQ(refused.code(), Code::kInvalidArgument) << refused.to_string();
    EXPECT_TRUE(contains(refused.message(), "server 0 is alive")) << refused.to_string();

    Status joined = ControlClient::connect(options, hello_as(Role::kWorker, dead_rank), log.callbacks("replacement"),
                                           &clients[1]);
    ASSERT_TRUE(joined) << joined.to_string();
    EXPECT_TRUE(clients[1]->replacement());
    EXPECT_FALSE(clients[0]->replacement());
    const uint64_t new_incarnation = clients[1]->roster().workers.at(static_cast<size_t>(dead_rank)).incarnation;
    EXPECT_NE(new_incarnation, old_incarnation);
    ASSERT_TRUE(log.wait_for_count(4, 20s)) << "PEER_UP did not reach both survivors";
    for (const auto &notice : log.notices()) {
        if (!notice.up) continue;
        EXPECT_EQ(notice.role, Role::kWorker) << notice.observer;
        EXPECT_EQ(notice.rank, dead_rank) << notice.observer;
        EXPECT_EQ(notice.incarnation, new_incarnation) << notice.observer;
    }

    EXPECT_TRUE(clients[1]->down_at_join().empty()) << "nobody else was down";

    for (const Status &s : barrier_all(clients, 20s))
        EXPECT_TRUE(s) << s.to_string();
    for (const Status &s : stop_all(clients, 20s))
        EXPECT_TRUE(s) << s.to_string();
    Status done = scheduler->wait(20s);
    EXPECT_TRUE(done) << done.to_string();
}

// Two nodes down at once: the first replacement is told the other is down,
// so that it neither dials nor waits for it.
TEST(ControlPlane, AReplacementIsToldWhichOthersAreDown) {
    auto cluster = start_cluster(test_options(2, 1));
    ASSERT_TRUE(cluster);
    auto &[options, scheduler, log, clients] = *cluster;
    const int32_t dead_worker = clients[1]->rank();
    clients[1].reset();
    clients[2].reset();  // the server
    ASSERT_TRUE(log.wait_for_count(2, 20s)) << "worker 0 did not hear of both";

    std::unique_ptr<ControlClient> replacement;
    Status joined = ControlClient::connect(options, hello_as(Role::kWorker, dead_worker), {}, &replacement);
    ASSERT_TRUE(joined) << joined.to_string();
    EXPECT_EQ(replacement->down_at_join(), (std::vector<std::pair<Role, int32_t>>{{Role::kServer, 0}}));
}

}  // namespace
}  // namespace afmesh::testing
