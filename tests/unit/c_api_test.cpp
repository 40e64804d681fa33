// SPDX-License-Identifier: Apache-2.0
// The C API's error paths, in one process: a scheduler, one server and one
// worker over the default transport. Every misuse must come back as a status
// with a message, and leave the node usable.
#include <gtest/gtest.h>

#include <afmesh/afmesh.h>
#include <afmesh/afmesh.hpp>

#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "free_port.h"

namespace {

afmesh_status create(afmesh_role role, const std::string &scheduler, std::vector<std::string> settings,
                     afmesh_node **node) {
    settings.push_back("AFMESH_NUM_WORKERS=1");
    settings.push_back("AFMESH_NUM_SERVERS=1");
    settings.push_back("AFMESH_CONNECT_TIMEOUT_MS=20000");
    std::vector<const char *> list;
    for (const std::string &s : settings) list.push_back(s.c_str());
    list.push_back(nullptr);
    afmesh_config config{};
    config.struct_size = sizeof config;
    config.role = role;
    config.scheduler = scheduler.c_str();
    config.settings = list.data();
    return afmesh_node_create(&config, node);
}

using afmesh::api::host_bytes;

std::string last_error() { return afmesh_last_error(); }

TEST(CApi, NamesEveryStatus) {
    EXPECT_STREQ(afmesh_strerror(AFMESH_OK), "AFMESH_OK");
    EXPECT_STREQ(afmesh_strerror(AFMESH_ERR_TIMEOUT), "AFMESH_ERR_TIMEOUT");
    EXPECT_STREQ(afmesh_strerror(static_cast<afmesh_status>(-12345)), "AFMESH_ERR_UNKNOWN");
    EXPECT_GT(strlen(afmesh_version()), 0u);
}

TEST(CApi, NullArgumentsAreRefusedWithAReason) {
    EXPECT_EQ(afmesh_wait(nullptr, 1, 0), AFMESH_ERR_INVALID_ARGUMENT);
    EXPECT_NE(last_error().find("not a worker"), std::string::npos) << last_error();
    EXPECT_EQ(afmesh_node_create(nullptr, nullptr), AFMESH_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(afmesh_node_destroy(nullptr), AFMESH_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(afmesh_request_info(nullptr, nullptr, nullptr, nullptr), AFMESH_ERR_INVALID_ARGUMENT);
}

TEST(CApi, UnknownSettingGetsADidYouMean) {
    afmesh_node *node = nullptr;
    EXPECT_EQ(create(AFMESH_ROLE_WORKER, "127.0.0.1:1", {"AFMESH_NUM_WORKER=2"}, &node), AFMESH_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(node, nullptr);
    EXPECT_NE(last_error().find("did you mean AFMESH_NUM_WORKERS"), std::string::npos) << last_error();
}

// A module's setting given in the config struct: known before any module was
// loaded (typos get a did-you-mean), and one value for the whole process.
TEST(CApi, AModulesSettingIsKnownAndHoldsForTheProcess) {
    afmesh_node *node = nullptr;
    EXPECT_EQ(create(AFMESH_ROLE_WORKER, "127.0.0.1:1", {"AFMESH_TCP_BND=127.0.0.1"}, &node), AFMESH_ERR_INVALID_ARGUMENT);
    EXPECT_NE(last_error().find("did you mean AFMESH_TCP_BIND"), std::string::npos) << last_error();
    // Accepted, and the setting after it is the one refused: nothing connects.
    EXPECT_EQ(create(AFMESH_ROLE_WORKER, "127.0.0.1:1", {"AFMESH_TCP_BIND=127.0.0.1", "AFMESH_POLL=fast"}, &node),
              AFMESH_ERR_INVALID_ARGUMENT);
    EXPECT_NE(last_error().find("AFMESH_POLL"), std::string::npos) << last_error();
    EXPECT_EQ(create(AFMESH_ROLE_WORKER, "127.0.0.1:1", {"AFMESH_TCP_BIND=127.0.0.2"}, &node), AFMESH_ERR_INVALID_ARGUMENT);
    EXPECT_NE(last_error().find("another node of this process was given another value"), std::string::npos)
        << last_error();
    EXPECT_EQ(node, nullptr);
}

TEST(CApi, BadSettingValueIsRefused) {
    afmesh_node *node = nullptr;
    EXPECT_EQ(create(AFMESH_ROLE_WORKER, "127.0.0.1:1", {"AFMESH_POLL=fast"}, &node), AFMESH_ERR_INVALID_ARGUMENT);
    EXPECT_NE(last_error().find("busy|adaptive|blocking"), std::string::npos) << last_error();
}

TEST(CApi, ASchedulerThatCannotListenIsAnErrorNotACrash) {
    afmesh_node *node = nullptr;
    // 203.0.113.0/24 is TEST-NET-3: no interface of this host has it.
    EXPECT_NE(create(AFMESH_ROLE_SCHEDULER, "203.0.113.1:0", {}, &node), AFMESH_OK);
    EXPECT_EQ(node, nullptr);
    EXPECT_NE(last_error().find("cannot listen on 203.0.113.1:0"), std::string::npos) << last_error();
}

// One scheduler, one server, one worker in this process.
class CApiCluster : public ::testing::Test {
protected:
    void SetUp() override {
        const std::string address = afmesh::with_free_port("127.0.0.1:0");
        ASSERT_EQ(create(AFMESH_ROLE_SCHEDULER, address, {}, &scheduler_), AFMESH_OK) << last_error();
        afmesh_status server_status = AFMESH_ERR_INTERNAL;
        std::thread server([&] { server_status = create(AFMESH_ROLE_SERVER, address, {}, &server_); });
        ASSERT_EQ(create(AFMESH_ROLE_WORKER, address, {}, &worker_), AFMESH_OK) << last_error();
        server.join();
        ASSERT_EQ(server_status, AFMESH_OK);
    }

    void TearDown() override {
        // Stopping is collective: both stop at once, then the scheduler ends.
        std::thread server([&] {
            if (server_) afmesh_node_destroy(server_);
        });
        if (worker_) afmesh_node_destroy(worker_);
        server.join();
        if (scheduler_) afmesh_node_destroy(scheduler_);
    }

    // Starts a push-pull of `push` bytes, pulling into `pull` (through
    // afmesh_push_pull_on_stream without a stream when `on_stream`).
    afmesh_handle start(std::vector<uint8_t> &push, std::vector<uint8_t> &pull, bool on_stream = false) {
        afmesh_push p{};
        p.key = 1;
        p.tensor = host_bytes(push.data(), push.size());
        afmesh_pull q{};
        q.key = 2;
        q.tensor = host_bytes(pull.data(), pull.size());
        q.server = 0;
        afmesh_handle h = 0;
        const afmesh_status started = on_stream ? afmesh_push_pull_on_stream(worker_, &p, 1, &q, 1, nullptr, &h)
                                                : afmesh_push_pull(worker_, &p, 1, &q, 1, &h);
        EXPECT_EQ(started, AFMESH_OK) << last_error();
        return h;
    }

    afmesh_request *one_request() {
        afmesh_request *r = nullptr;
        size_t n = 0;
        EXPECT_EQ(afmesh_get_batch(server_, AFMESH_BATCH_ALL_WORKERS, 20000, &r, 1, &n), AFMESH_OK) << last_error();
        EXPECT_EQ(n, 1u);
        return r;
    }

    afmesh_node *scheduler_ = nullptr, *server_ = nullptr, *worker_ = nullptr;
};

// Nodes of the cluster's start are no replacements; the question needs a
// worker or server and somewhere to put the answer.
TEST_F(CApiCluster, NodesOfTheStartAreNoReplacements) {
    int replacement = -1;
    ASSERT_EQ(afmesh_node_is_replacement(worker_, &replacement), AFMESH_OK) << last_error();
    EXPECT_EQ(replacement, 0);
    ASSERT_EQ(afmesh_node_is_replacement(server_, &replacement), AFMESH_OK) << last_error();
    EXPECT_EQ(replacement, 0);
    EXPECT_EQ(afmesh_node_is_replacement(server_, nullptr), AFMESH_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(afmesh_node_is_replacement(scheduler_, &replacement), AFMESH_ERR_INVALID_ARGUMENT);
}

// A server that stops is reported to the worker once, as PEER_DOWN with
// CLOSED: its goodbye, then the scheduler's word, are one event.
TEST_F(CApiCluster, APeerThatStopsIsReportedOnce) {
    afmesh_event event{};
    EXPECT_EQ(afmesh_next_event(worker_, &event, 0), AFMESH_ERR_INVALID_ARGUMENT) << "struct_size 0 is refused";
    event.struct_size = sizeof event;
    EXPECT_EQ(afmesh_next_event(worker_, &event, 0), AFMESH_ERR_TIMEOUT) << "nothing has happened yet";
    EXPECT_EQ(afmesh_next_event(scheduler_, &event, 0), AFMESH_ERR_INVALID_ARGUMENT) << "the scheduler has none";

    // Stopping is collective: the server's destroy returns once the worker stops too.
    std::thread server([node = std::exchange(server_, nullptr)] { afmesh_node_destroy(node); });
    ASSERT_EQ(afmesh_next_event(worker_, &event, 20000), AFMESH_OK) << last_error();
    EXPECT_EQ(event.type, AFMESH_EVENT_PEER_DOWN);
    EXPECT_EQ(event.role, AFMESH_ROLE_SERVER);
    EXPECT_EQ(event.rank, 0);
    EXPECT_NE(event.incarnation, 0u);
    EXPECT_EQ(event.status, AFMESH_ERR_CLOSED);
    EXPECT_NE(std::string(event.reason).find("stopped"), std::string::npos) << event.reason;
    EXPECT_EQ(afmesh_next_event(worker_, &event, 200), AFMESH_ERR_TIMEOUT) << "reported once: " << event.reason;

    afmesh_node_destroy(std::exchange(worker_, nullptr));
    server.join();
}

TEST_F(CApiCluster, UnknownHandle) {
    EXPECT_EQ(afmesh_wait(worker_, 123456789, 0), AFMESH_ERR_NOT_FOUND);
    EXPECT_NE(last_error().find("unknown handle"), std::string::npos) << last_error();
    EXPECT_EQ(afmesh_test(worker_, 42), AFMESH_ERR_NOT_FOUND);
}

TEST_F(CApiCluster, RoleMismatchIsRefused) {
    size_t n = 0;
    afmesh_request *r = nullptr;
    EXPECT_EQ(afmesh_get_batch(worker_, AFMESH_BATCH_ANY, 0, &r, 1, &n), AFMESH_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(afmesh_wait(server_, 1, 0), AFMESH_ERR_INVALID_ARGUMENT);
}

TEST_F(CApiCluster, BadPushPullArguments) {
    std::vector<uint8_t> buf(64);
    afmesh_push p{};
    p.tensor = host_bytes(buf.data(), buf.size());
    afmesh_handle h;
    int32_t nowhere = 7;
    p.servers = &nowhere;
    p.num_servers = 1;
    EXPECT_EQ(afmesh_push_pull(worker_, &p, 1, nullptr, 0, &h), AFMESH_ERR_INVALID_ARGUMENT);
    EXPECT_NE(last_error().find("server 7 does not exist"), std::string::npos) << last_error();
    p.num_servers = 0;
    p.tensor.ndim = AFMESH_MAX_DIMS + 1;
    EXPECT_EQ(afmesh_push_pull(worker_, &p, 1, nullptr, 0, &h), AFMESH_ERR_INVALID_ARGUMENT);
    EXPECT_NE(last_error().find("dimensions"), std::string::npos) << last_error();
    EXPECT_EQ(afmesh_push_pull(worker_, nullptr, 0, nullptr, 0, &h), AFMESH_ERR_INVALID_ARGUMENT);
    // 500 pulls of 16 dimensions need more metadata than one tcp message
    // (64 KiB) holds: refused at the call, before anything is posted.
    std::vector<afmesh_pull> many(500);
    for (afmesh_pull &q : many) q.tensor.ndim = AFMESH_MAX_DIMS;
    EXPECT_EQ(afmesh_push_pull(worker_, nullptr, 0, many.data(), many.size(), &h), AFMESH_ERR_INVALID_ARGUMENT);
    EXPECT_NE(last_error().find("exceeds the transport's message limit of 65536"), std::string::npos) << last_error();
}

TEST_F(CApiCluster, WaitTimesOutAndTheHandleStaysValid) {
    std::vector<uint8_t> push(256, 7), pull(256, 0);
    afmesh_handle h = start(push, pull);
    EXPECT_EQ(afmesh_wait(worker_, h, 20), AFMESH_ERR_TIMEOUT);
    EXPECT_EQ(afmesh_test(worker_, h), AFMESH_IN_PROGRESS);
    afmesh_request *r = one_request();
    std::vector<uint8_t> answer(100, 9);
    afmesh_tensor t = host_bytes(answer.data(), answer.size());
    ASSERT_EQ(afmesh_respond(server_, r, &t, 1), AFMESH_OK) << last_error();
    ASSERT_EQ(afmesh_wait(worker_, h, 20000), AFMESH_OK) << last_error();
    uint64_t got = 0;
    ASSERT_EQ(afmesh_pull_bytes(worker_, h, 0, &got), AFMESH_OK);
    EXPECT_EQ(got, 100u) << "a short answer reports its real length";
    EXPECT_EQ(pull[99], 9);
    EXPECT_EQ(pull[100], 0) << "nothing past the answer is written";
    EXPECT_EQ(afmesh_wait(worker_, h, 0), AFMESH_ERR_NOT_FOUND) << "a handle is waited once";
}

// A waited handle's results stay readable until its slot is reused, then
// NOT_FOUND: never what a later push-pull left there, even one refused
// half-way through being built in that slot.
TEST_F(CApiCluster, AWaitedHandleNeverReadsWhatARefusedPushPullLeft) {
    std::vector<uint8_t> push(64, 1), pull(64, 0), answer(48, 2);
    auto round_trip = [&] {
        afmesh_handle h = start(push, pull);
        afmesh_request *r = one_request();
        afmesh_tensor t = host_bytes(answer.data(), answer.size());
        EXPECT_EQ(afmesh_respond(server_, r, &t, 1), AFMESH_OK) << last_error();
        EXPECT_EQ(afmesh_wait(worker_, h, 20000), AFMESH_OK) << last_error();
        return h;
    };
    const afmesh_handle first = round_trip();
    // The same key twice to one server: refused in the build, after the
    // slot's pulls were rewritten.
    afmesh_push twice[2] = {{}, {}};
    for (afmesh_push &p : twice) {
        p.key = 1;
        p.tensor = host_bytes(push.data(), push.size());
    }
    std::vector<uint8_t> other(64);
    afmesh_pull q{};
    q.key = 2;
    q.tensor = host_bytes(other.data(), other.size());
    for (int i = 0; i < 20000; ++i) {
        afmesh_handle refused = 0;
        ASSERT_EQ(afmesh_push_pull(worker_, twice, 2, &q, 1, &refused), AFMESH_ERR_INVALID_ARGUMENT);
        uint64_t got = 0;
        const afmesh_status read = afmesh_pull_bytes(worker_, first, 0, &got);
        if (read == AFMESH_ERR_NOT_FOUND) return;  // its slot was reused
        ASSERT_EQ(read, AFMESH_OK) << last_error();
        ASSERT_EQ(got, answer.size()) << "read what the refused push-pull left in the slot (round " << i << ")";
        round_trip();
    }
    FAIL() << "the first handle's slot was never reused";
}

// The worker remembers the registrations it looked up last; one the user
// deregisters must be forgotten there too: the next push-pull from the same
// buffers registers them afresh, and their bytes still arrive (tensors
// above the eager limit, so that they travel by write with their keys).
TEST_F(CApiCluster, ADeregisteredBufferIsRegisteredAfreshWhenUsedAgain) {
    std::vector<uint8_t> push(64 << 10), pull(64 << 10);
    for (int round = 0; round < 3; ++round) {
        afmesh_mr *push_mr = nullptr, *pull_mr = nullptr;
        ASSERT_EQ(afmesh_register_buffer(worker_, push.data(), push.size(), AFMESH_MEM_HOST, 0, &push_mr), AFMESH_OK);
        ASSERT_EQ(afmesh_register_buffer(worker_, pull.data(), pull.size(), AFMESH_MEM_HOST, 0, &pull_mr), AFMESH_OK);
        std::fill(push.begin(), push.end(), static_cast<uint8_t>(round + 1));
        afmesh_handle h = start(push, pull);
        afmesh_request *r = one_request();
        afmesh_tensor in{};
        uint64_t key = 0;
        ASSERT_EQ(afmesh_request_push(r, 0, &key, &in), AFMESH_OK);
        ASSERT_EQ(in.bytes, push.size());
        EXPECT_EQ(static_cast<const uint8_t *>(in.data)[push.size() - 1], round + 1);
        ASSERT_EQ(afmesh_respond(server_, r, &in, 1), AFMESH_OK) << last_error();
        ASSERT_EQ(afmesh_wait(worker_, h, 20000), AFMESH_OK) << "round " << round << ": " << last_error();
        EXPECT_EQ(pull.front(), round + 1);
        EXPECT_EQ(pull.back(), round + 1);
        ASSERT_EQ(afmesh_deregister_buffer(worker_, push_mr), AFMESH_OK);
        ASSERT_EQ(afmesh_deregister_buffer(worker_, pull_mr), AFMESH_OK);
    }
}

TEST_F(CApiCluster, BadResponsesLeaveTheRequestAnswerable) {
    std::vector<uint8_t> push(64, 1), pull(64, 0);
    afmesh_handle h = start(push, pull);
    afmesh_request *r = one_request();
    std::vector<uint8_t> big(65, 3), ok(64, 4);
    afmesh_tensor too_long = host_bytes(big.data(), big.size());
    EXPECT_EQ(afmesh_respond(server_, r, &too_long, 1), AFMESH_ERR_INVALID_ARGUMENT);
    EXPECT_NE(last_error().find("exceeds the worker's pull buffer"), std::string::npos) << last_error();
    afmesh_tensor two[2] = {host_bytes(ok.data(), ok.size()), host_bytes(ok.data(), ok.size())};
    EXPECT_EQ(afmesh_respond(server_, r, two, 2), AFMESH_ERR_INVALID_ARGUMENT);
    ASSERT_EQ(afmesh_respond(server_, r, two, 1), AFMESH_OK) << last_error();
    EXPECT_EQ(afmesh_respond(server_, r, two, 1), AFMESH_ERR_INVALID_ARGUMENT) << "double respond";
    EXPECT_NE(last_error().find("already answered"), std::string::npos) << last_error();
    ASSERT_EQ(afmesh_wait(worker_, h, 20000), AFMESH_OK) << last_error();
    EXPECT_EQ(pull, ok);
}

TEST_F(CApiCluster, GetBatchArgumentsAndTimeout) {
    afmesh_request *r[1];
    size_t n = 0;
    EXPECT_EQ(afmesh_get_batch(server_, AFMESH_BATCH_ALL_WORKERS, 0, r, 0, &n), AFMESH_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(afmesh_get_batch(server_, AFMESH_BATCH_ANY, 10, r, 1, &n), AFMESH_ERR_TIMEOUT);
    EXPECT_EQ(n, 0u);
}

TEST_F(CApiCluster, ReceiveBufferMustSplitEvenly) {
    std::vector<uint8_t> buf(100);
    int32_t ranks[3] = {0, 0, 0};
    uint64_t keys[3] = {1, 2, 3};
    EXPECT_EQ(afmesh_register_recv_buffer(server_, buf.data(), buf.size(), AFMESH_MEM_HOST, 0, ranks, keys, 3),
              AFMESH_ERR_INVALID_ARGUMENT);
    EXPECT_NE(last_error().find("equal slices"), std::string::npos) << last_error();
    int32_t bad_rank[1] = {5};
    EXPECT_EQ(afmesh_register_recv_buffer(server_, buf.data(), buf.size(), AFMESH_MEM_HOST, 0, bad_rank, keys, 1),
              AFMESH_ERR_INVALID_ARGUMENT);
}

// afmesh_push_pull_on_stream and afmesh_stream_wait over the cpu device
// module: a stream (here any non-null token: the cpu module's streams are
// just identities) cannot wait for the host, and misuse is a status.
TEST_F(CApiCluster, PushPullOnStreamAndStreamWaitRefuseMisuse) {
    int token = 0;
    void *stream = &token;
    afmesh_handle h = 0;
    EXPECT_EQ(afmesh_push_pull_on_stream(nullptr, nullptr, 0, nullptr, 0, stream, &h), AFMESH_ERR_INVALID_ARGUMENT);
    EXPECT_NE(last_error().find("not a worker"), std::string::npos) << last_error();
    EXPECT_EQ(afmesh_stream_wait(server_, 1, stream), AFMESH_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(afmesh_stream_wait(worker_, 123456789, stream), AFMESH_ERR_NOT_FOUND);
    EXPECT_NE(last_error().find("unknown handle"), std::string::npos) << last_error();

    std::vector<uint8_t> push(64, 5), pull(64, 0);
    h = start(push, pull, /*on_stream=*/true);
    ASSERT_FALSE(HasFailure());
    EXPECT_EQ(afmesh_stream_wait(worker_, h, nullptr), AFMESH_ERR_INVALID_ARGUMENT);
    EXPECT_NE(last_error().find("needs a stream"), std::string::npos) << last_error();
    EXPECT_EQ(afmesh_stream_wait(worker_, h, stream), AFMESH_ERR_NOT_SUPPORTED);
    EXPECT_NE(last_error().find("device module 'cpu' cannot make a stream wait"), std::string::npos) << last_error();

    afmesh_request *r = one_request();
    std::vector<uint8_t> answer(40, 6);
    afmesh_tensor t = host_bytes(answer.data(), answer.size());
    ASSERT_EQ(afmesh_respond(server_, r, &t, 1), AFMESH_OK) << last_error();
    ASSERT_EQ(afmesh_wait(worker_, h, 20000), AFMESH_OK) << last_error();
    EXPECT_EQ(pull[39], 6);
    EXPECT_EQ(pull[40], 0);
    EXPECT_EQ(afmesh_stream_wait(worker_, h, stream), AFMESH_ERR_NOT_FOUND) << "a waited handle is gone";

    // The C++ wrapper turns the same statuses into exceptions.
    try {
        afmesh::api::check(afmesh_stream_wait(worker_, 42, stream));
        ADD_FAILURE() << "no exception";
    } catch (const afmesh::api::Error &e) {
        EXPECT_EQ(e.status(), AFMESH_ERR_NOT_FOUND);
    }
}

// Device memory over tcp with the cpu device module: the transport cannot
// register it and the module cannot stage it, so every entry point says so
// and leaves the node (and a request) usable.
TEST_F(CApiCluster, DeviceTensorsNeedTheirDeviceModule) {
    std::vector<uint8_t> buf(64, 1), pull(64, 0);
    afmesh_tensor device = host_bytes(buf.data(), buf.size());
    device.kind = AFMESH_MEM_CUDA;
    afmesh_push p{};
    p.key = 1;
    p.tensor = device;
    afmesh_handle h = 0;
    EXPECT_EQ(afmesh_push_pull(worker_, &p, 1, nullptr, 0, &h), AFMESH_ERR_NOT_SUPPORTED);
    EXPECT_NE(last_error().find("push 0: transport 'tcp' cannot register CUDA memory, and device module 'cpu'"),
              std::string::npos)
        << last_error();
    afmesh_pull q{};
    q.key = 2;
    q.tensor = device;
    q.tensor.kind = AFMESH_MEM_HIP;
    EXPECT_EQ(afmesh_push_pull_on_stream(worker_, nullptr, 0, &q, 1, nullptr, &h), AFMESH_ERR_NOT_SUPPORTED);
    EXPECT_NE(last_error().find("pull 0"), std::string::npos) << last_error();
    afmesh_mr *mr = nullptr;
    EXPECT_EQ(afmesh_register_buffer(worker_, buf.data(), buf.size(), AFMESH_MEM_CUDA, 0, &mr),
              AFMESH_ERR_NOT_SUPPORTED);
    int32_t ranks[1] = {0};
    uint64_t keys[1] = {9};
    EXPECT_EQ(afmesh_register_recv_buffer(server_, buf.data(), buf.size(), AFMESH_MEM_CUDA, 0, ranks, keys, 1),
              AFMESH_ERR_NOT_SUPPORTED);
    EXPECT_NE(last_error().find("receive buffer"), std::string::npos) << last_error();

    std::vector<uint8_t> push(64, 2);
    h = start(push, pull);
    afmesh_request *r = one_request();
    EXPECT_EQ(afmesh_respond(server_, r, &device, 1), AFMESH_ERR_NOT_SUPPORTED);
    EXPECT_NE(last_error().find("response tensor 0"), std::string::npos) << last_error();
    afmesh_tensor host = host_bytes(buf.data(), buf.size());
    ASSERT_EQ(afmesh_respond(server_, r, &host, 1), AFMESH_OK) << "the request is still answerable: " << last_error();
    ASSERT_EQ(afmesh_wait(worker_, h, 20000), AFMESH_OK) << last_error();
    EXPECT_EQ(pull, buf);
}

}  // namespace
