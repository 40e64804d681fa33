/* SPDX-License-Identifier: Apache-2.0 */
/*
 * afmesh transport module ABI (libafmesh_net_<name>.so).
 *
 * A transport gives the core RDMA-style semantics over whatever it wraps
 * (ibverbs RC queue pairs, libfabric RDM endpoints, TCP sockets):
 *
 *  - registered memory regions, advertised to peers as an afmesh_net_rkey;
 *  - one-sided write_imm: bytes land in a peer's registered region and the
 *    peer is told with a 32-bit immediate (EV_IMM) once they are visible;
 *  - small two-sided messages (send / EV_RECV) for control and metadata;
 *  - non-blocking connection set-up, and completion polling.
 *
 * Conventions for every function below:
 *  - returns an afmesh_hal_status (poll returns a count); on a negative status
 *    the module has described the reason with host->set_error();
 *  - every function may be called from any thread; poll() and arm() are
 *    called by one thread at a time (the core's NetRecv thread);
 *  - after a connection fails the module reports one EV_CONN_ERROR for it
 *    and nothing else about it; operations still outstanding on it are lost
 *    and the core treats them as failed;
 *  - nothing is ever written outside a region registered with
 *    AFMESH_NET_ACCESS_REMOTE_WRITE, whatever a peer sends: a write that
 *    falls outside one fails that connection with AFMESH_HAL_ACCESS.
 * Optional entries may be NULL; the core checks struct_size before reading
 * an entry appended after ABI 1.0.
 */
#ifndef AFMESH_HAL_TRANSPORT_H
#define AFMESH_HAL_TRANSPORT_H

#include "afmesh/hal/module.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A connection to one peer. Module-owned; valid until close(). */
typedef struct afmesh_net_conn afmesh_net_conn;
/** A memory registration. Module-owned; valid until mem_deregister(). */
typedef struct afmesh_net_mr afmesh_net_mr;

/**
 * What a region's owner sends to its peers so they can write into it. The
 * meaning of the two words is the module's (verbs: rkey and virtual address;
 * libfabric: key and address or 0 when offsets are used; tcp: region id).
 * Peers treat it as opaque and pass it back to write_imm with an offset.
 */
typedef struct afmesh_net_rkey {
    uint64_t key;
    uint64_t addr;
} afmesh_net_rkey;

/** Describes the memory passed to mem_register. */
typedef struct afmesh_net_mem {
    uint32_t struct_size;
    uint32_t kind;          /**< afmesh_mem_kind; always given explicitly by the caller */
    int32_t device;         /**< device index for device memory, -1 for host */
    int32_t dmabuf_fd;      /**< dma-buf exported by the device module, or -1 */
    uint64_t dmabuf_offset; /**< offset of the buffer's start inside the dma-buf */
} afmesh_net_mem;

/** mem_register access bits. */
#define AFMESH_NET_ACCESS_LOCAL 0x1u        /**< may be the source of write_imm */
#define AFMESH_NET_ACCESS_REMOTE_WRITE 0x2u /**< peers may write_imm into it */

/** caps.flags bits. */
/** write_imm/send operations on one connection are delivered in posting order. */
#define AFMESH_NET_CAP_ORDERED 0x1u
/** get_wait_fd and arm are implemented: the core can sleep instead of spinning. */
#define AFMESH_NET_CAP_WAIT_FD 0x2u

