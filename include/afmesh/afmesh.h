/* SPDX-License-Identifier: Apache-2.0 */
/*
 * afmesh — tensor communication for Attention–FFN disaggregated inference.
 *
 * Workers (attention) push activations to servers (FFN) and pull their
 * results back, every layer and micro-batch. One process is one node: a
 * scheduler, a worker or a server. This is the stable C API; afmesh.hpp wraps
 * it for C++.
 *
 * Conventions:
 *  - Every function returns an afmesh_status. On failure,
 *    afmesh_last_error() returns a message for the calling thread describing
 *    what went wrong. Nothing here aborts or exits the process on a user's or
 *    a peer's error.
 *  - Handles (afmesh_node*, afmesh_mr*, afmesh_request*) are opaque. Functions
 *    on one node may be called from several threads unless stated otherwise.
 *  - Structs passed in begin with `struct_size`: set it to sizeof(the struct)
 *    so later versions can append fields without breaking old callers.
 *  - Sizes are in bytes; timeouts in milliseconds (a negative timeout waits
 *    forever).
 */
#ifndef AFMESH_AFMESH_H
#define AFMESH_AFMESH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define AFMESH_API __attribute__((visibility("default")))
#else
#define AFMESH_API
#endif

/** Status codes. */
typedef enum afmesh_status {
    AFMESH_OK = 0,
    /** test(): the operation has not completed yet. */
    AFMESH_IN_PROGRESS = 1,
    AFMESH_ERR_INTERNAL = -1,
    AFMESH_ERR_UNSUPPORTED_VERSION = -2,
    AFMESH_ERR_INVALID_ARGUMENT = -3,
    AFMESH_ERR_NO_MEMORY = -4,
    AFMESH_ERR_NOT_SUPPORTED = -5,
    /** A peer failed, was declared dead or violated the protocol. */
    AFMESH_ERR_PEER_FAILED = -6,
    /** Refused: access outside a registered region, or a wrong auth token. */
    AFMESH_ERR_ACCESS = -7,
    AFMESH_ERR_TIMEOUT = -8,
    /** No usable module, an unknown key or handle. */
    AFMESH_ERR_NOT_FOUND = -100,
    /** The node, or every peer a call waits for, has stopped. */
    AFMESH_ERR_CLOSED = -101,
} afmesh_status;

/** Short name of a status, e.g. "AFMESH_ERR_TIMEOUT". */
AFMESH_API const char *afmesh_strerror(afmesh_status status);
/** Message describing the last failure on the calling thread ("" if none). */
AFMESH_API const char *afmesh_last_error(void);
/** Library version, "major.minor.patch". */
AFMESH_API const char *afmesh_version(void);

typedef enum afmesh_role {
    AFMESH_ROLE_FROM_CONFIG = 0, /**< AFMESH_ROLE (or DMLC_ROLE) decides */
    AFMESH_ROLE_WORKER = 1,
    AFMESH_ROLE_SERVER = 2,
    AFMESH_ROLE_SCHEDULER = 3,
} afmesh_role;

/** Memory kinds; a buffer's kind is always given explicitly. (Shared with hal/afmesh/hal/module.h.) */
#ifndef AFMESH_MEM_KIND_DEFINED
#define AFMESH_MEM_KIND_DEFINED
typedef enum afmesh_mem_kind {
    AFMESH_MEM_HOST = 0, /**< pageable or pinned host memory */
    AFMESH_MEM_CUDA = 1, /**< NVIDIA device memory */
    AFMESH_MEM_HIP = 2,  /**< AMD device memory */
    AFMESH_MEM_ZE = 3,   /**< Intel Level Zero device memory */
} afmesh_mem_kind;
#endif

/** DLPack type codes, with bits and lanes: e.g. bf16 = {4, 16, 1}. */
typedef struct afmesh_dtype {
    uint8_t code; /**< 0 int, 1 uint, 2 float, 4 bfloat (DLPack kDLInt...) */
    uint8_t bits;
    uint16_t lanes;
} afmesh_dtype;

#define AFMESH_MAX_DIMS 16

