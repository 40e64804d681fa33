// SPDX-License-Identifier: Apache-2.0
// Header-only C++ wrapper over afmesh.h (namespace afmesh::api): RAII ownership of nodes and
// registrations, and failures thrown as afmesh::Error (status + message).
// Everything here is inline over the stable C API, so it does not tie the
// caller to the library's C++ ABI.
#pragma once

#include <afmesh/afmesh.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace afmesh::api {

/** A failed call: the status and the library's message for it. */
class Error : public std::runtime_error {
public:
    Error(afmesh_status status, const std::string &what)
        : std::runtime_error(std::string(afmesh_strerror(status)) + ": " + what), status_(status) {}
    afmesh_status status() const { return status_; }

private:
    afmesh_status status_;
};

/** Throws Error unless `status` is AFMESH_OK. */
inline void check(afmesh_status status) {
    if (status != AFMESH_OK) throw Error(status, afmesh_last_error());
}

/** Describes host memory as a 1-D byte tensor. */
inline afmesh_tensor host_bytes(void *data, uint64_t bytes) {
    afmesh_tensor t{};
    t.data = data;
    t.bytes = bytes;
    t.dtype = {1, 8, 1};  // uint8
    t.ndim = 1;
    t.shape[0] = static_cast<int64_t>(bytes);
    return t;
}

/** One cluster membership; destroying it stops cleanly. Movable, not copyable. */
class Node {
public:
    /** Joins with the given role; settings are "NAME=value" overrides of AFMESH_* variables. */
    explicit Node(afmesh_role role, std::vector<std::string> settings = {}, const char *scheduler = nullptr) {
        std::vector<const char *> list;
        for (const std::string &s : settings) list.push_back(s.c_str());
        list.push_back(nullptr);
        afmesh_config config{};
        config.struct_size = sizeof config;
        config.role = role;
        config.scheduler = scheduler;
        config.settings = list.data();
        check(afmesh_node_create(&config, &node_));
    }
    ~Node() {
        if (node_) afmesh_node_destroy(node_);
    }
    Node(Node &&other) noexcept : node_(std::exchange(other.node_, nullptr)) {}
    Node &operator=(Node &&other) noexcept {
        if (this != &other) {
            if (node_) afmesh_node_destroy(node_);
            node_ = std::exchange(other.node_, nullptr);
        }
        return *this;
    }
    Node(const Node &) = delete;
    Node &operator=(const Node &) = delete;

    afmesh_node *get() const { return node_; }

    /** Stops cleanly now, as the destructor would, but throws what the stop reported. */
    void close() {
        if (afmesh_node *node = std::exchange(node_, nullptr)) check(afmesh_node_destroy(node));
    }

    afmesh_role role() const {
        afmesh_role r = AFMESH_ROLE_FROM_CONFIG;
        check(afmesh_node_info(node_, &r, nullptr, nullptr, nullptr));
        return r;
    }
    int32_t rank() const {
        int32_t r = -1;
        check(afmesh_node_info(node_, nullptr, &r, nullptr, nullptr));
        return r;
    }
    /** This node took a failed node's place in a running cluster (afmesh_node_is_replacement). */
    bool replacement() const {
        int r = 0;
        check(afmesh_node_is_replacement(node_, &r));
        return r != 0;
    }
    int32_t num_workers() const {
        int32_t n = 0;
        check(afmesh_node_info(node_, nullptr, nullptr, &n, nullptr));
        return n;
    }
    int32_t num_servers() const {
        int32_t n = 0;
        check(afmesh_node_info(node_, nullptr, nullptr, nullptr, &n));
        return n;
    }

    /** Worker: starts a push-pull. */
    afmesh_handle push_pull(const std::vector<afmesh_push> &push, const std::vector<afmesh_pull> &pull) {
        afmesh_handle h = 0;
        check(afmesh_push_pull(node_, push.data(), push.size(), pull.data(), pull.size(), &h));
        return h;
    }
    /** Worker: starts a push-pull whose device pushes are read after the work queued on `stream`. */
    afmesh_handle push_pull_on_stream(const std::vector<afmesh_push> &push, const std::vector<afmesh_pull> &pull,
                                      void *stream) {
        afmesh_handle h = 0;
        check(afmesh_push_pull_on_stream(node_, push.data(), push.size(), pull.data(), pull.size(), stream, &h));
        return h;
    }
    /** Worker: makes `stream` wait for the push-pull without blocking; wait() it afterwards all the same. */
    void stream_wait(afmesh_handle h, void *stream) { check(afmesh_stream_wait(node_, h, stream)); }
    /** Worker: waits for a push-pull (throws on timeout or failure). */
    void wait(afmesh_handle h, int timeout_ms = -1) { check(afmesh_wait(node_, h, timeout_ms)); }

