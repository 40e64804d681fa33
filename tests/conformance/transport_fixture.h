// SPDX-License-Identifier: Apache-2.0
// Helpers for tests that drive transport modules through the HAL: contexts
// with an event log, registered buffers with patterned contents, and poll
// loops bounded by a deadline, so a broken module fails a test with a
// message instead of hanging it.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "afmesh/hal/transport.h"
#include "module_loader.h"

namespace afmesh::test {

/** How long any single wait in a test may take before it fails. Generous: sanitizers are slow. */
inline constexpr std::chrono::milliseconds kPollLimit{60'000};

/** One reported event, copied so it outlives the next poll(). */
struct NetEvent {
    uint32_t type = 0;
    int32_t status = 0;
    afmesh_net_conn *conn = nullptr;
    uint64_t cookie = 0;
    uint32_t imm = 0;
    std::vector<uint8_t> data;  // EV_RECV
    std::string reason;         // EV_CONN_ERROR
};

const char *event_type_name(uint32_t type);

/** One context of a transport module, recording every event it reports. */
class NetEndpoint {
public:
    /** Loads the module's file again for a fresh context; NOT_PRESENT and errors come back as they are. */
    static Status open(ModuleRecord record, std::unique_ptr<NetEndpoint> *out);

    const afmesh_net_ops &ops() const { return module_->net(); }
    void *ctx() const { return module_->ctx(); }
    const afmesh_net_caps &caps() const { return module_->net_caps(); }
    /** The loaded module, for code under test that drives the context itself. */
    const Module &module() const { return *module_; }

    /** listen() on first use; this endpoint's address blob (empty after a failure, which is recorded). */
    const std::vector<uint8_t> &address();

    /** One poll() call; appends what it reports to events(). Returns poll()'s result. */
    int poll_once(int max = 64);

    const std::deque<NetEvent> &events() const { return events_; }
    /** Removes and returns the oldest event of `type` (on `conn` when given). */
    std::optional<NetEvent> take(uint32_t type, afmesh_net_conn *conn = nullptr);
    size_t count(uint32_t type, afmesh_net_conn *conn = nullptr) const;
    /** The first EV_CONN_ERROR recorded, as text, or "" (for failure messages). */
    std::string first_error() const;

private:
    std::unique_ptr<Module> module_;
    std::vector<uint8_t> address_;
    std::deque<NetEvent> events_;
};

using Endpoints = std::vector<NetEndpoint *>;

/** Polls each endpoint in turn until `done()` holds; fails naming `what` once `limit` passes. */
::testing::AssertionResult poll_until(const Endpoints &endpoints, const std::function<bool()> &done,
                                      const std::string &what, std::chrono::milliseconds limit = kPollLimit);

/** Calls `post` until it returns something other than AGAIN, polling `endpoints` in between. */
int post_retrying(const Endpoints &endpoints, const std::function<int()> &post);

/** Both ends of one connection. */
struct Link {
    afmesh_net_conn *client = nullptr;
    afmesh_net_conn *server = nullptr;
};

/** Connects `client` to `server` (which may be the same endpoint) and waits until both ends are up. */
::testing::AssertionResult connect(NetEndpoint &client, NetEndpoint &server, Link *link);

/** Host memory registered with one endpoint; deregistered on destruction. */
class RegisteredBuffer {
public:
    RegisteredBuffer(NetEndpoint &endpoint, size_t bytes, uint32_t access);
    ~RegisteredBuffer();
    RegisteredBuffer(const RegisteredBuffer &) = delete;
    RegisteredBuffer &operator=(const RegisteredBuffer &) = delete;

    bool registered() const { return mr_ != nullptr; }
    uint8_t *data() { return bytes_.get(); }
    size_t size() const { return size_; }
    afmesh_net_mr *mr() const { return mr_; }
    const afmesh_net_rkey &rkey() const { return rkey_; }
    /** Deregisters now; the memory stays for inspection. */
    int deregister();

private:
    NetEndpoint &endpoint_;
    std::unique_ptr<uint8_t[]> bytes_;
    size_t size_;
    afmesh_net_mr *mr_ = nullptr;
    afmesh_net_rkey rkey_{};
};

/** Byte `index` of the test pattern `seed`: position-dependent, not periodic at 256. */
inline uint8_t pattern_byte(size_t index, uint32_t seed) {
    return static_cast<uint8_t>((index * 7) ^ (index >> 8) ^ (index >> 16) ^ seed);
}
/** Fills `bytes` with pattern `seed`, starting at pattern position `start`. */
void fill_pattern(uint8_t *bytes, size_t size, uint32_t seed, size_t start = 0);
/** Whether `bytes` hold pattern `seed` from position `start`; names the first mismatch otherwise. */
::testing::AssertionResult holds_pattern(const uint8_t *bytes, size_t size, uint32_t seed, size_t start,
                                         const std::string &what);

}  // namespace afmesh::test