/** A tensor: where its bytes are and what they mean. */
typedef struct afmesh_tensor {
    void *data;
    uint64_t bytes;       /**< < 2^48 */
    afmesh_mem_kind kind; /**< where `data` lives (zero: host memory) */
    int32_t device;       /**< device index for device memory */
    afmesh_dtype dtype;
    uint32_t ndim;   /**< <= AFMESH_MAX_DIMS */
    int64_t shape[AFMESH_MAX_DIMS];
} afmesh_tensor;

/**
 * Node configuration. Zero-initialise and set struct_size; anything left
 * zero/NULL comes from the AFMESH_* variables (or their StepMesh aliases),
 * then the defaults. `settings` overrides the environment for the core's
 * variables, e.g. {"AFMESH_RANK=1", "AFMESH_NUM_WORKERS=2", NULL}; an unknown
 * name or a bad value is INVALID_ARGUMENT with a did-you-mean. A module's
 * setting (afmesh info lists them per module, e.g. AFMESH_TCP_BIND) holds
 * for the whole process: it applies where the environment does not set it,
 * and a second node of the process given another value is refused.
 */
typedef struct afmesh_config {
    size_t struct_size;
    afmesh_role role;
    const char *scheduler;            /**< "host:port"; NULL: AFMESH_SCHEDULER */
    const char *const *settings;      /**< NULL-terminated "NAME=value" list, or NULL */
} afmesh_config;

typedef struct afmesh_node afmesh_node;
typedef struct afmesh_mr afmesh_mr;
typedef struct afmesh_request afmesh_request;
typedef uint64_t afmesh_handle;

/**
 * Joins the cluster: loads the device and transport modules, says HELLO to
 * the scheduler, waits for the roster, connects every worker to every
 * server, and returns once all nodes are connected. For the scheduler role
 * it serves the rendezvous until afmesh_node_destroy().
 * Errors: NOT_FOUND (no usable module), TIMEOUT (nodes missing, message says
 * which), ACCESS (auth token refused), INVALID_ARGUMENT (bad configuration).
 */
AFMESH_API afmesh_status afmesh_node_create(const afmesh_config *config, afmesh_node **node);
/**
 * Stops cleanly (waits a bounded time for the others), then frees everything.
 * For the scheduler role, serves until every node has stopped or failed, or
 * the cluster never formed: OK only when every node stopped cleanly, else
 * TIMEOUT (the cluster never formed, saying who was missing) or PEER_FAILED
 * (naming the nodes that failed).
 */
AFMESH_API afmesh_status afmesh_node_destroy(afmesh_node *node);
/** This node's role and rank; counts of workers and servers. */
AFMESH_API afmesh_status afmesh_node_info(const afmesh_node *node, afmesh_role *role, int32_t *rank,
                                          int32_t *num_workers, int32_t *num_servers);
/**
 * Whether this node took the place of a failed one in a running cluster
 * (*replacement = 1; 0 for a node of the cluster's start). A replacement
 * has the failed node's role and rank and a new incarnation; the others
 * passed the start-up long ago, so it must not wait for them in barriers
 * they entered then (e.g. one after registering receive buffers).
 */
AFMESH_API afmesh_status afmesh_node_is_replacement(const afmesh_node *node, int *replacement);
/** Names of the device and transport modules in use (static strings owned by the node). */
AFMESH_API afmesh_status afmesh_node_modules(const afmesh_node *node, const char **device, const char **transport);
/** Barrier over workers (1), servers (2) or all nodes (3). */
AFMESH_API afmesh_status afmesh_barrier(afmesh_node *node, int group, int timeout_ms);

/**
 * Changes how completions are awaited (AFMESH_POLL): "busy" (spin: lowest
 * latency, burns a core), "adaptive" (spin briefly, then sleep) or
 * "blocking" (sleep at once). Takes effect at the next wait.
 */
AFMESH_API afmesh_status afmesh_set_poll_mode(afmesh_node *node, const char *mode);

/**
 * Registers memory once, off the hot path, for use as push sources, pull
 * destinations or response sources. `kind` is explicit; `device` is the
 * device index (ignored for host memory). Device memory the transport cannot
 * register but the device module stages (see afmesh_push_pull_on_stream) is
 * accepted and only recorded. NOT_SUPPORTED for memory neither handles.
 */
