// SPDX-License-Identifier: Apache-2.0
// One transport context (what init() creates): the verbs device, protection
// domain, the shared completion queue and its channel, the side-channel
// listener, every connection, and the progress engine poll() runs.
//
// Progress. poll() drives everything through one level-triggered epoll set
// over the completion channel, the device's async-event fd, the listener,
// the side-channel sockets and a wake-up eventfd; its descriptor is the
// wait fd. Data-path calls post straight to the QP on the caller's thread.
//
// Locks, in the order they nest:
//   progress_mu_        poll(), arm(), listen, connect, accept, close;
//   Connection::tx_mu_  one connection's send queue and state;
//   regions_mu_         the set of live registrations.
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "afmesh/hal/transport.h"
#include "buffers.h"
#include "connection.h"
#include "discovery.h"
#include "gpudirect.h"
#include "thread_annotations.h"
#include "verbs_api.h"

namespace afmesh::ibverbs {

class Context {
public:
    /** init(): loads verbs, picks a port, creates the PD and CQ, fills `caps`. */
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
    /** write_imm_v(): one chain of work requests, the last carrying the immediate (Connection::write_imm). */
    int write_imm_v(afmesh_net_conn *conn, const afmesh_net_write_seg *segs, uint32_t count, uint64_t total,
                    uint32_t imm, uint32_t flags, uint64_t cookie);
    int send(afmesh_net_conn *conn, const void *buf, size_t len, uint32_t flags, uint64_t cookie);

    int poll(afmesh_net_event *events, int max);
    int wait_fd(int *fd) const;
    int arm();
    int describe(char *buf, size_t len);
    /** counters(): work requests, CQ polls and this module's system calls so far. */
    int counters(afmesh_net_counter *out, uint32_t capacity) const { return fabric_.counters.report(out, capacity); }

private:
    /** What mem_register hands out as afmesh_net_mr. */
    struct Registration {
        ibv_mr *mr;
        uint32_t access;  // AFMESH_NET_ACCESS_*
    };

    Context() = default;
    int open_verbs(afmesh_net_caps *caps);
    /**
     * Checks one write of `bytes` from `src` to `dst` at `dst_offset` and
     * fills `*seg` with it. `total` is the whole operation's size
     * (write_imm_v: its segments together): above max_inline the source must
     * lie in `src_mr`. On a violation returns its status, saying why in `*why`.
     */
    int prepare_write(const void *src, uint64_t bytes, afmesh_net_mr *src_mr, uint64_t total,
                      const afmesh_net_rkey *dst, uint64_t dst_offset, WriteSegment *seg, std::string *why);
    bool watch(int fd, uint32_t events, void *tag, std::string *why);
    void set_interest(Connection *conn, uint32_t events) AFMESH_REQUIRES(progress_mu_);
    bool reserve_cq(std::string *why) AFMESH_REQUIRES(progress_mu_);
    void release_cq() AFMESH_REQUIRES(progress_mu_);
    void wake();

    // poll()'s work, with progress_mu_ held.
    void dispatch(void *tag, uint32_t events) AFMESH_REQUIRES(progress_mu_);
    void drain_channel() AFMESH_REQUIRES(progress_mu_);
    void handle_async_events() AFMESH_REQUIRES(progress_mu_);
    void accept_side_channels() AFMESH_REQUIRES(progress_mu_);
    void send_request(Connection *conn) AFMESH_REQUIRES(progress_mu_);
    void progress_handshake(Connection *conn, uint32_t events) AFMESH_REQUIRES(progress_mu_);
    void fail(Connection *conn, int status, const std::string &reason) AFMESH_REQUIRES(progress_mu_);
    void forget(Connection *conn) AFMESH_REQUIRES(progress_mu_);

    void reap(EventSink &sink) AFMESH_REQUIRES(progress_mu_);
    void complete(const ibv_wc &wc, EventSink &sink) AFMESH_REQUIRES(progress_mu_);
    void replay_early(EventSink &sink) AFMESH_REQUIRES(progress_mu_);
    void report(EventSink &sink) AFMESH_REQUIRES(progress_mu_);

    std::unique_ptr<VerbsLibrary> verbs_;
    const VerbsApi *api_ = nullptr;
    Discovery discovery_;
    GpuDirect gpudirect_;
    Fabric fabric_;
    std::unique_ptr<SendPool> pool_;
    ibv_comp_channel *channel_ = nullptr;
    int cq_capacity_ = 0;
    int epoll_fd_ = -1;
    int wake_fd_ = -1;
    sockaddr_storage side_host_{};
    std::string side_source_;
    // Tags for the fds that are not connections.
    char channel_tag_ = 0, async_tag_ = 0, listen_tag_ = 0, wake_tag_ = 0;

    Mutex progress_mu_;
    int cq_reserved_ AFMESH_GUARDED_BY(progress_mu_) = 0;
    int listen_fd_ AFMESH_GUARDED_BY(progress_mu_) = -1;
    sockaddr_storage listen_address_ AFMESH_GUARDED_BY(progress_mu_){};
    std::unordered_set<Connection *> connections_ AFMESH_GUARDED_BY(progress_mu_);
    std::unordered_map<uint32_t, Connection *> by_qpn_ AFMESH_GUARDED_BY(progress_mu_);
    std::deque<Connection *> incoming_ AFMESH_GUARDED_BY(progress_mu_);  // set up, not yet accepted
    bool incoming_announced_ AFMESH_GUARDED_BY(progress_mu_) = false;
    std::vector<Connection *> connected_ AFMESH_GUARDED_BY(progress_mu_);  // EV_CONNECTED to report
    std::vector<Connection *> failed_ AFMESH_GUARDED_BY(progress_mu_);     // EV_CONN_ERROR to report
    // Accepted with completions that arrived before.
    std::vector<Connection *> replay_ AFMESH_GUARDED_BY(progress_mu_);
    // Receive slots the last poll's EV_RECV pointed into.
    std::vector<std::pair<Connection *, uint32_t>> reposts_ AFMESH_GUARDED_BY(progress_mu_);
    // Freed at the next poll: the last events may point into them.
    std::vector<Connection *> closed_ AFMESH_GUARDED_BY(progress_mu_);
    std::deque<ibv_wc> stash_ AFMESH_GUARDED_BY(progress_mu_);  // completions arm() took from the CQ
    static constexpr int kEpollBatch = 64;

    Mutex regions_mu_;
    std::unordered_set<Registration *> regions_ AFMESH_GUARDED_BY(regions_mu_);

    std::atomic<bool> sleeping_{false};
};

}  // namespace afmesh::ibverbs
