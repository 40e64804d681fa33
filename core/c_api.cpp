// SPDX-License-Identifier: Apache-2.0
// The C API: argument checks, Status -> afmesh_status, and the per-thread
// last-error message. Every entry point catches what C++ might throw
// (allocation failure) so nothing unwinds into C callers.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <new>

#include "afmesh/afmesh.h"
#include "config.h"
#include "engine/node.h"
#include "module_loader.h"
#include "log.h"


using afmesh::Code;
using afmesh::Status;

namespace {

thread_local std::string t_last_error;

afmesh_status to_c(Code code) {
    switch (code) {
    case Code::kOk: return AFMESH_OK;
    case Code::kAgain: return AFMESH_IN_PROGRESS;
    case Code::kNotPresent:
    case Code::kNotFound: return AFMESH_ERR_NOT_FOUND;
    case Code::kUnsupportedVersion: return AFMESH_ERR_UNSUPPORTED_VERSION;
    case Code::kInvalidArgument: return AFMESH_ERR_INVALID_ARGUMENT;
    case Code::kNoMemory: return AFMESH_ERR_NO_MEMORY;
    case Code::kNotSupported: return AFMESH_ERR_NOT_SUPPORTED;
    case Code::kPeerFailed: return AFMESH_ERR_PEER_FAILED;
    case Code::kAccess: return AFMESH_ERR_ACCESS;
    case Code::kTimeout: return AFMESH_ERR_TIMEOUT;
    case Code::kError: return AFMESH_ERR_INTERNAL;
    case Code::kClosed: return AFMESH_ERR_CLOSED;
    }
    return AFMESH_ERR_INTERNAL;
}

afmesh_status finish(const Status &s) {
    // Cleared in place on success: every data-path call ends here.
    if (s.is_ok())
        t_last_error.clear();
    else
        t_last_error = s.message();
    return to_c(s.code());
}

afmesh_status invalid(const char *what) { return finish({Code::kInvalidArgument, what}); }

// Runs `body` (returning Status) with C++ exceptions turned into statuses.
template <class Body>
afmesh_status guarded(Body &&body) {
    try {
        return finish(body());
    } catch (const std::bad_alloc &) {
        return finish({Code::kNoMemory, "out of memory"});
    } catch (const std::exception &e) {
        return finish({Code::kError, std::string("internal error: ") + e.what()});
    }
}

afmesh::Node *as_node(afmesh_node *node) { return node ? node->data_node() : nullptr; }

// An afmesh_prepared is the engine's prepared push-pull, as an afmesh_mr is a registration.
afmesh::WorkerEngine::Prepared *as_prepared(afmesh_prepared *p) {
    return reinterpret_cast<afmesh::WorkerEngine::Prepared *>(p);
}

Status need_worker(afmesh_node *node, afmesh::WorkerEngine **out) {
    afmesh::Node *n = as_node(node);
    if (!n || !n->worker()) return {Code::kInvalidArgument, "not a worker node"};
    *out = n->worker();
    return Status::ok();
}

Status need_server(afmesh_node *node, afmesh::ServerEngine **out) {
    afmesh::Node *n = as_node(node);
    if (!n || !n->server()) return {Code::kInvalidArgument, "not a server node"};
    *out = n->server();
    return Status::ok();
}

Status build_config(const afmesh_config *c, afmesh::Config *config, afmesh::Role *role) {
    *config = afmesh::Config::process();
    if (!config->env_error().is_ok()) return config->env_error();
    if (c && c->struct_size < offsetof(afmesh_config, settings) + sizeof c->settings)
        return {Code::kInvalidArgument, "afmesh_config.struct_size is too small"};
    if (c && c->scheduler)
        if (Status s = config->set("AFMESH_SCHEDULER", c->scheduler); !s) return s;
    for (const char *const *p = c ? c->settings : nullptr; p && *p; ++p) {
        const char *eq = strchr(*p, '=');
        if (!eq) return {Code::kInvalidArgument, std::string("setting '") + *p + "' is not NAME=value"};
        const std::string name(*p, static_cast<size_t>(eq - *p));
        // A module's setting is known once that module has been queried: all are, before calling it unknown.
        if (!afmesh::find_var(name) && !afmesh::find_module_var(name)) afmesh::declare_all_module_settings(*config);
        if (Status s = config->set(name, eq + 1); !s) return s;
        // Modules read their settings from the process (host services), not from one node's configuration.
        if (afmesh::find_module_var(name) && !afmesh::offer_module_setting(name, eq + 1))
            return {Code::kInvalidArgument, name + " is a module's setting, which holds for the whole process, and "
                                                   "another node of this process was given another value"};
    }
    afmesh_role r = c ? c->role : AFMESH_ROLE_FROM_CONFIG;
    if (r == AFMESH_ROLE_FROM_CONFIG) {
        const std::string name = config->get("AFMESH_ROLE");
        if (name.empty()) return {Code::kInvalidArgument, "no role: set AFMESH_ROLE (or DMLC_ROLE) or afmesh_config.role"};
        r = name == "worker" ? AFMESH_ROLE_WORKER : name == "server" ? AFMESH_ROLE_SERVER : AFMESH_ROLE_SCHEDULER;
    }
    switch (r) {
    case AFMESH_ROLE_WORKER: *role = afmesh::Role::kWorker; break;
    case AFMESH_ROLE_SERVER: *role = afmesh::Role::kServer; break;
    case AFMESH_ROLE_SCHEDULER: *role = afmesh::Role::kScheduler; break;
    default: return {Code::kInvalidArgument, "unknown role " + std::to_string(r)};
    }
    return Status::ok();
}

}  // namespace