    /** Server: one request from every worker (or whatever arrived, in ANY mode). */
    std::vector<afmesh_request *> get_batch(afmesh_batch_mode mode = AFMESH_BATCH_ALL_WORKERS, int timeout_ms = -1,
                                            size_t capacity = 256) {
        std::vector<afmesh_request *> requests(capacity);
        size_t count = 0;
        check(afmesh_get_batch(node_, mode, timeout_ms, requests.data(), requests.size(), &count));
        requests.resize(count);
        return requests;
    }
    /** Server: answers one request. */
    void respond(afmesh_request *request, const std::vector<afmesh_tensor> &tensors) {
        check(afmesh_respond(node_, request, tensors.data(), tensors.size()));
    }

    /** The node's counters (afmesh_stats_get). */
    afmesh_stats stats() const { return stats_of(-1); }
    /** One peer's share of them: a server's on a worker, a worker's on a server. */
    afmesh_stats peer_stats(int32_t peer) const { return stats_of(peer); }
    /** The transport module's own counters, by name. */
    std::vector<afmesh_counter> transport_counters() const {
        std::vector<afmesh_counter> counters(32);
        size_t count = 0;
        check(afmesh_transport_counters(node_, counters.data(), counters.size(), &count));
        if (count > counters.size()) {
            counters.resize(count);
            check(afmesh_transport_counters(node_, counters.data(), counters.size(), &count));
        }
        counters.resize(count);
        return counters;
    }

    /**
     * The next membership event (afmesh_next_event), or nothing when none
     * came within `timeout_ms` (negative: no limit). Throws CLOSED once the
     * node is stopping and every event has been taken.
     */
    std::optional<afmesh_event> next_event(int timeout_ms) {
        afmesh_event event{};
        event.struct_size = sizeof event;
        const afmesh_status status = afmesh_next_event(node_, &event, timeout_ms);
        if (status == AFMESH_ERR_TIMEOUT) return std::nullopt;
        check(status);
        return event;
    }

private:
    afmesh_stats stats_of(int32_t peer) const {
        afmesh_stats out{};
        out.struct_size = sizeof out;
        check(peer < 0 ? afmesh_stats_get(node_, &out) : afmesh_peer_stats_get(node_, peer, &out));
        return out;
    }

    afmesh_node *node_ = nullptr;
};

/** A registration that deregisters itself. */
class Registration {
public:
    Registration(Node &node, void *ptr, uint64_t bytes, afmesh_mem_kind kind = AFMESH_MEM_HOST, int device = 0)
        : node_(node.get()) {
        check(afmesh_register_buffer(node_, ptr, bytes, kind, device, &mr_));
    }
    ~Registration() {
        if (mr_) afmesh_deregister_buffer(node_, mr_);
    }
    Registration(Registration &&other) noexcept : node_(other.node_), mr_(std::exchange(other.mr_, nullptr)) {}
    Registration &operator=(Registration &&) = delete;
    Registration(const Registration &) = delete;
    Registration &operator=(const Registration &) = delete;

private:
    afmesh_node *node_;
    afmesh_mr *mr_ = nullptr;
};

/** A prepared push-pull (afmesh_prepare_push_pull) that frees itself; start() it as often as needed. */
class PreparedPushPull {
public:
    PreparedPushPull(Node &node, const std::vector<afmesh_push> &push, const std::vector<afmesh_pull> &pull)
        : node_(node.get()) {
        check(afmesh_prepare_push_pull(node_, push.data(), push.size(), pull.data(), pull.size(), &prepared_));
    }
    ~PreparedPushPull() {
        if (prepared_) afmesh_prepared_free(node_, prepared_);
    }
    PreparedPushPull(PreparedPushPull &&other) noexcept
        : node_(other.node_), prepared_(std::exchange(other.prepared_, nullptr)) {}
    PreparedPushPull &operator=(PreparedPushPull &&) = delete;
    PreparedPushPull(const PreparedPushPull &) = delete;
    PreparedPushPull &operator=(const PreparedPushPull &) = delete;

    /** Starts the push-pull (device pushes read after the work queued on `stream`, if not null). */
    afmesh_handle start(void *stream = nullptr) {
        afmesh_handle h = 0;
        check(afmesh_push_pull_start(node_, prepared_, stream, &h));
        return h;
    }

private:
    afmesh_node *node_;
    afmesh_prepared *prepared_ = nullptr;
};

}  // namespace afmesh::api
