// SPDX-License-Identifier: Apache-2.0
// One transport context (what init() creates): the listening socket, every
// connection, the region table, and the progress engine poll() runs.
//
// Progress. poll() drives everything with one level-triggered epoll set over
// the listener, the connections and a wake-up eventfd; its descriptor is the
// wait fd. Receives happen only in poll(). Sends happen on the posting
// thread when the socket takes them, otherwise in poll() once it is
// writable again.
//
// Locks, in the order they nest:
//   progress_mu_  held by poll(), arm() and connection set-up and tear-down
//                 (connect, accept, close): those calls wait for a running
//                 poll() (which never blocks), data-path calls never do;
//   Connection::tx_mu_   one connection's send side and state;
//   lists_mu_     work that posting threads hand to poll(): completions to
//                 report and failures to report.
// RegionTable has its own lock and nests inside all of these.
#pragma once

#include <sys/epoll.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <unordered_set>
#include <vector>

#include "afmesh/hal/transport.h"
#include "counters.h"
#include "failure_reason.h"
#include "net_host.h"
#include "region_table.h"
#include "thread_annotations.h"

namespace afmesh::tcp {

class Connection;
struct OutgoingFrame;

/** Writes up to this size are copied at post time (caps.max_inline). */
inline constexpr uint32_t kMaxInline = 256;
/**
 * Segments one write_imm_v takes (caps.max_write_segs): a tensor and the
 * message describing it, with room to spare. Each is one frame.
 */
inline constexpr uint32_t kMaxWriteSegs = 4;

class Context {
public:
    /** init(): fills `caps` and creates the context. */
    static int create(afmesh_net_caps *caps, Context **out);
    ~Context();
    Context(const Context &) = delete;
    Context &operator=(const Context &) = delete;

    int listen(void *addr, size_t *addr_len);
    int connect(const void *addr, size_t addr_len, afmesh_net_conn **out);
    int accept(afmesh_net_conn **out);
    int close(afmesh_net_conn *conn);

    int mem_register(void *ptr, size_t bytes, const afmesh_net_mem *mem, uint32_t access, afmesh_net_mr **mr,
                     afmesh_net_rkey *rkey);
    int mem_deregister(afmesh_net_mr *mr);

    int write_imm(afmesh_net_conn *conn, const void *src, size_t bytes, afmesh_net_mr *src_mr,
                  const afmesh_net_rkey *dst, uint64_t dst_offset, uint32_t imm, uint32_t flags, uint64_t cookie);
    /** write_imm_v(): a WRITE frame per segment but the last, which goes as the WRITE_IMM (wire.h). */
    int write_imm_v(afmesh_net_conn *conn, const afmesh_net_write_seg *segs, uint32_t count, uint64_t total,
                    uint32_t imm, uint32_t flags, uint64_t cookie);
    int send(afmesh_net_conn *conn, const void *buf, size_t len, uint32_t flags, uint64_t cookie);

    int poll(afmesh_net_event *events, int max);
    int wait_fd(int *fd) const;
    int arm();
    /** describe(): the bind address, the inline threshold and the memory kinds. */
    int describe(char *buf, size_t len) const;
    /** counters(): the system calls made so far, by kind. */
    int counters(afmesh_net_counter *out, uint32_t capacity) const { return counters_.report(out, capacity); }

    /** Counted where the system calls are made. */
    Counters &counters() { return counters_; }

    // --- for connections ---

    /** Moves `fd` from the `from` to the `to` epoll interest (0: not watched). */
    bool set_interest(int fd, uint32_t from, uint32_t to, Connection *conn);
    /** `conn` has signalled completions for poll() to report. */
    void queue_harvest(Connection *conn) AFMESH_EXCLUDES(lists_mu_);
    /** `conn` has failed; poll() reports it. */
    void queue_failure(Connection *conn) AFMESH_EXCLUDES(lists_mu_);

private:
    Context(int epoll_fd, int wake_fd) : epoll_fd_(epoll_fd), wake_fd_(wake_fd) {}