extern "C" {

const char *afmesh_strerror(afmesh_status status) {
    switch (status) {
    case AFMESH_OK: return "AFMESH_OK";
    case AFMESH_IN_PROGRESS: return "AFMESH_IN_PROGRESS";
    case AFMESH_ERR_INTERNAL: return "AFMESH_ERR_INTERNAL";
    case AFMESH_ERR_UNSUPPORTED_VERSION: return "AFMESH_ERR_UNSUPPORTED_VERSION";
    case AFMESH_ERR_INVALID_ARGUMENT: return "AFMESH_ERR_INVALID_ARGUMENT";
    case AFMESH_ERR_NO_MEMORY: return "AFMESH_ERR_NO_MEMORY";
    case AFMESH_ERR_NOT_SUPPORTED: return "AFMESH_ERR_NOT_SUPPORTED";
    case AFMESH_ERR_PEER_FAILED: return "AFMESH_ERR_PEER_FAILED";
    case AFMESH_ERR_ACCESS: return "AFMESH_ERR_ACCESS";
    case AFMESH_ERR_TIMEOUT: return "AFMESH_ERR_TIMEOUT";
    case AFMESH_ERR_NOT_FOUND: return "AFMESH_ERR_NOT_FOUND";
    case AFMESH_ERR_CLOSED: return "AFMESH_ERR_CLOSED";
    }
    return "AFMESH_ERR_UNKNOWN";
}

const char *afmesh_last_error(void) { return t_last_error.c_str(); }

const char *afmesh_version(void) { return AFMESH_VERSION_STRING; }

afmesh_status afmesh_set_log_handler(afmesh_log_handler handler, void *user) {
    if (!afmesh::set_log_handler(handler, user))
        return finish({Code::kNoMemory, "no memory for the log handler; lines still go where they went"});
    return finish(Status::ok());
}

afmesh_status afmesh_node_create(const afmesh_config *c, afmesh_node **node) {
    if (!node) return invalid("null node pointer");
    *node = nullptr;
    return guarded([&]() -> Status {
        afmesh::Config config;
        afmesh::Role role = afmesh::Role::kWorker;
        if (Status s = build_config(c, &config, &role); !s) return s;
        if (role == afmesh::Role::kScheduler) {
            std::unique_ptr<afmesh::SchedulerNode> n;
            if (Status s = afmesh::SchedulerNode::create(config, &n); !s) return s;
            *node = n.release();
        } else {
            std::unique_ptr<afmesh::Node> n;
            if (Status s = afmesh::Node::create(config, role, &n); !s) return s;
            *node = n.release();
        }
        return Status::ok();
    });
}

afmesh_status afmesh_node_destroy(afmesh_node *node) {
    if (!node) return invalid("null node");
    return guarded([&]() -> Status {
        Status result;
        if (afmesh::Node *n = as_node(node)) result = n->stop();
        if (auto *scheduler = dynamic_cast<afmesh::SchedulerNode *>(node)) result = scheduler->serve();
        delete node;
        return result;
    });
}

afmesh_status afmesh_node_info(const afmesh_node *node, afmesh_role *role, int32_t *rank, int32_t *num_workers,
                               int32_t *num_servers) {
    const afmesh::Node *n = node ? node->data_node() : nullptr;
    if (!n) return invalid("not a worker or server node");
    if (role) *role = n->role() == afmesh::Role::kWorker ? AFMESH_ROLE_WORKER : AFMESH_ROLE_SERVER;
    if (rank) *rank = n->rank();
    if (num_workers) *num_workers = n->num_workers();
    if (num_servers) *num_servers = n->num_servers();
    return finish(Status::ok());
}

afmesh_status afmesh_node_is_replacement(const afmesh_node *node, int *replacement) {
    const afmesh::Node *n = node ? node->data_node() : nullptr;
    if (!n || !replacement) return invalid("need a worker or server node and somewhere to say whether it is a replacement");
    *replacement = n->replacement() ? 1 : 0;
    return finish(Status::ok());
}

afmesh_status afmesh_node_modules(const afmesh_node *node, const char **device, const char **transport) {
    const afmesh::Node *n = node ? node->data_node() : nullptr;
    if (!n) return invalid("not a worker or server node");
    if (device) *device = n->device_name().c_str();
    if (transport) *transport = n->transport_name().c_str();
    return finish(Status::ok());
}

afmesh_status afmesh_barrier(afmesh_node *node, int group, int timeout_ms) {
    afmesh::Node *n = as_node(node);
    if (!n) return invalid("not a worker or server node");
    if (group < 1 || group > 3) return invalid("barrier group must be 1 (workers), 2 (servers) or 3 (all)");
    return guarded([&] {
        return n->barrier(static_cast<afmesh::BarrierGroup>(group),
                          std::chrono::milliseconds(timeout_ms < 0 ? INT32_MAX : timeout_ms));
    });
}

afmesh_status afmesh_set_poll_mode(afmesh_node *node, const char *mode) {
    afmesh::Node *n = as_node(node);
    afmesh::PollMode parsed;
    if (!n || !mode || !afmesh::parse_poll_mode(mode, &parsed))
        return invalid("need a worker or server node and a mode of busy, adaptive or blocking");
    n->progress().set_mode(parsed);
    return finish(Status::ok());
}

// A caller's struct may be shorter (an older header) or longer (a newer
// one): it gets the fields both know, and its struct_size stays its own.
// This version's struct is the first: nothing shorter is a version of it.
afmesh_status afmesh_peer_stats_get(afmesh_node *node, int32_t peer, afmesh_stats *stats) {
    const afmesh::Node *n = as_node(node);
    if (!n) return invalid("not a worker or server node");
    if (!stats || stats->struct_size < AFMESH_STATS_SIZE_0_1)
        return invalid("null stats, or afmesh_stats.struct_size below the first version's (AFMESH_STATS_SIZE_0_1)");
    return guarded([&] {
        afmesh_stats all{};
        if (Status s = n->stats(peer, &all); !s) return s;
        // A caller built against an older afmesh.h gets the fields its struct has.
        const size_t size = std::min(stats->struct_size, sizeof all);
        all.struct_size = stats->struct_size;
        memcpy(stats, &all, size);
        return Status::ok();
    });
}

afmesh_status afmesh_stats_get(afmesh_node *node, afmesh_stats *stats) { return afmesh_peer_stats_get(node, -1, stats); }

afmesh_status afmesh_transport_counters(afmesh_node *node, afmesh_counter *counters, size_t capacity, size_t *count) {
    const afmesh::Node *n = as_node(node);
    if (!n || !count || (capacity && !counters)) return invalid("need a worker or server node, a count and room for the counters");
    return guarded([&] {
        std::vector<afmesh_net_counter> found;
        if (Status s = n->transport_counters(&found); !s) return s;
        for (size_t i = 0; i < std::min(capacity, found.size()); ++i)
            counters[i] = {found[i].name, found[i].help, found[i].value};
        *count = found.size();
        return Status::ok();
    });
}

afmesh_status afmesh_next_event(afmesh_node *node, afmesh_event *event, int timeout_ms) {
    afmesh::Node *n = as_node(node);
    if (!n || !event || event->struct_size < sizeof(afmesh_event))
        return invalid("need a worker or server node and an afmesh_event with struct_size = sizeof(afmesh_event)");
    return guarded([&] {
        afmesh::MembershipEvent taken;
        if (Status s = n->next_event(std::chrono::milliseconds(timeout_ms), &taken); !s) return s;
        event->type = taken.type == afmesh::MembershipEvent::Type::kPeerUp ? AFMESH_EVENT_PEER_UP : AFMESH_EVENT_PEER_DOWN;
        event->role = taken.role == afmesh::Role::kWorker   ? AFMESH_ROLE_WORKER
                      : taken.role == afmesh::Role::kServer ? AFMESH_ROLE_SERVER
                                                            : AFMESH_ROLE_SCHEDULER;
        event->rank = taken.rank;
        event->incarnation = taken.incarnation;
        event->status = static_cast<afmesh_status>(taken.why.code());
        snprintf(event->reason, sizeof event->reason, "%s", taken.why.message().c_str());
        return Status::ok();
    });
}

afmesh_status afmesh_register_buffer(afmesh_node *node, void *ptr, uint64_t bytes, afmesh_mem_kind kind, int device,
                                     afmesh_mr **mr) {
    afmesh::Node *n = as_node(node);
    if (!n || !mr) return invalid("null node or output");
    return guarded([&] {
        const afmesh::Registration *reg = nullptr;
        Status s = n->registry().add(ptr, bytes, kind, device, &reg);
        *mr = reinterpret_cast<afmesh_mr *>(const_cast<afmesh::Registration *>(reg));
        return s;
    });
}

afmesh_status afmesh_deregister_buffer(afmesh_node *node, afmesh_mr *mr) {
    afmesh::Node *n = as_node(node);
    if (!n) return invalid("not a worker or server node");
    return guarded([&] { return n->registry().remove(reinterpret_cast<const afmesh::Registration *>(mr)); });
}

afmesh_status afmesh_push_pull(afmesh_node *node, const afmesh_push *push, size_t num_push, const afmesh_pull *pull,
                               size_t num_pull, afmesh_handle *handle) {
    return guarded([&] {
        afmesh::WorkerEngine *w = nullptr;
        if (Status s = need_worker(node, &w); !s) return s;
        return w->push_pull(push, num_push, pull, num_pull, nullptr, handle);
    });
}

afmesh_status afmesh_push_pull_on_stream(afmesh_node *node, const afmesh_push *push, size_t num_push,
                                         const afmesh_pull *pull, size_t num_pull, void *stream, afmesh_handle *handle) {
    return guarded([&] {
        afmesh::WorkerEngine *w = nullptr;
        if (Status s = need_worker(node, &w); !s) return s;
        return w->push_pull(push, num_push, pull, num_pull, stream, handle);
    });
}

afmesh_status afmesh_prepare_push_pull(afmesh_node *node, const afmesh_push *push, size_t num_push,
                                       const afmesh_pull *pull, size_t num_pull, afmesh_prepared **prepared) {
    return guarded([&] {
        afmesh::WorkerEngine *w = nullptr;
        if (Status s = need_worker(node, &w); !s) return s;
        afmesh::WorkerEngine::Prepared *made = nullptr;
        if (Status s = w->prepare(push, num_push, pull, num_pull, prepared ? &made : nullptr); !s) return s;
        *prepared = reinterpret_cast<afmesh_prepared *>(made);
        return Status::ok();
    });
}

afmesh_status afmesh_push_pull_start(afmesh_node *node, afmesh_prepared *prepared, void *stream,
                                     afmesh_handle *handle) {
    return guarded([&] {
        afmesh::WorkerEngine *w = nullptr;
        if (Status s = need_worker(node, &w); !s) return s;
        if (!prepared) return Status(Code::kInvalidArgument, "null prepared push-pull");
        return w->start(*as_prepared(prepared), stream, handle);
    });
}

afmesh_status afmesh_prepared_free(afmesh_node *node, afmesh_prepared *prepared) {
    return guarded([&] {
        afmesh::WorkerEngine *w = nullptr;
        if (Status s = need_worker(node, &w); !s) return s;
        return prepared ? w->release_prepared(as_prepared(prepared)) : Status::ok();
    });
}

afmesh_status afmesh_stream_wait(afmesh_node *node, afmesh_handle handle, void *stream) {
    return guarded([&] {
        afmesh::WorkerEngine *w = nullptr;
        if (Status s = need_worker(node, &w); !s) return s;
        return w->stream_wait(handle, stream);
    });
}

afmesh_status afmesh_wait(afmesh_node *node, afmesh_handle handle, int timeout_ms) {
    return guarded([&] {
        afmesh::WorkerEngine *w = nullptr;
        if (Status s = need_worker(node, &w); !s) return s;
        return w->wait(handle, timeout_ms);
    });
}

afmesh_status afmesh_test(afmesh_node *node, afmesh_handle handle) {
    return guarded([&] {
        afmesh::WorkerEngine *w = nullptr;
        if (Status s = need_worker(node, &w); !s) return s;
        return w->test(handle);
    });
}

afmesh_status afmesh_pull_bytes(afmesh_node *node, afmesh_handle handle, size_t index, uint64_t *bytes) {
    return guarded([&] {
        afmesh::WorkerEngine *w = nullptr;
        if (Status s = need_worker(node, &w); !s) return s;
        return w->pull_bytes(handle, index, bytes);
    });
}

afmesh_status afmesh_trace_get(afmesh_node *node, afmesh_handle handle, afmesh_trace *traces, size_t capacity,
                               size_t *count) {
    return guarded([&] {
        afmesh::WorkerEngine *w = nullptr;
        if (Status s = need_worker(node, &w); !s) return s;
        return w->trace(handle, traces, capacity, count);
    });
}

afmesh_status afmesh_register_recv_buffer(afmesh_node *node, void *ptr, uint64_t bytes, afmesh_mem_kind kind,
                                          int device, const int32_t *worker_ranks, const uint64_t *keys, size_t count) {
    return guarded([&] {
        afmesh::ServerEngine *s = nullptr;
        if (Status st = need_server(node, &s); !st) return st;
        return s->register_recv_buffer(ptr, bytes, kind, device, worker_ranks, keys, count);
    });
}

afmesh_status afmesh_get_batch(afmesh_node *node, afmesh_batch_mode mode, int timeout_ms, afmesh_request **requests,
                               size_t capacity, size_t *count) {
    return guarded([&] {
        afmesh::ServerEngine *s = nullptr;
        if (Status st = need_server(node, &s); !st) return st;
        return s->get_batch(mode, timeout_ms, requests, capacity, count);
    });
}

afmesh_status afmesh_request_info(const afmesh_request *request, int32_t *worker, size_t *num_push, size_t *num_pull) {
    if (!request) return invalid("null request");
    if (worker) *worker = request->worker;
    if (num_push) *num_push = request->pushes.size();
    if (num_pull) *num_pull = request->pulls.size();
    return finish(Status::ok());
}

afmesh_status afmesh_request_push(const afmesh_request *request, size_t index, uint64_t *key, afmesh_tensor *tensor) {
    if (!request || !tensor) return invalid("null request or output");
    if (index >= request->pushes.size()) return invalid("push index out of range");
    if (key) *key = request->pushes[index].first;
    *tensor = request->pushes[index].second;
    return finish(Status::ok());
}

afmesh_status afmesh_request_pull(const afmesh_request *request, size_t index, uint64_t *key, afmesh_tensor *tensor) {
    if (!request || !tensor) return invalid("null request or output");
    if (index >= request->pulls.size()) return invalid("pull index out of range");
    const afmesh::wire::TensorMeta &m = request->pulls[index].tensor;
    if (key) *key = m.key;
    *tensor = afmesh_tensor{};
    tensor->bytes = m.bytes;
    tensor->dtype = m.dtype;
    tensor->ndim = m.ndim;
    std::copy(m.shape, m.shape + m.ndim, tensor->shape);
    return finish(Status::ok());
}

afmesh_status afmesh_respond(afmesh_node *node, afmesh_request *request, const afmesh_tensor *tensors, size_t count) {
    return guarded([&] {
        afmesh::ServerEngine *s = nullptr;
        if (Status st = need_server(node, &s); !st) return st;
        return s->respond(request, tensors, count);
    });
}

afmesh_status afmesh_respond_vec(afmesh_node *node, const afmesh_tensor *buffer, const int64_t *counts,
                                 afmesh_request *const *requests, size_t num_requests) {
    if (!buffer) return invalid("null buffer");
    return guarded([&] {
        afmesh::ServerEngine *s = nullptr;
        if (Status st = need_server(node, &s); !st) return st;
        return s->respond_vec(*buffer, counts, requests, num_requests);
    });
}

}  // extern "C"