/** What init() reports. The core never assumes more than is reported here. */
typedef struct afmesh_net_caps {
    uint32_t struct_size;   /**< set by the caller */
    uint32_t flags;         /**< AFMESH_NET_CAP_* */
    uint32_t imm_bytes;     /**< bytes of immediate delivered (>= 4) */
    uint32_t max_inline;    /**< writes up to this size are copied at post time */
    uint32_t mem_kinds;     /**< AFMESH_MEM_BIT() of kinds mem_register accepts */
    uint32_t max_send_size; /**< largest two-sided message */
    /**
     * Per connection, how many EV_RECV plus EV_IMM the receiving side holds
     * buffers for at once (its posted receives). Reported by afmesh info; the
     * core does not meter its sends by it, so a module whose receiver can
     * run short makes the sender wait itself (ibverbs: receiver-not-ready
     * retries; fabric: the provider's flow control; tcp: the socket's).
     */
    uint32_t recv_depth;
    uint32_t max_addr_size;  /**< largest listen() address blob */
    uint64_t max_write_size; /**< largest single write_imm (for write_imm_v: all its segments together) */
    /* ---- ABI 1.2: written only when struct_size covers it ---- */
    /**
     * Most segments one write_imm_v takes; 0 or 1 when the module has no
     * gathered write (the entry is then NULL or refuses more than one).
     */
    uint32_t max_write_segs;
    /* ---- ABI 1.5: written only when struct_size covers it ---- */
    /**
     * The largest message (at most max_send_size) that reaches the peer
     * sooner as a send than its bytes would as a write followed by a send:
     * the module's copy-through path, where one operation beats two. The
     * core sends small tensors inside its own messages up to this size
     * unless AFMESH_EAGER_BYTES says otherwise. 0: the module has no view.
     */
    uint32_t eager_send_size;
} afmesh_net_caps;

/** The caps of ABI 1.0 and 1.1 end here: a module accepts a struct_size from this on. */
#define AFMESH_NET_CAPS_SIZE_1_0 offsetof(afmesh_net_caps, max_write_segs)

/**
 * (ABI 1.2) One piece of a gathered write: `bytes` (at least 1) from `src`
 * inside `src_mr` (NULL allowed when the whole write is at most
 * caps.max_inline) to the peer's region `dst` at `dst_offset`.
 */
typedef struct afmesh_net_write_seg {
    const void *src;
    afmesh_net_mr *src_mr;
    uint64_t bytes;
    const afmesh_net_rkey *dst;
    uint64_t dst_offset;
} afmesh_net_write_seg;

/** write_imm / send flags. */
/** Report an EV_WRITE_DONE / EV_SEND_DONE carrying the cookie when the source may be reused. */
#define AFMESH_NET_SIGNAL 0x1u
/**
 * (ABI 1.1) More operations on this connection follow at once: the module may
 * hold this one back and post it together with them (tcp gathers them into
 * one send; fabric and ibverbs ignore the hint and post each at once). A
 * hint only: whatever is held goes out with the next operation posted
 * without MORE on the connection, or at the latest during the next poll().
 * Modules built against ABI 1.0 reject it; the core sets it only for
 * modules that answered with minor >= 1.
 */
#define AFMESH_NET_MORE 0x2u

/** (ABI 1.3) One counter a module reports through counters(). */
typedef struct afmesh_net_counter {
    const char *name; /**< snake_case, e.g. "sendmsg_calls"; "syscalls" is the total the core reads */
    const char *help; /**< one line: what it counts */
    uint64_t value;
} afmesh_net_counter;

typedef enum afmesh_net_event_type {
    /** A signalled write_imm's source buffer may be reused. cookie is set. */
    AFMESH_NET_EV_WRITE_DONE = 1,
    /** A signalled send has completed locally. cookie is set. */
    AFMESH_NET_EV_SEND_DONE = 2,
    /** A peer's write_imm has landed in a local region; imm is set. */
    AFMESH_NET_EV_IMM = 3,
    /** A peer's send has arrived; data and len are set. */
    AFMESH_NET_EV_RECV = 4,
    /** An outgoing connect() has been established. */
    AFMESH_NET_EV_CONNECTED = 5,
    /** The connection failed or the peer closed it; status and reason are set. */
    AFMESH_NET_EV_CONN_ERROR = 6,
    /** Peers have connected to the listening endpoint: call accept() (conn is NULL). */
    AFMESH_NET_EV_INCOMING = 7,
} afmesh_net_event_type;