AFMESH_API afmesh_status afmesh_register_buffer(afmesh_node *node, void *ptr, uint64_t bytes, afmesh_mem_kind kind,
                                                int device, afmesh_mr **mr);
AFMESH_API afmesh_status afmesh_deregister_buffer(afmesh_node *node, afmesh_mr *mr);

/* ---------------------------------------------------------------- worker */

/** One tensor to push. */
typedef struct afmesh_push {
    uint64_t key;
    afmesh_tensor tensor;
    /** Servers to send to; NULL (with num_servers 0) = every server (broadcast). */
    const int32_t *servers;
    uint32_t num_servers;
} afmesh_push;

/** One buffer to be filled by one server. */
typedef struct afmesh_pull {
    uint64_t key;
    afmesh_tensor tensor; /**< tensor.bytes is the capacity; the server may send less */
    int32_t server;
} afmesh_pull;

/**
 * Starts a push-pull without blocking: every push goes to its servers, and
 * each server answers the pulls that name it. Buffers must stay untouched
 * until the handle completes. Unregistered buffers are registered on the
 * fly and cached (slower; register them up front).
 * Completes when every server involved has responded.
 */
AFMESH_API afmesh_status afmesh_push_pull(afmesh_node *node, const afmesh_push *push, size_t num_push,
                                          const afmesh_pull *pull, size_t num_pull, afmesh_handle *handle);
/**
 * afmesh_push_pull for device tensors produced on a stream: the pushes are
 * read only after the work already queued on `stream` (the device module's
 * native stream handle: cudaStream_t, hipStream_t, ze command list) has
 * finished; NULL means there is nothing to wait for. Host tensors ignore the
 * stream.
 *
 * Device memory the transport cannot register (e.g. CUDA memory over tcp)
 * is staged through pinned host memory from the device module: pushes are
 * copied to it (on `stream`), pulls land in it and are copied to the device
 * buffer (the real response length only) before wait/test report OK or a
 * stream released by afmesh_stream_wait runs on.
 *
 * The call never waits for the device: it queues the staging copies on
 * `stream`, records an event behind them and returns; the library's
 * progress thread posts the pushes once that event has completed. The
 * push buffers (device and, for staging, the tensors' contents as `stream`
 * leaves them) must stay unchanged until the push-pull ends. A stream that
 * fails fails the push-pull (wait reports the device module's error).
 * Errors as afmesh_push_pull; NOT_SUPPORTED for memory that neither the
 * transport nor the device module in use handles (the message says which).
 */
AFMESH_API afmesh_status afmesh_push_pull_on_stream(afmesh_node *node, const afmesh_push *push, size_t num_push,
                                                    const afmesh_pull *pull, size_t num_pull, void *stream,
                                                    afmesh_handle *handle);
/**
 * A push-pull described once, to be started many times: the same keys,
 * buffers and servers every layer of every step, as AF inference repeats
 * them. afmesh_push_pull checks its arguments, finds the buffers'
 * registrations, groups the tensors by server and encodes their metadata
 * at every call; a prepared push-pull does it here, once, and each
 * afmesh_push_pull_start copies the result. Only the buffers' contents
 * change between starts.
 */
typedef struct afmesh_prepared afmesh_prepared;
/**
 * Prepares a push-pull; the arrays are copied and may go after the call.
 * Errors as afmesh_push_pull's for the same arguments (for host tensors;
 * device tensors are checked at each start). Unregistered host buffers are
 * registered here. A buffer may be deregistered between starts: the next
 * start finds (or makes) its registration again, at afmesh_push_pull's
 * cost, once. Free it with afmesh_prepared_free.
 */
AFMESH_API afmesh_status afmesh_prepare_push_pull(afmesh_node *node, const afmesh_push *push, size_t num_push,
                                                  const afmesh_pull *pull, size_t num_pull,
                                                  afmesh_prepared **prepared);
/**
 * Starts a prepared push-pull: afmesh_push_pull_on_stream with the prepared
 * arrays (`stream` NULL: afmesh_push_pull). Each start is a push-pull of its
 * own, with its own handle, under the same rules as calling afmesh_push_pull
 * again with the same arrays: it may start again before an earlier start
 * has completed. INVALID_ARGUMENT for a push-pull prepared by another node.
 */
