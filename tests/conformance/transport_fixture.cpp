// SPDX-License-Identifier: Apache-2.0
#include "transport_fixture.h"

#include <algorithm>
#include <cstdlib>

#include "exclude_list.h"
#include "log.h"

namespace afmesh::test {
namespace {

// The exclusions of this run, read before its first test (ExcludeEnvironment)
// and applied as each test starts (ExcludeListener).
ExcludeList &run_exclusions() {
    static ExcludeList list;
    return list;
}

std::string full_name(const ::testing::TestInfo &test) {
    return std::string(test.test_suite_name()) + "." + test.name();
}

// Reads the files named by CONFORMANCE_EXCLUDE.
class ExcludeEnvironment : public ::testing::Environment {
public:
    void SetUp() override {
        const char *files = std::getenv(kExcludeVariable);
        if (!files) return;
        ExcludeList list;
        const Status s = list.load(files);
        // Fatal, so that no test runs: without its exclusions the run reaches
        // tests known to crash the provider (see excludes/fabric-shm.exclude).
        if (!s) FAIL() << kExcludeVariable << ": " << s.message() << "; no test runs without its exclusions";
        // An entry that names no test of this binary is stale (its test was
        // renamed or removed) and hides nothing: fail the run so that it is
        // fixed, but run the tests. Judged against every test registered,
        // not the ones --gtest_filter selects, since a narrower filter (one
        // test run by hand) leaves entries unmatched without them being wrong.
        std::vector<std::string> tests;
        const ::testing::UnitTest &unit = *::testing::UnitTest::GetInstance();
        for (int i = 0; i < unit.total_test_suite_count(); ++i)
            for (int j = 0; j < unit.GetTestSuite(i)->total_test_count(); ++j)
                tests.push_back(full_name(*unit.GetTestSuite(i)->GetTestInfo(j)));
        for (const ExcludeEntry *stale : list.unmatched(tests))
            ADD_FAILURE() << stale->where() << ": '" << stale->pattern
                          << "' matches no test of this binary; remove the entry or correct its pattern";
        run_exclusions() = std::move(list);
    }
};

// Skips an excluded test before its fixture's SetUp(): GoogleTest runs no
// test whose result is skipped once its fixture is constructed, and the
// skip, with its message, is reported as any other.
class ExcludeListener : public ::testing::EmptyTestEventListener {
public:
    void OnTestStart(const ::testing::TestInfo &test) override {
        if (const ExcludeEntry *entry = run_exclusions().match(full_name(test))) GTEST_SKIP() << entry->skip_message();
    }
};

// Registered as this file is initialised: every test binary that uses the
// fixture's helpers links this object, so each one honours
// CONFORMANCE_EXCLUDE with gtest_main's main(). The listener goes after the
// result printer already installed, so a test's "[ RUN ]" line comes before
// its skip message.
[[maybe_unused]] const bool kExclusionsInstalled = [] {
    ::testing::AddGlobalTestEnvironment(new ExcludeEnvironment);
    ::testing::UnitTest::GetInstance()->listeners().Append(new ExcludeListener);
    return true;
}();

}  // namespace

const char *event_type_name(uint32_t type) {
    switch (type) {
    case AFMESH_NET_EV_WRITE_DONE: return "WRITE_DONE";
    case AFMESH_NET_EV_SEND_DONE: return "SEND_DONE";
    case AFMESH_NET_EV_IMM: return "IMM";
    case AFMESH_NET_EV_RECV: return "RECV";
    case AFMESH_NET_EV_CONNECTED: return "CONNECTED";
    case AFMESH_NET_EV_CONN_ERROR: return "CONN_ERROR";
    case AFMESH_NET_EV_INCOMING: return "INCOMING";
    }
    return "(unknown event type)";
}

Status NetEndpoint::open(ModuleRecord record, std::unique_ptr<NetEndpoint> *out) {
    auto endpoint = std::unique_ptr<NetEndpoint>(new NetEndpoint());
    Status s = load_module(record, &endpoint->module_);
    if (s) *out = std::move(endpoint);
    return s;
}

const std::vector<uint8_t> &NetEndpoint::address() {
    if (address_.empty()) {
        std::vector<uint8_t> blob(caps().max_addr_size);
        size_t len = blob.size();
        const int rc = ops().listen(ctx(), blob.data(), &len);
        if (rc == AFMESH_HAL_OK && len > 0 && len <= blob.size()) {
            blob.resize(len);
            address_ = std::move(blob);
        } else {
            ADD_FAILURE() << "listen() returned " << rc << " (" << len << " bytes): " << take_module_error();
        }
    }
    return address_;
}

int NetEndpoint::poll_once(int max) {
    std::vector<afmesh_net_event> batch(static_cast<size_t>(max));
    const int n = ops().poll(ctx(), batch.data(), max);
    if (n < 0) {
        ADD_FAILURE() << "poll() failed with " << n << ": " << take_module_error();
        return n;
    }
    EXPECT_LE(n, max) << "poll() reported more events than it was given room for";
    for (int i = 0; i < std::min(n, max); ++i) {
        const afmesh_net_event &e = batch[static_cast<size_t>(i)];
        NetEvent copy;
        copy.type = e.type;
        copy.status = e.status;
        copy.conn = e.conn;
        copy.cookie = e.cookie;
        copy.imm = e.imm;
        if (e.type == AFMESH_NET_EV_RECV && e.len > 0) {
            const auto *data = static_cast<const uint8_t *>(e.data);
            copy.data.assign(data, data + e.len);
        }
        if (e.type == AFMESH_NET_EV_CONN_ERROR && e.reason) copy.reason = e.reason;
        events_.push_back(std::move(copy));
    }
    return n;
}

std::optional<NetEvent> NetEndpoint::take(uint32_t type, afmesh_net_conn *conn) {
    auto it = std::find_if(events_.begin(), events_.end(),
                           [&](const NetEvent &e) { return e.type == type && (!conn || e.conn == conn); });
    if (it == events_.end()) return std::nullopt;
    NetEvent event = std::move(*it);
    events_.erase(it);
    return event;
}

size_t NetEndpoint::count(uint32_t type, afmesh_net_conn *conn) const {
    return static_cast<size_t>(std::count_if(events_.begin(), events_.end(), [&](const NetEvent &e) {
        return e.type == type && (!conn || e.conn == conn);
    }));
}

std::string NetEndpoint::first_error() const {
    for (const NetEvent &e : events_)
        if (e.type == AFMESH_NET_EV_CONN_ERROR) return "connection error " + std::to_string(e.status) + ": " + e.reason;
    return "";
}

::testing::AssertionResult poll_until(const Endpoints &endpoints, const std::function<bool()> &done,
                                      const std::string &what, std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!done()) {
        if (std::chrono::steady_clock::now() > deadline) {
            auto failure = ::testing::AssertionFailure();
            failure << "timed out after " << limit.count() << " ms waiting for " << what;
            for (NetEndpoint *e : endpoints)
                if (!e->first_error().empty()) failure << "; an endpoint saw " << e->first_error();
            return failure;
        }
        for (NetEndpoint *e : endpoints)
            if (e->poll_once() < 0) return ::testing::AssertionFailure() << "poll() failed waiting for " << what;
    }
    return ::testing::AssertionSuccess();
}