/** One completion. Pointers in it are valid until the next poll() call. */
typedef struct afmesh_net_event {
    uint32_t type;          /**< afmesh_net_event_type */
    int32_t status;         /**< EV_CONN_ERROR: afmesh_hal_status; else AFMESH_HAL_OK */
    afmesh_net_conn *conn;  /**< the connection the event belongs to */
    uint64_t cookie;        /**< WRITE_DONE / SEND_DONE: the poster's cookie */
    uint32_t imm;           /**< EV_IMM: the immediate, in host byte order */
    uint32_t len;           /**< EV_RECV: message length */
    const void *data;       /**< EV_RECV: message bytes */
    const char *reason;     /**< EV_CONN_ERROR: why, human-readable */
} afmesh_net_event;

typedef struct afmesh_net_ops {
    uint32_t struct_size; /**< sizeof(afmesh_net_ops) the module was built with */

    /**
     * Probes for usable hardware/providers and creates the context.
     * Fills `caps` (the caller has set caps->struct_size).
     * @return OK; NOT_PRESENT when this host has nothing the module can use
     *         (no NIC, no provider, no kernel support), with the reason;
     *         ERROR when something is present but broken.
     */
    int (*init)(void **ctx, afmesh_net_caps *caps);
    /** Closes every connection and registration and frees the context. */
    void (*fini)(void *ctx);

    /**
     * Starts accepting connections and writes this endpoint's address (an
     * opaque blob peers pass to connect(), at most caps.max_addr_size bytes)
     * to `addr`; *addr_len is the buffer size in and the blob size out.
     * Called at most once per context. INVALID_ARGUMENT when the buffer is
     * too small; ERROR when the endpoint cannot be opened (e.g. bind fails).
     */
    int (*listen)(void *ctx, void *addr, size_t *addr_len);

    /**
     * Starts connecting to the peer at `addr` without blocking. The
     * connection is usable once poll() reports EV_CONNECTED for it (or fails
     * with EV_CONN_ERROR). INVALID_ARGUMENT for a malformed address.
     */
    int (*connect)(void *ctx, const void *addr, size_t addr_len, afmesh_net_conn **conn);
    /**
     * Returns the next established incoming connection, or AGAIN when none is
     * waiting. Never blocks. poll() reports EV_INCOMING when connections are
     * waiting; no other event names a connection before accept() returns it.
     */
    int (*accept)(void *ctx, afmesh_net_conn **conn);
    /**
     * Closes a connection. Operations still outstanding on it are dropped
     * without completions; afterwards no event refers to `conn`.
     */
    int (*close)(void *ctx, afmesh_net_conn *conn);

    /**
     * Registers [ptr, ptr+bytes) with `access` (AFMESH_NET_ACCESS_*).
     * `mem` gives the memory kind explicitly. Writes *mr (the local handle)
     * and *rkey (what peers need to write into it).
     * NOT_SUPPORTED for a memory kind outside caps.mem_kinds.
     */
    int (*mem_register)(void *ctx, void *ptr, size_t bytes, const afmesh_net_mem *mem,
                        uint32_t access, afmesh_net_mr **mr, afmesh_net_rkey *rkey);
    /**
     * Deregisters. A peer write that targets the region afterwards (or is
     * still arriving into it) fails that peer's connection with ACCESS;
     * when this returns, the module will never touch the memory again.
     */
    int (*mem_deregister)(void *ctx, afmesh_net_mr *mr);

    /**
     * Writes `bytes` (0 allowed) from `src` (inside the local registration
     * `src_mr`, or NULL when bytes <= caps.max_inline) into the peer's region
     * `dst` at `dst_offset`, then delivers EV_IMM with `imm` to the peer.
     * Exactly one EV_IMM per write, after all of its bytes are visible there.
     * Writes are not ordered against each other unless caps has ORDERED.
     * The source must stay untouched until an EV_WRITE_DONE for this write
     * (flags & AFMESH_NET_SIGNAL), or for a later signalled operation on the
     * same connection, has been polled; writes up to caps.max_inline may be
     * reused on return.
     * @return OK; AGAIN when the send queue is full (poll, then retry);
     *         INVALID_ARGUMENT for a size above caps.max_write_size;
     *         PEER_FAILED on a failed connection.
     */
    int (*write_imm)(void *ctx, afmesh_net_conn *conn, const void *src, size_t bytes,
                     afmesh_net_mr *src_mr, const afmesh_net_rkey *dst, uint64_t dst_offset,
                     uint32_t imm, uint32_t flags, uint64_t cookie);

    /**
     * Sends a message of at most caps.max_send_size bytes. The bytes are
     * copied before the call returns; the peer gets one EV_RECV.
     * @return OK; AGAIN when the send queue is full; INVALID_ARGUMENT when
     *         too large; PEER_FAILED on a failed connection.
     */
    int (*send)(void *ctx, afmesh_net_conn *conn, const void *buf, size_t len,
                uint32_t flags, uint64_t cookie);

    /**
     * Makes progress and returns up to `max` completions in `events`.
     * @return the number of events (0 when none), or a negative status when
     *         the context itself has failed.
     */
    int (*poll)(void *ctx, afmesh_net_event *events, int max);

    /**
     * Optional (caps.flags & AFMESH_NET_CAP_WAIT_FD): a file descriptor that
     * becomes readable when poll() may have something to report. The core
     * sleeps in poll(2)/epoll on it in adaptive and blocking modes.
     */
    int (*get_wait_fd)(void *ctx, int *fd);
    /**
     * Optional, with get_wait_fd: prepares to sleep. OK means the caller may
     * now block on the fd; AGAIN means events are pending and poll() must be
     * called first (the fi_trywait / ibv_req_notify_cq pattern).
     */
    int (*arm)(void *ctx);

    /* ---- ABI 1.1 ---- */

    /**
     * Optional: describes what this context found and chose, for `afmesh
     * info` and the log: e.g. each provider or NIC seen and why it is or is
     * not used, and the path device memory takes (dma-buf, peer memory,
     * staging through host memory). Plain text, one item per line, written
     * NUL-terminated into `buf` and truncated to fit `len`.
     */
    int (*describe)(void *ctx, char *buf, size_t len);

    /* ---- ABI 1.2 ---- */

    /**
     * Optional (caps.max_write_segs >= 2): one write_imm made of `count`
     * segments, each landing in its own place (different regions of the
     * peer allowed), followed by ONE EV_IMM with `imm` once every segment's
     * bytes are visible. This lets a caller put a tensor and the small
     * message describing it into the peer in one transport operation (one
     * fi_writemsg with several rma_iov; a chain of work requests of which
     * the last carries the immediate; back-to-back tcp frames in one
     * gathered send). Source lifetime,
     * flags, ordering and errors are write_imm's; a segment outside the
     * peer's region fails the connection as a write_imm's would, and the
     * immediate is then not delivered.
     * @return as write_imm; INVALID_ARGUMENT for count 0 or above
     *         caps.max_write_segs, an empty segment, or a total above
     *         caps.max_write_size.
     */
    int (*write_imm_v)(void *ctx, afmesh_net_conn *conn, const afmesh_net_write_seg *segs, uint32_t count,
                       uint32_t imm, uint32_t flags, uint64_t cookie);

    /* ---- ABI 1.3 ---- */

    /**
     * Optional: the module's own counters, for afmesh_stats_get and `afmesh
     * bench` (what each push-pull costs in system calls and operations,
     * counted where they happen). Writes up to `capacity` entries and returns
     * how many the module has (call again with more room when that is more).
     * Names are snake_case and stable; the strings live as long as the
     * context. One name is reserved: "syscalls", every system call the
     * context made on the data path (sends, receives, polls of its fds,
     * wake-ups), which the core adds to its own. Counting must not slow the
     * data path: relaxed atomics or counters owned by one thread, no lock.
     */
    int (*counters)(void *ctx, afmesh_net_counter *out, uint32_t capacity);
} afmesh_net_ops;

#ifdef __cplusplus
}
#endif

#endif /* AFMESH_HAL_TRANSPORT_H */