AFMESH_API afmesh_status afmesh_push_pull_start(afmesh_node *node, afmesh_prepared *prepared, void *stream,
                                                afmesh_handle *handle);
/**
 * Frees a prepared push-pull (NULL: nothing to do); the push-pulls it
 * started go on. NOT_FOUND for one this node did not prepare or has freed.
 * Destroying the node frees those it still has.
 */
AFMESH_API afmesh_status afmesh_prepared_free(afmesh_node *node, afmesh_prepared *prepared);
/**
 * Makes `stream` (not NULL) wait until the push-pull has ended, without
 * blocking the calling thread: work queued on the stream afterwards sees the
 * pull buffers filled. The stream is also released when the push-pull fails,
 * so the handle must still be waited (afmesh_wait/afmesh_test) to learn the
 * result and free it. NOT_SUPPORTED when the device module cannot make a
 * stream wait for the host (the cpu module: use afmesh_wait); NOT_FOUND for
 * an unknown or already waited handle.
 */
AFMESH_API afmesh_status afmesh_stream_wait(afmesh_node *node, afmesh_handle handle, void *stream);
/**
 * Waits for a push-pull. OK, TIMEOUT (the handle stays valid: wait again),
 * PEER_FAILED (a server it involved failed: the message names it). After
 * any result but TIMEOUT the handle is waited; its pull lengths and traces
 * stay readable while the next 256 push-pulls are waited (fewer when
 * thousands are in flight), then NOT_FOUND. One thread waits for a given
 * handle.
 */
AFMESH_API afmesh_status afmesh_wait(afmesh_node *node, afmesh_handle handle, int timeout_ms);
/** OK if complete (the handle stays valid until wait), IN_PROGRESS, or the failure. Never blocks. */
AFMESH_API afmesh_status afmesh_test(afmesh_node *node, afmesh_handle handle);
/** After completion (test() said OK, or wait() returned): bytes the server actually wrote into pull `index`. */
AFMESH_API afmesh_status afmesh_pull_bytes(afmesh_node *node, afmesh_handle handle, size_t index, uint64_t *bytes);

/** Per-server timestamps of one push-pull, in nanoseconds of CLOCK_MONOTONIC of the node that took them. */
typedef struct afmesh_trace {
    int32_t server;
    uint64_t posted;         /**< worker: meta sent */
    uint64_t arrived;        /**< server: request complete */
    uint64_t processed;      /**< server: handed out by get_batch (the later of the call and `arrived`) */
    uint64_t responded;      /**< server: respond() posted */
    uint64_t completed;      /**< worker: response complete */
} afmesh_trace;

/**
 * Copies up to `capacity` per-server traces of a push-pull into `traces`
 * (readable as long as pull lengths are); *count receives the number of
 * servers involved.
 */
AFMESH_API afmesh_status afmesh_trace_get(afmesh_node *node, afmesh_handle handle, afmesh_trace *traces,
                                          size_t capacity, size_t *count);

/* ---------------------------------------------------------------- server */

/**
 * Provides receive memory: [ptr, ptr+bytes) is cut into `count` equal
 * slices; slice i receives pushes of key keys[i] from worker worker_ranks[i].
 * Call before those workers push those keys. Device memory the transport
 * cannot register gets a pinned host twin that workers write into; get_batch
 * copies each request's pushes to the device buffer before returning it.
 */
AFMESH_API afmesh_status afmesh_register_recv_buffer(afmesh_node *node, void *ptr, uint64_t bytes,
                                                     afmesh_mem_kind kind, int device, const int32_t *worker_ranks,
                                                     const uint64_t *keys, size_t count);

typedef enum afmesh_batch_mode {
    /** One request from every worker (the AF barrier). */
    AFMESH_BATCH_ALL_WORKERS = 0,
    /** Whatever has arrived, at least one request. */
    AFMESH_BATCH_ANY = 1,
} afmesh_batch_mode;