int post_retrying(const Endpoints &endpoints, const std::function<int()> &post) {
    const auto deadline = std::chrono::steady_clock::now() + kPollLimit;
    int rc;
    while ((rc = post()) == AFMESH_HAL_AGAIN && std::chrono::steady_clock::now() < deadline)
        for (NetEndpoint *e : endpoints) e->poll_once();
    return rc;
}

::testing::AssertionResult connect(NetEndpoint &client, NetEndpoint &server, Link *link) {
    const std::vector<uint8_t> &address = server.address();
    if (address.empty()) return ::testing::AssertionFailure() << "the server endpoint could not listen";
    *link = Link{};
    const int rc = client.ops().connect(client.ctx(), address.data(), address.size(), &link->client);
    if (rc != AFMESH_HAL_OK)
        return ::testing::AssertionFailure() << "connect() returned " << rc << ": " << take_module_error();
    Endpoints endpoints{&client};
    if (&server != &client) endpoints.push_back(&server);
    bool connected = false;
    return poll_until(
        endpoints,
        [&] {
            if (!connected) connected = client.take(AFMESH_NET_EV_CONNECTED, link->client).has_value();
            if (!link->server) {
                const int accepted = server.ops().accept(server.ctx(), &link->server);
                if (accepted != AFMESH_HAL_OK) {
                    EXPECT_EQ(accepted, AFMESH_HAL_AGAIN) << take_module_error();
                    link->server = nullptr;
                }
            }
            return connected && link->server != nullptr;
        },
        "both ends of a connection");
}

RegisteredBuffer::RegisteredBuffer(NetEndpoint &endpoint, size_t bytes, uint32_t access)
    : endpoint_(endpoint), bytes_(std::make_unique_for_overwrite<uint8_t[]>(std::max<size_t>(bytes, 1))), size_(bytes) {
    afmesh_net_mem mem{};
    mem.struct_size = sizeof mem;
    mem.kind = AFMESH_MEM_HOST;
    mem.device = -1;
    mem.dmabuf_fd = -1;
    const int rc = endpoint.ops().mem_register(endpoint.ctx(), bytes_.get(), bytes, &mem, access, &mr_, &rkey_);
    if (rc != AFMESH_HAL_OK) {
        ADD_FAILURE() << "mem_register(" << bytes << " bytes) returned " << rc << ": " << take_module_error();
        mr_ = nullptr;
    }
}

RegisteredBuffer::~RegisteredBuffer() {
    if (mr_) {
        EXPECT_EQ(deregister(), AFMESH_HAL_OK) << take_module_error();
    }
}

int RegisteredBuffer::deregister() {
    afmesh_net_mr *mr = mr_;
    mr_ = nullptr;
    return endpoint_.ops().mem_deregister(endpoint_.ctx(), mr);
}

void fill_pattern(uint8_t *bytes, size_t size, uint32_t seed, size_t start) {
    for (size_t i = 0; i < size; ++i) bytes[i] = pattern_byte(start + i, seed);
}

::testing::AssertionResult holds_pattern(const uint8_t *bytes, size_t size, uint32_t seed, size_t start,
                                         const std::string &what) {
    for (size_t i = 0; i < size; ++i)
        if (bytes[i] != pattern_byte(start + i, seed))
            return ::testing::AssertionFailure()
                   << what << ": byte " << i << " of " << size << " is " << unsigned{bytes[i]} << ", expected "
                   << unsigned{pattern_byte(start + i, seed)};
    return ::testing::AssertionSuccess();
}

}  // namespace afmesh::test