    /**
     * Checks one write of `bytes` from `src` to `dst` at `dst_offset` and
     * fills `*frame` with it, all but its type and immediate. `total` is the
     * whole operation's size (write_imm_v: its segments together): above
     * max_inline the source is sent in place and must lie in `src_mr`,
     * otherwise it is copied. On a violation returns its status, saying why
     * in `*why`.
     */
    int prepare_write(const void *src, uint64_t bytes, afmesh_net_mr *src_mr, uint64_t total,
                      const afmesh_net_rkey *dst, uint64_t dst_offset, OutgoingFrame *frame, Reason *why);
    void wake();
    // poll()'s work, and set-up and tear-down's: with progress_mu_ held.
    void accept_pending() AFMESH_REQUIRES(progress_mu_);
    bool shed_connection_without_descriptors(int error) AFMESH_REQUIRES(progress_mu_);
    void announce_incoming(EventSink &sink) AFMESH_REQUIRES(progress_mu_);
    void dispatch(const epoll_event &ready, EventSink &sink) AFMESH_REQUIRES(progress_mu_);
    void receive(Connection *conn, EventSink &sink, bool readable) AFMESH_REQUIRES(progress_mu_);
    void queue_receive(Connection *conn) AFMESH_REQUIRES(progress_mu_);
    void harvest(EventSink &sink) AFMESH_REQUIRES(progress_mu_);
    void report_failures(EventSink &sink) AFMESH_REQUIRES(progress_mu_);
    void forget(Connection *conn) AFMESH_REQUIRES(progress_mu_);
    void end_linger(Connection *conn) AFMESH_REQUIRES(progress_mu_);
    void expire_lingering() AFMESH_REQUIRES(progress_mu_);

    const int epoll_fd_;
    const int wake_fd_;  // eventfd: posting threads wake a poll thread asleep on the epoll fd
    Counters counters_{kCounterSpecs};
    RegionTable regions_;

    Mutex progress_mu_;
    int listen_fd_ AFMESH_GUARDED_BY(progress_mu_) = -1;
    // Held open for the moment descriptors run out: closed to accept one
    // waiting connection and drop it, so the listener stops reporting it
    // (level-triggered epoll would otherwise spin on it), then reopened.
    int spare_fd_ AFMESH_GUARDED_BY(progress_mu_) = -1;
    std::chrono::steady_clock::time_point next_shortage_log_ AFMESH_GUARDED_BY(progress_mu_){};
    uint64_t shed_ AFMESH_GUARDED_BY(progress_mu_) = 0;  // connections dropped for want of descriptors
    // Every connection this context owns.
    std::unordered_set<Connection *> connections_ AFMESH_GUARDED_BY(progress_mu_);
    // Accepted by the kernel, not yet by the caller.
    std::deque<Connection *> incoming_ AFMESH_GUARDED_BY(progress_mu_);
    // EV_INCOMING reported since incoming_ last emptied.
    bool incoming_announced_ AFMESH_GUARDED_BY(progress_mu_) = false;
    // Must be received from without waiting for epoll.
    std::vector<Connection *> receive_ready_ AFMESH_GUARDED_BY(progress_mu_);
    // Freed at the next poll: the last events may point into them.
    std::vector<Connection *> closed_ AFMESH_GUARDED_BY(progress_mu_);
    // Closed by the caller, draining until the peer closes too (Connection::close).
    struct Lingering {
        Connection *conn;
        std::chrono::steady_clock::time_point until;
    };
    std::vector<Lingering> lingering_ AFMESH_GUARDED_BY(progress_mu_);
    std::vector<Connection *> scratch_ AFMESH_GUARDED_BY(progress_mu_);
    static constexpr int kEpollBatch = 64;
    epoll_event ready_[kEpollBatch] AFMESH_GUARDED_BY(progress_mu_);

    Mutex lists_mu_;
    std::vector<Connection *> harvest_ AFMESH_GUARDED_BY(lists_mu_);
    std::vector<Connection *> failed_ AFMESH_GUARDED_BY(lists_mu_);

    // Set by arm() just before the caller sleeps on the epoll fd; a posting
    // thread that hands poll() work then rings the eventfd.
    std::atomic<bool> sleeping_{false};
};

}  // namespace afmesh::tcp