/**
 * Waits for requests. Fills up to `capacity` entries of `requests`; *count
 * receives how many. In ALL_WORKERS mode entries are in worker-rank order.
 * TIMEOUT when nothing (or not every worker) arrived; PEER_FAILED when a
 * worker the batch waits for has failed or stopped (a failed one until a
 * replacement under its rank has joined: then the batch waits for that
 * one). ANY mode reports each failed worker once, ignores workers that
 * stopped cleanly, and returns CLOSED once every worker has gone. When copying staged pushes to a
 * device receive buffer fails, the device module's error is returned with
 * *count 0 and the batch stays queued: nothing is lost, get_batch again.
 */
AFMESH_API afmesh_status afmesh_get_batch(afmesh_node *node, afmesh_batch_mode mode, int timeout_ms,
                                          afmesh_request **requests, size_t capacity, size_t *count);

/** Which worker sent the request, and how many push tensors and pull slots it has. */
AFMESH_API afmesh_status afmesh_request_info(const afmesh_request *request, int32_t *worker, size_t *num_push,
                                             size_t *num_pull);
/** Push tensor `index`: a zero-copy view of the receive slice, valid until respond. */
AFMESH_API afmesh_status afmesh_request_push(const afmesh_request *request, size_t index, uint64_t *key,
                                             afmesh_tensor *tensor);
/** Pull slot `index`: its key and capacity (tensor.data is NULL; dtype/shape as the worker gave them). */
AFMESH_API afmesh_status afmesh_request_pull(const afmesh_request *request, size_t index, uint64_t *key,
                                             afmesh_tensor *tensor);

/**
 * Answers a request: tensors[i] goes to pull slot i (count must equal the
 * request's pull count), written straight into the worker's buffer (device
 * tensors the transport cannot register are first copied to pinned host
 * memory; their producing work must have finished); it may be shorter than
 * the slot. Releases the request's receive slices to the
 * worker and frees the request. INVALID_ARGUMENT (too long, wrong count)
 * leaves the request valid so it can be answered again.
 */
AFMESH_API afmesh_status afmesh_respond(afmesh_node *node, afmesh_request *request, const afmesh_tensor *tensors,
                                        size_t count);
/**
 * Answers several requests, each with one slice of one buffer: request i
 * gets rows [offset_i, offset_i + counts[i]) of `buffer` (offset_i is the sum
 * of the earlier counts), as pull slot 0. `buffer`'s shape[0] is the row
 * count; the row size is bytes / shape[0].
 */
AFMESH_API afmesh_status afmesh_respond_vec(afmesh_node *node, const afmesh_tensor *buffer, const int64_t *counts,
                                            afmesh_request *const *requests, size_t num_requests);

/* ---------------------------------------------------------------- counters */

/**
 * Buckets of the push-pull latency histogram: bucket i counts push-pulls
 * that completed within 2^i microseconds (and not within 2^(i-1)); the last
 * bucket also counts every longer one.
 */
#define AFMESH_STATS_LATENCY_BUCKETS 24

/**
 * What a node has done since it was created. Every field is a counter that
 * only grows. The engine keeps them anyway (relaxed atomics, no lock, no
 * system call on the hot path), so reading them costs the caller a copy and
 * never stops traffic; under traffic the fields are each exact but not one
 * snapshot (a response may be counted before its push-pull is).
 *
 * "Push" and "pull" name the direction of the AF step, not the side: a
 * worker sends its pushes and receives its pulls, a server the reverse, so
 * a worker's push_bytes to a server equal that server's push_bytes from it.
 *
 * afmesh_stats_get fills the node's totals; afmesh_peer_stats_get the share
 * of one peer (a server for a worker, a worker for a server). For every
 * field marked [peer], the peers' shares add up to the node's total. The
 * push_pulls_* fields of a peer count the push-pulls that involved it, by
 * how its part ended, so they add up to more than the node's when
 * push-pulls span several servers. Fields marked [node] are the node's
 * alone and read 0 for a peer.
 */
typedef struct afmesh_stats {
    size_t struct_size;

    /* Worker: push-pulls (a peer's: the push-pulls that involved it). */
    uint64_t push_pulls_started;
    uint64_t push_pulls_completed;    /**< ended OK */
    uint64_t push_pulls_peer_failed;  /**< ended PEER_FAILED (a server failed or stopped) */
    uint64_t push_pulls_failed;       /**< ended with any other error: a device stream, a protocol error */

    /* Traffic [peer]. */
    uint64_t requests;        /**< REQUESTs sent (worker) or received (server) */
    uint64_t responses;       /**< RESPONSEs received (worker) or sent (server) */
    uint64_t push_bytes;      /**< tensor bytes pushed: sent (worker) or received (server) */
    uint64_t pull_bytes;      /**< tensor bytes answered: received (worker) or sent (server) */
    uint64_t eager_requests;  /**< REQUESTs that carried their push tensors inline (AFMESH_EAGER_BYTES) */
    uint64_t eager_responses; /**< RESPONSEs that carried their answers inline */
    uint64_t mailbox_requests;  /**< REQUESTs that rode a tensor write into the server's mailbox */
    uint64_t mailbox_responses; /**< RESPONSEs that rode an answer write into the worker's mailbox */
    uint64_t credit_waits;    /**< worker: parts that waited for a receive slice (still busy, or being grown) */

    /* Transport operations the engine posted [peer]. */
    uint64_t writes;          /**< one-sided writes with an immediate (write_imm) */
    uint64_t gathered_writes; /**< gathered writes (write_imm_v: a tensor and a mailbox message in one) */
    uint64_t messages;        /**< two-sided messages (send: REQUESTs, RESPONSEs, adverts, heartbeats...) */
    uint64_t queue_full;      /**< posts the transport refused for a full send queue (queued and retried) */
    uint64_t heartbeats_missed; /**< heartbeat intervals in which the peer was silent */
    uint64_t protocol_errors;   /**< messages that broke the protocol (the peer is failed) */

    /* Progress [node]. */
    uint64_t completions;        /**< transport events polled */
    uint64_t polls;              /**< transport polls that found something */
    uint64_t empty_polls;        /**< transport polls that found nothing */
    uint64_t transport_sleeps;   /**< sleeps on the transport's wait fd */
    uint64_t condvar_sleeps;     /**< sleeps on the condition variable (a waiter while another polls) */
    uint64_t naps;               /**< the progress thread's naps while a caller polls, or without a wait fd */
    uint64_t wakeups;            /**< wake-ups sent to a sleeping thread */
    uint64_t yields;             /**< sched_yield() of spinning threads */
    uint64_t connections_refused; /**< data connections dropped in the handshake (strangers, stale incarnations) */
    uint64_t staging_copies;     /**< copies between device memory and pinned host staging buffers */
    uint64_t staging_bytes;      /**< bytes those copies moved */
    /**
     * System calls: the engine's own (sleeps, wake-ups, yields) plus those the
     * transport module counts (its "syscalls" counter, see
     * afmesh_transport_counters; 0 for a module that does not count).
     */
    uint64_t syscalls;

    /* Worker: completion time of push-pulls that ended OK [node]. */
    uint64_t latency_ns_sum;
    uint64_t latency_buckets[AFMESH_STATS_LATENCY_BUCKETS];

    /* Since 0.2: filled only where struct_size covers them. */
    /**
     * [peer] Tensor bytes that travelled inside REQUESTs and RESPONSEs, sent
     * or received: the engine copies each of them once on this side
     * (gathered into the message, or placed from it into the receive slice
     * or pull buffer), where a tensor that goes by write is copied by none.
     * Copies per byte moved: eager_bytes / (push_bytes + pull_bytes).
     */
    uint64_t eager_bytes;
} afmesh_stats;

/** The size of the first afmesh_stats (0.1): afmesh_stats_get fills a struct of this size or more. */
#define AFMESH_STATS_SIZE_0_1 offsetof(afmesh_stats, eager_bytes)

/**
 * Fills `stats` (set stats->struct_size; a smaller struct of an older
 * version gets the fields it has) with the node's totals.
 * INVALID_ARGUMENT for the scheduler role or a struct_size below the first
 * version's (AFMESH_STATS_SIZE_0_1).
 */
AFMESH_API afmesh_status afmesh_stats_get(afmesh_node *node, afmesh_stats *stats);
/**
 * As afmesh_stats_get, for one peer: `peer` is a server rank on a worker and
 * a worker rank on a server. NOT_FOUND for a rank outside the cluster.
 */
AFMESH_API afmesh_status afmesh_peer_stats_get(afmesh_node *node, int32_t peer, afmesh_stats *stats);

/** One counter of the transport module. */
typedef struct afmesh_counter {
    const char *name; /**< snake_case, stable across versions, e.g. "sendmsg_calls" */
    const char *help; /**< one line saying what it counts */
    uint64_t value;
} afmesh_counter;

/**
 * Copies the transport module's own counters (system calls by kind,
 * operations posted, retries, error completions: whatever the module counts)
 * into up to `capacity` entries of `counters`; *count receives how many the
 * module has (call again with more room when it exceeds `capacity`). The
 * strings live as long as the node. A module that counts nothing reports 0.
 */
AFMESH_API afmesh_status afmesh_transport_counters(afmesh_node *node, afmesh_counter *counters, size_t capacity,
                                                   size_t *count);

/* ---------------------------------------------------------- membership */

/** A change in the cluster's membership, as afmesh_next_event reports it. */
typedef enum afmesh_event_type {
    /**
     * A peer failed or stopped: its operations in flight have failed with
     * the status below, and later ones involving it fail at once. For the
     * scheduler (role SCHEDULER): it is gone, and the data plane carries on.
     */
    AFMESH_EVENT_PEER_DOWN = 1,
    /**
     * A failed peer's replacement (same role and rank, a new incarnation)
     * has joined and completed its handshake with this node: operations
     * involving that rank work again. status is AFMESH_OK, reason empty.
     * For the scheduler: one restarted at its address has taken this node
     * back (AFMESH_SCHEDULER_RECONNECT_MS), and barriers work again.
     */
    AFMESH_EVENT_PEER_UP = 2,
} afmesh_event_type;

/** Longest reason afmesh_event carries, with its terminating NUL. */
#define AFMESH_EVENT_REASON_BYTES 256

typedef struct afmesh_event {
    size_t struct_size;  /**< set by the caller to sizeof(afmesh_event) */
    afmesh_event_type type;
    afmesh_role role;      /**< the peer's: a server for a worker, a worker for a server, or the scheduler */
    int32_t rank;          /**< the peer's rank in its role; -1 for the scheduler */
    uint64_t incarnation;  /**< which process held that rank (random, never 0); 0 for the scheduler */
    afmesh_status status;  /**< PEER_DOWN: AFMESH_ERR_CLOSED for a peer that stopped, else AFMESH_ERR_PEER_FAILED; PEER_UP: AFMESH_OK */
    char reason[AFMESH_EVENT_REASON_BYTES]; /**< why, as the failed operations say; cut to fit */
} afmesh_event;

/**
 * Takes the oldest membership event not taken yet, waiting up to
 * `timeout_ms` for one (0: do not wait; negative: no limit). A peer's
 * PEER_DOWN comes once per incarnation, however its failure was found (the
 * scheduler, a broken connection, silence, its goodbye), and PEER_UP once
 * for each replacement this node has connected to; nothing is
 * reported about peers once this node has begun to stop. TIMEOUT when none
 * came; CLOSED once the node is stopping and every event has been taken.
 * Worker and server nodes only; safe from any thread.
 */
AFMESH_API afmesh_status afmesh_next_event(afmesh_node *node, afmesh_event *event, int timeout_ms);

/* ---------------------------------------------------------------- logging */

/**
 * Receives the library's log lines instead of stderr: `level` (0 error, 1
 * warn, 2 info, 3 debug, 4 trace), `line` the whole line without a newline
 * ("2026-12-06T17:52:27.123456Z afmesh[pid] worker 0 warn core: ..."),
 * `user` as given. Called from whichever thread logs, possibly several at
 * once; it must not call back into afmesh. Lines above AFMESH_LOG_LEVEL
 * are never formatted. NULL restores stderr.
 */
typedef void (*afmesh_log_handler)(int level, const char *line, void *user);
AFMESH_API afmesh_status afmesh_set_log_handler(afmesh_log_handler handler, void *user);

#ifdef __cplusplus
}
#endif

#endif /* AFMESH_AFMESH_H */
