// SPDX-License-Identifier: Apache-2.0
// One node of a test cluster, driven by the AFMESH_* environment the test
// harness (or `afmesh run`) sets. It uses only the public API and checks
// every byte it pulls. Exit code 0 means the scenario held; anything else is
// printed with the reason.
//
//   af_test_node echo [--iters N] [--microbatches M] [--rows R] [--cols C]
//                     [--subset] [--dynamic] [--respond-vec] [--unregistered]
//                     [--die-after K]     (this node SIGKILLs itself after K rounds)
//                     [--die-as ROLE:RANK]  (with --die-after: only that node, e.g. server:1)
//                     [--die-once PATH]   (with --die-after: only the first incarnation, which creates PATH)
//                     [--await-replacement]  (worker, with --subset: a push-pull whose server failed waits
//                                          for that server's PEER_UP and is issued again; server: a
//                                          get_batch over all workers that fails waits for the failed
//                                          worker's PEER_UP; a worker replacing one that died with
//                                          --die-once takes over at the round it died)
//                     [--serve-until-closed]  (server: answers until every worker has stopped, not a
//                                          counted number of requests; peer failures are printed and
//                                          tolerated)
//                     [--expect-peer-failure]  (succeed only once a peer's death is reported)
//                     [--device]          (tensors in device memory of the AFMESH_DEVICE module)
//                     [--stream-wait]     (with --device, one micro-batch: the worker reads its pulls
//                                          behind afmesh_stream_wait, armed before the server answers)
//                     [--held-stream]     (with --device, worker: every round's push-pulls are issued
//                                          while its stream is held on a host flag; they must return
//                                          and stay IN_PROGRESS until the flag releases the stream)
//                     [--retry-get-batch]  (server: a get_batch that fails but keeps its batch queued
//                                          is retried; the count is printed)
//                     [--retry-push-pull]  (worker: a push-pull that fails is issued again, with the
//                                          same keys; the count is printed)
//                     [--tolerate-failed-respond]  (server: a respond that fails is counted and printed;
//                                          its worker is expected to issue the push-pull again)
//                     [--report-latency]  (worker: print p50/p99 of push-pull -> answers readable on
//                                          the host; with --stream-wait servers no longer hold answers back)
//                     [--hold PATH]       (once joined and past the first barrier, writes "ready" to
//                                          the FIFO PATH.ready and waits for a line on PATH.go:
//                                          hold_point.h)
//                     [--outage-at N --hold-down PATH --hold-back PATH]  (worker: before round N,
//                                          holds at PATH (the test kills the scheduler) and waits to
//                                          hear it is gone; runs 3 rounds without it; then holds at
//                                          the second PATH (the test starts it again) and waits to be
//                                          taken back)
//   af_test_node join --expect STATUS[,STATUS...]  (only joins; STATUS e.g. AFMESH_ERR_TIMEOUT)
//
// With --device the node loads the device module itself (from
// AFMESH_MODULE_PATH) to allocate device memory and copy to and from it: the
// worker writes its pushes with an asynchronous copy on its stream and
// pushes with afmesh_push_pull_on_stream, so a push read before that stream's
// work would carry stale bytes; pull buffers are filled with a sentinel
// first, so bytes past a short answer must still hold it.
#include <afmesh/afmesh.hpp>

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdarg>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "afmesh/hal/device.h"

namespace {

using afmesh::api::Error;
using afmesh::api::Node;
using afmesh::api::check;

struct Options {
    std::string scenario;
    int iters = 20, microbatches = 3, rows = 8, cols = 64;
    bool subset = false, dynamic = false, respond_vec = false, unregistered = false;
    int die_after = -1;
    std::string die_as, die_once;
    bool await_replacement = false, serve_until_closed = false;
    bool expect_peer_failure = false;
    bool device = false, stream_wait = false, held_stream = false, report_latency = false, retry_get_batch = false,
         retry_push_pull = false, tolerate_failed_respond = false;
    std::string expect;
    std::string hold;
    int outage_at = -1;
    std::string hold_down, hold_back;
};

// Rounds a worker runs while the scheduler is down (--outage-at).
constexpr int kOutageRounds = 3;

[[noreturn]] void fail(const std::string &why) {
    fflush(stdout);  // what the node printed before, in order
    fprintf(stderr, "FAIL: %s\n", why.c_str());
    fflush(stderr);
    _exit(1);  // at once: the point is to report, not to stop cleanly
}

Options parse(int argc, char **argv) {
    Options o;
    if (argc < 2) fail("usage: af_test_node echo|join [options]");
    o.scenario = argv[1];
    for (int i = 2; i < argc; ++i) {
        std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) fail(a + " needs a value");
            return argv[++i];
        };
        if (a == "--iters") o.iters = std::stoi(value());
        else if (a == "--microbatches") o.microbatches = std::stoi(value());
        else if (a == "--rows") o.rows = std::stoi(value());
        else if (a == "--cols") o.cols = std::stoi(value());
        else if (a == "--subset") o.subset = true;
        else if (a == "--dynamic") o.dynamic = true;
        else if (a == "--respond-vec") o.respond_vec = true;
        else if (a == "--unregistered") o.unregistered = true;
        else if (a == "--die-after") o.die_after = std::stoi(value());
        else if (a == "--die-as") o.die_as = value();
        else if (a == "--die-once") o.die_once = value();
        else if (a == "--await-replacement") o.await_replacement = true;
        else if (a == "--serve-until-closed") o.serve_until_closed = true;
        else if (a == "--expect-peer-failure") o.expect_peer_failure = true;
        else if (a == "--expect") o.expect = value();
        else if (a == "--device") o.device = true;
        else if (a == "--stream-wait") o.stream_wait = true;
        else if (a == "--held-stream") o.held_stream = true;
        else if (a == "--retry-push-pull") o.retry_push_pull = true;
        else if (a == "--tolerate-failed-respond") o.tolerate_failed_respond = true;
        else if (a == "--retry-get-batch") o.retry_get_batch = true;
        else if (a == "--report-latency") o.report_latency = true;
        else if (a == "--hold") o.hold = value();
        else if (a == "--outage-at") o.outage_at = std::stoi(value());
        else if (a == "--hold-down") o.hold_down = value();
        else if (a == "--hold-back") o.hold_back = value();
        else fail("unknown option " + a);
    }
    return o;
}

// Memory for a node's tensors: host memory, or (--device) memory of the
// device module AFMESH_DEVICE names, reached through that module's copies.
class Memory {
public:
    explicit Memory(bool device) {
        if (!device) return;
        const char *name = getenv("AFMESH_DEVICE"), *path = getenv("AFMESH_MODULE_PATH");
        if (!name || !path) fail("--device needs AFMESH_DEVICE and AFMESH_MODULE_PATH");
        std::string dirs = path;
        void *lib = nullptr;
        for (size_t start = 0; !lib && start <= dirs.size();) {
            size_t end = std::min(dirs.find(':', start), dirs.size());
            lib = dlopen((dirs.substr(start, end - start) + "/libafmesh_dev_" + name + ".so").c_str(), RTLD_NOW);
            start = end + 1;
        }
        if (!lib) fail(std::string("cannot load device module ") + name + " from " + path);
        auto query = reinterpret_cast<afmesh_module_query_fn>(dlsym(lib, "afmesh_module_query"));
        afmesh_module_desc desc{};
        desc.struct_size = sizeof desc;
        if (!query || query(AFMESH_HAL_ABI_MAJOR, &kServices, &desc) != AFMESH_HAL_OK)
            fail(std::string("device module ") + name + " does not answer its query");
        ops_ = static_cast<const afmesh_device_ops *>(desc.ops);
        check_hal(ops_->init(&ctx_), "init");
        check_hal(ops_->stream_create(ctx_, 0, &stream_), "stream_create");
        kind_ = static_cast<afmesh_mem_kind>(ops_->mem_kind);
    }

    ~Memory() {
        if (!device()) return;
        if (hold_) ops_->flag_destroy(ctx_, hold_);
        ops_->stream_destroy(ctx_, stream_);
        ops_->fini(ctx_);
    }
    Memory(const Memory &) = delete;
    Memory &operator=(const Memory &) = delete;

    bool device() const { return ops_ != nullptr; }
    afmesh_mem_kind kind() const { return kind_; }
    void *stream() const { return stream_; }
    const afmesh_device_ops &ops() const { return *ops_; }
    void *ctx() const { return ctx_; }

    /** Device memory (freed with the process), or `host` itself for host memory. */
    /**
     * Host memory that lives as long as this object, which main() makes
     * before the node and so destroys after it: a receive buffer handed to
     * afmesh_register_recv_buffer must, since the library may write into it
     * (a late eager push) until the node is destroyed.
     */
    std::vector<float> &lasting(size_t elems) { return lasting_.emplace_back(elems); }
    void *place(std::vector<float> &host) {
        if (!device()) return host.data();
        void *p = nullptr;
        check_hal(ops_->mem_alloc(ctx_, 0, AFMESH_ALLOC_DEVICE, host.size() * sizeof(float), &p), "mem_alloc");
        return p;
    }
    /** Queues a copy on the stream; both buffers must stay untouched until the stream has run it. */
    void copy_async(void *dst, const void *src, size_t bytes) {
        if (dst != src) check_hal(ops_->memcpy_async(ctx_, dst, src, bytes, stream_), "memcpy_async");
    }
    void copy(void *dst, const void *src, size_t bytes) {
        if (dst == src) return;
        if (device()) check_hal(ops_->memcpy_sync(ctx_, dst, src, bytes), "memcpy_sync");
        else memmove(dst, src, bytes);
    }
    /** Holds the stream: work queued from now on waits for release() (a host flag the stream waits on). */
    void hold() {
        if (!hold_) check_hal(ops_->flag_create(ctx_, 0, &hold_), "flag_create");
        check_hal(ops_->stream_wait_flag(ctx_, stream_, hold_, ++holds_), "stream_wait_flag");
    }
    void release() { check_hal(ops_->flag_write(ctx_, hold_, holds_), "flag_write"); }
    void check_hal(int rc, const char *what) {
        if (rc != AFMESH_HAL_OK) fail(std::string("device module ") + what + " failed: " + t_error);
    }

private:
    static void ignore_log(int, const char *, const char *, ...) {}
    static void set_error(const char *fmt, ...) {
        char buf[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof buf, fmt, ap);
        va_end(ap);
        t_error = buf;
    }
    static const char *get_config(const char *name) { return getenv(name); }
    static inline thread_local std::string t_error;
    static constexpr afmesh_host_services kServices = {sizeof(afmesh_host_services), ignore_log, set_error, get_config};

    const afmesh_device_ops *ops_ = nullptr;
    void *ctx_ = nullptr, *stream_ = nullptr;
    void *hold_ = nullptr;  // the flag hold() makes the stream wait on
    uint32_t holds_ = 0;
    afmesh_mem_kind kind_ = AFMESH_MEM_HOST;
    std::deque<std::vector<float>> lasting_;  // a deque: growing it moves no buffer
};

constexpr float kSentinel = -12345.0f;  // what a device pull buffer holds before the answer

afmesh_role role_from_env() {
    const char *r = getenv("AFMESH_ROLE");
    if (!r) fail("AFMESH_ROLE is not set");
    if (!strcmp(r, "worker")) return AFMESH_ROLE_WORKER;
    if (!strcmp(r, "server")) return AFMESH_ROLE_SERVER;
    return AFMESH_ROLE_SCHEDULER;
}

afmesh_tensor matrix(void *data, int rows, int cols, afmesh_mem_kind kind = AFMESH_MEM_HOST) {
    afmesh_tensor t{};
    t.data = data;
    t.kind = kind;
    t.bytes = static_cast<uint64_t>(rows) * cols * sizeof(float);
    t.dtype = {2, 32, 1};
    t.ndim = 2;
    t.shape[0] = rows;
    t.shape[1] = cols;
    return t;
}

// The value a worker pushes at (iteration, micro-batch, element); the server
// answers 2x + its rank + 1, so each answer proves who computed it from what.
float pushed_value(int worker, int iter, int mb, int i) { return static_cast<float>(worker * 1000 + iter * 10 + mb) + i * 0.5f; }
float answered_value(float x, int server) { return 2 * x + static_cast<float>(server + 1); }
// Dynamic token counts: the number of rows a server answers with.
int answered_rows(const Options &o, int iter, int server) { return o.dynamic ? 1 + (iter + server) % o.rows : o.rows; }
// Subset mode: the one server a micro-batch goes to.
int target_server(int iter, int mb, int num_servers) { return (iter + mb) % num_servers; }

// Says the node has joined, then waits to be let go (hold_point.h), so a
// test acts on a formed cluster at a known point: the FIFOs' other ends are
// held open by the test, so neither open blocks and the read waits for "go".
void hold(const std::string &path) {
    FILE *ready = fopen((path + ".ready").c_str(), "w");
    if (!ready || fprintf(ready, "ready %d\n", static_cast<int>(getpid())) < 0 || fclose(ready) != 0)
        fail("--hold: cannot write " + path + ".ready");
    FILE *go = fopen((path + ".go").c_str(), "r");
    char line[16];
    if (!go || !fgets(line, sizeof line, go)) fail("--hold: no go on " + path + ".go");
    fclose(go);
}

// CLOCK_MONOTONIC, the same in every process of the host: the fault tests
// compare a node's report with when the fault was injected.
long long now_ns() {
    return static_cast<long long>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count());
}

bool maybe_die(const Options &o, Node &node, int round) {
    if (o.die_after < 0 || round < o.die_after) return false;
    const std::string me = std::string(node.role() == AFMESH_ROLE_WORKER ? "worker:" : "server:") +
                           std::to_string(node.rank());
    if (!o.die_as.empty() && o.die_as != me) return false;
    if (!o.die_once.empty()) {
        const int marker = open(o.die_once.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
        if (marker < 0) return false;  // an earlier incarnation died already
        close(marker);
    }
    {
        printf("dying on purpose at %lld ns after %d rounds\n", now_ns(), round);
        fflush(stdout);
        kill(getpid(), SIGKILL);
    }
    return false;
}

// Push-pulls still in flight when a failure unwinds an iteration: waited out
// (their outcome ignored) before the pull buffers and registrations go, since
// a live server may still write into them.
struct InFlight {
    afmesh_node *node;
    std::vector<afmesh_handle> handles;
    ~InFlight() {
        for (afmesh_handle h : handles) (void)afmesh_wait(node, h, 30000);  // a waited one is unknown at once
    }
};

// What a node knows of its peers' membership (servers for a worker,
// workers for a server), from the events: which are up (at the start, or
// replaced since their last failure).
class PeerWatch {
public:
    explicit PeerWatch(Node &node)
        : node_(node),
          peers_(node.role() == AFMESH_ROLE_WORKER ? AFMESH_ROLE_SERVER : AFMESH_ROLE_WORKER),
          up_(static_cast<size_t>(peers_ == AFMESH_ROLE_SERVER ? node.num_servers() : node.num_workers()), true) {}

    /** Returns once `peer` is up: at once if no failure of it has been heard since it last came up. */
    void await_up(int32_t peer) {
        while (take_one(0)) {
        }
        while (!up_.at(static_cast<size_t>(peer)))
            if (!take_one(60000)) fail(name(peer) + " was not replaced within 60 s");
    }
    void await_all_up() {
        for (size_t peer = 0; peer < up_.size(); ++peer) await_up(static_cast<int32_t>(peer));
    }
    /** Returns once the scheduler is known to be `up` (a restarted one took this node back) or down. */
    void await_scheduler(bool up) {
        while (scheduler_up_ != up)
            if (!take_one(60000)) fail(std::string("the scheduler was not ") + (up ? "back" : "gone") + " within 60 s");
    }

private:
    std::string name(int32_t peer) const {
        return (peers_ == AFMESH_ROLE_SERVER ? "server " : "worker ") + std::to_string(peer);
    }
    bool take_one(int timeout_ms) {
        std::optional<afmesh_event> event = node_.next_event(timeout_ms);
        if (!event) return false;
        if (event->role == AFMESH_ROLE_SCHEDULER) {
            scheduler_up_ = event->type == AFMESH_EVENT_PEER_UP;
            printf("%s scheduler\n", scheduler_up_ ? "PEER_UP" : "PEER_DOWN");
        }
        if (event->role == peers_) {
            const bool up = event->type == AFMESH_EVENT_PEER_UP;
            printf("%s %s\n", up ? "PEER_UP" : "PEER_DOWN", name(event->rank).c_str());
            up_.at(static_cast<size_t>(event->rank)) = up;
        }
        return true;
    }

    Node &node_;
    const afmesh_role peers_;
    std::vector<bool> up_;
    bool scheduler_up_ = true;
};

int run_worker(Node &node, Memory &mem, const Options &o) {
    const int rank = node.rank(), servers = node.num_servers();
    const size_t elems = static_cast<size_t>(o.rows) * o.cols;
    const size_t bytes = elems * sizeof(float);
    // Host copies; with --device the tensors themselves live in device memory.
    std::vector<std::vector<float>> push(o.microbatches, std::vector<float>(elems));
    std::vector<std::vector<float>> pull(static_cast<size_t>(o.microbatches) * servers, std::vector<float>(elems));
    std::vector<void *> push_at, pull_at;
    for (auto &b : push) push_at.push_back(mem.place(b));
    for (auto &b : pull) pull_at.push_back(mem.place(b));
    const std::vector<float> sentinel(elems, kSentinel);
    std::vector<afmesh::api::Registration> regs;
    regs.reserve(push.size() + pull.size());
    if (!o.unregistered) {
        for (void *b : push_at) regs.emplace_back(node, b, bytes, mem.kind());
        for (void *b : pull_at) regs.emplace_back(node, b, bytes, mem.kind());
    }
    // Servers register their receive slices before this barrier; a replacement's cluster passed it long ago.
    if (!node.replacement()) check(afmesh_barrier(node.get(), 3, 30000));
    PeerWatch watch(node);
    if (!o.hold.empty()) hold(o.hold);
    std::vector<double> latencies_us;
    int reissued = 0;
    int32_t recovered = -1;  // the server whose replacement this iteration waited for
    // A replacement of the node that died (--die-once) takes over where it died.
    const bool took_over = node.replacement() && !o.die_once.empty() && o.die_after >= 0;
    for (int iter = took_over ? o.die_after : 0; iter < o.iters; ++iter) {
        maybe_die(o, node, iter);
        if (iter == o.outage_at) {
            hold(o.hold_down);  // the test kills the scheduler, then lets go
            watch.await_scheduler(false);
        }
        if (o.outage_at >= 0 && iter == o.outage_at + kOutageRounds) {
            printf("worker %d: %d rounds verified while the scheduler was down\n", rank, kOutageRounds);
            hold(o.hold_back);  // the test starts it again
            watch.await_scheduler(true);
            printf("worker %d: the restarted scheduler took this node back\n", rank);
        }
        const auto started = std::chrono::steady_clock::now();
        InFlight in_flight{node.get(), {}};
        std::vector<afmesh_handle> &handles = in_flight.handles;
        std::vector<std::vector<int32_t>> targets(o.microbatches);
        if (o.held_stream) mem.hold();
        auto issue = [&](int mb) {
            for (size_t i = 0; i < elems; ++i) push[mb][i] = pushed_value(rank, iter, mb, static_cast<int>(i));
            mem.copy_async(push_at[mb], push[mb].data(), bytes);  // the push-pull must read after this
            afmesh_push p{};
            p.key = static_cast<uint64_t>(mb);
            p.tensor = matrix(push_at[mb], o.rows, o.cols, mem.kind());
            if (o.subset) {
                targets[mb] = {target_server(iter, mb, servers)};
                p.servers = targets[mb].data();
                p.num_servers = 1;
            }
            std::vector<afmesh_pull> pulls;
            for (int s = 0; s < servers; ++s) {
                if (o.subset && s != targets[mb][0]) continue;
                afmesh_pull q{};
                q.key = 1000 + static_cast<uint64_t>(mb);
                if (mem.device()) mem.copy(pull_at[mb * servers + s], sentinel.data(), bytes);
                q.tensor = matrix(pull_at[mb * servers + s], o.rows, o.cols, mem.kind());
                q.server = s;
                pulls.push_back(q);
            }
            return mem.device() ? node.push_pull_on_stream({p}, pulls, mem.stream()) : node.push_pull({p}, pulls);
        };
        // --await-replacement: a push-pull whose server failed waits for its replacement and goes again.
        auto await_servers = [&](int mb, const char *what, const char *why) {
            const int32_t server = o.subset ? targets[mb][0] : -1;  // without --subset: any of them
            printf("worker %d: push-pull %s, awaiting the replacement of server %s: %s\n", rank, what,
                   server < 0 ? "(any)" : std::to_string(server).c_str(), why);
            if (server < 0) {
                watch.await_all_up();
            } else {
                watch.await_up(server);
                recovered = server;
            }
        };
        auto issue_surviving = [&](int mb) {
            for (;;) {
                try {
                    return issue(mb);
                } catch (const Error &e) {
                    if (!o.await_replacement || e.status() != AFMESH_ERR_PEER_FAILED) throw;
                    await_servers(mb, "refused", e.what());
                }
            }
        };
        for (int mb = 0; mb < o.microbatches; ++mb) handles.push_back(issue_surviving(mb));
        if (o.held_stream) {
            // The pushes are not even produced yet: nothing can have been sent.
            for (afmesh_handle h : handles)
                if (afmesh_status st = afmesh_test(node.get(), h); st != AFMESH_IN_PROGRESS)
                    fail(std::string("a push-pull behind a held stream reports ") + afmesh_strerror(st));
            mem.release();
        }
        if (o.stream_wait) {
            // The stream reads the pulls only after the push-pull has ended and they reached the device.
            node.stream_wait(handles[0], mem.stream());
            for (int s = 0; s < servers; ++s) mem.copy_async(pull[s].data(), pull_at[s], bytes);
            // Servers answer only after this barrier: the stream waits before the push-pull ends.
            if (!o.report_latency) check(afmesh_barrier(node.get(), 3, 30000));
            mem.check_hal(mem.ops().stream_sync(mem.ctx(), mem.stream()), "stream_sync");
        }
        for (int mb = 0; mb < o.microbatches; ++mb) {
            if (o.await_replacement) {
                while (afmesh_wait(node.get(), handles[mb], 30000) != AFMESH_OK) {
                    ++reissued;
                    await_servers(mb, "failed", afmesh_last_error());
                    handles[mb] = issue_surviving(mb);
                }
            } else if (!o.retry_push_pull) {
                node.wait(handles[mb], 30000);
            } else if (afmesh_wait(node.get(), handles[mb], 30000) != AFMESH_OK) {
                printf("worker %d: push-pull failed, issuing it again: %s\n", rank, afmesh_last_error());
                ++reissued;
                handles[mb] = issue(mb);
                node.wait(handles[mb], 30000);
            }
            if (mem.device() && !o.stream_wait)
                for (int s = 0; s < servers; ++s) mem.copy(pull[mb * servers + s].data(), pull_at[mb * servers + s], bytes);
        }
        latencies_us.push_back(
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - started).count());
        for (int mb = 0; mb < o.microbatches; ++mb) {
            size_t pull_index = 0;
            for (int s = 0; s < servers; ++s) {
                if (o.subset && s != targets[mb][0]) continue;
                const int rows = answered_rows(o, iter, s);
                uint64_t bytes = 0;
                check(afmesh_pull_bytes(node.get(), handles[mb], pull_index++, &bytes));
                if (bytes != static_cast<uint64_t>(rows) * o.cols * sizeof(float))
                    fail("server " + std::to_string(s) + " answered " + std::to_string(bytes) + " bytes, want " +
                         std::to_string(rows * o.cols * sizeof(float)));
                const float *got = pull[mb * servers + s].data();
                for (size_t i = 0; i < static_cast<size_t>(rows) * o.cols; ++i) {
                    float want = answered_value(pushed_value(rank, iter, mb, static_cast<int>(i)), s);
                    if (got[i] != want)
                        fail("iter " + std::to_string(iter) + " mb " + std::to_string(mb) + " server " +
                             std::to_string(s) + " element " + std::to_string(i) + ": got " + std::to_string(got[i]) +
                             ", want " + std::to_string(want));
                }
                for (size_t i = static_cast<size_t>(rows) * o.cols; mem.device() && i < elems; ++i)
                    if (got[i] != kSentinel)
                        fail("server " + std::to_string(s) + " wrote past its " + std::to_string(rows) + "-row answer");
            }
        }
        // For the recovery time (restart_test): from "dying on purpose at" to these.
        if (recovered >= 0)
            printf("worker %d: first push-pull with server %d's replacement verified at %lld ns\n", rank, recovered,
                   now_ns());
        if (recovered < 0 && node.replacement() && latencies_us.size() == 1)
            printf("worker %d: first push-pull of this replacement verified at %lld ns\n", rank, now_ns());
        recovered = -1;
    }
    if (o.expect_peer_failure) fail("no peer failure was reported");
    printf("worker %d: %d iterations x %d micro-batches verified (%d push-pulls issued again)\n", rank, o.iters,
           o.microbatches, reissued);
    if (o.report_latency && !latencies_us.empty()) {
        std::sort(latencies_us.begin(), latencies_us.end());
        printf("worker %d latency_us p50 %.1f p99 %.1f\n", rank, latencies_us[latencies_us.size() / 2],
               latencies_us[latencies_us.size() * 99 / 100]);
    }
    return 0;
}

int run_server(Node &node, Memory &mem, const Options &o) {
    const int rank = node.rank(), workers = node.num_workers();
    const size_t elems = static_cast<size_t>(o.rows) * o.cols;
    if (!o.unregistered) {
        // One slice per (worker, micro-batch key).
        std::vector<float> &recv = mem.lasting(elems * workers * o.microbatches);
        void *recv_at = mem.place(recv);
        std::vector<int32_t> ranks;
        std::vector<uint64_t> keys;
        for (int w = 0; w < workers; ++w)
            for (int mb = 0; mb < o.microbatches; ++mb) ranks.push_back(w), keys.push_back(static_cast<uint64_t>(mb));
        check(afmesh_register_recv_buffer(node.get(), recv_at, recv.size() * sizeof(float), mem.kind(), 0,
                                          ranks.data(), keys.data(), ranks.size()));
    }
    // Slices exist before any worker pushes; a replacement's cluster passed this barrier long ago.
    if (!node.replacement()) check(afmesh_barrier(node.get(), 3, 30000));
    if (!o.hold.empty()) hold(o.hold);
    PeerWatch watch(node);
    std::vector<float> out(elems * workers), x_host(elems);
    void *out_at = mem.place(out);  // --device: answers go out from device memory
    afmesh::api::Registration out_reg(node, out_at, out.size() * sizeof(float), mem.kind());
    // Registered receive buffers keep their kind; rendezvous slices are the library's choice.
    const afmesh_mem_kind push_kind = o.unregistered ? AFMESH_MEM_HOST : mem.kind();
    // Every worker sends one request per micro-batch per iteration (to this
    // server, unless subset mode routes it elsewhere).
    int expected = 0;
    for (int iter = 0; iter < o.iters; ++iter)
        for (int mb = 0; mb < o.microbatches; ++mb)
            expected += !o.subset || target_server(iter, mb, node.num_servers()) == rank ? workers : 0;
    int answered = 0, round = 0, retried = 0, failed_responds = 0;
    while (o.serve_until_closed || answered < expected) {
        maybe_die(o, node, round++);
        std::vector<afmesh_request *> batch(workers * o.microbatches);
        size_t count = 0;
        // Subsets, and push-pulls issued again after a failed respond, leave
        // workers with unequal numbers of requests: take what has arrived.
        const bool any = o.subset || o.tolerate_failed_respond || o.serve_until_closed;
        const afmesh_status got = afmesh_get_batch(node.get(), any ? AFMESH_BATCH_ANY : AFMESH_BATCH_ALL_WORKERS,
                                                   30000, batch.data(), batch.size(), &count);
        if (o.serve_until_closed && got == AFMESH_ERR_CLOSED) break;  // every worker has stopped
        if (o.serve_until_closed && got == AFMESH_ERR_PEER_FAILED) {
            printf("server %d: a worker failed: %s\n", rank, afmesh_last_error());
            continue;
        }
        if (o.await_replacement && got == AFMESH_ERR_PEER_FAILED) {
            // A batch over all workers waits for the failed one's replacement.
            printf("server %d: a worker failed, awaiting its replacement: %s\n", rank, afmesh_last_error());
            watch.await_all_up();
            continue;
        }
        if (got != AFMESH_OK && o.retry_get_batch && strstr(afmesh_last_error(), "the batch stays queued")) {
            printf("server %d: get_batch failed, retrying: %s\n", rank, afmesh_last_error());
            ++retried;
            continue;
        }
        check(got);
        if (o.stream_wait && !o.report_latency)
            check(afmesh_barrier(node.get(), 3, 30000));  // every worker's stream waits by now
        std::vector<int64_t> counts;
        for (size_t r = 0; r < count; ++r) {
            int32_t worker = -1;
            size_t num_push = 0, num_pull = 0;
            check(afmesh_request_info(batch[r], &worker, &num_push, &num_pull));
            afmesh_tensor in{};
            uint64_t key = 0;
            check(afmesh_request_push(batch[r], 0, &key, &in));
            if (num_push != 1 || num_pull != 1 || in.bytes != elems * sizeof(float) || in.ndim != 2)
                fail("unexpected request shape from worker " + std::to_string(worker));
            if (!o.unregistered && in.kind != push_kind)
                fail("push view of kind " + std::to_string(in.kind) + ", want " + std::to_string(push_kind));
            const float *x = static_cast<const float *>(in.data);
            if (in.kind != AFMESH_MEM_HOST) {
                mem.copy(x_host.data(), in.data, in.bytes);
                x = x_host.data();
            }
            // The iteration is encoded in the pushed values: recover it for the dynamic row count.
            const int iter = (static_cast<int>(x[0]) - worker * 1000) / 10;
            const int rows = answered_rows(o, iter, rank);
            float *y = out.data() + (o.respond_vec ? elems * r : 0);
            for (size_t i = 0; i < static_cast<size_t>(rows) * o.cols; ++i) y[i] = answered_value(x[i], rank);
            if (o.respond_vec) {
                counts.push_back(rows);
            } else {
                void *y_at = static_cast<float *>(out_at) + (y - out.data());
                mem.copy(y_at, y, static_cast<size_t>(rows) * o.cols * sizeof(float));
                const afmesh_tensor answer = matrix(y_at, rows, o.cols, mem.kind());
                if (!o.tolerate_failed_respond && !o.serve_until_closed) {
                    node.respond(batch[r], {answer});
                } else if (afmesh_respond(node.get(), batch[r], &answer, 1) != AFMESH_OK) {
                    printf("server %d: respond failed: %s\n", rank, afmesh_last_error());
                    ++failed_responds;
                    --answered;  // the worker issues it again
                }
            }
        }
        if (o.respond_vec) {
            // respond_vec slices consecutive rows; pack each answer at its offset.
            std::vector<float> packed;
            for (size_t r = 0; r < count; ++r)
                packed.insert(packed.end(), out.begin() + elems * r, out.begin() + elems * r + counts[r] * o.cols);
            int64_t total = 0;
            for (int64_t c : counts) total += c;
            void *packed_at = mem.device() ? out_at : packed.data();
            mem.copy(packed_at, packed.data(), packed.size() * sizeof(float));
            afmesh_tensor buffer = matrix(packed_at, static_cast<int>(total), o.cols, mem.kind());
            check(afmesh_respond_vec(node.get(), &buffer, counts.data(), batch.data(), count));
        }
        answered += static_cast<int>(count);
    }
    if (o.expect_peer_failure) fail("no peer failure was reported");
    printf("server %d: answered %d requests (get_batch retried %d times, %d responds failed)\n", rank, answered,
           retried, failed_responds);
    return 0;
}

}  // namespace

// Prints the membership events up to the first about a peer, and those
// already queued behind it, as "PEER_DOWN <role> <rank> <status>: <reason>"
// (the scheduler's as "PEER_DOWN scheduler ..."): the tests look for the
// failed peer there. It does not wait for more: a peer still waiting on this
// node may be all that is left. No peer's event within the bound fails.
void print_peer_down(Node &node) {
    bool peer_seen = false;
    while (std::optional<afmesh_event> event = node.next_event(peer_seen ? 0 : 60000)) {
        if (event->type != AFMESH_EVENT_PEER_DOWN) fail("a membership event of unknown type");
        if (event->role == AFMESH_ROLE_SCHEDULER) {
            printf("PEER_DOWN scheduler %s: %s\n", afmesh_strerror(event->status), event->reason);
            continue;
        }
        if (event->incarnation == 0) fail("a peer's PEER_DOWN without its incarnation");
        printf("PEER_DOWN %s %d %s: %s\n", event->role == AFMESH_ROLE_WORKER ? "worker" : "server", event->rank,
               afmesh_strerror(event->status), event->reason);
        peer_seen = true;
    }
    if (!peer_seen) fail("a peer failure was reported, but no PEER_DOWN event says which");
}

int main(int argc, char **argv) {
    Options o = parse(argc, argv);
    if (o.stream_wait && (!o.device || o.microbatches != 1 || o.subset || o.respond_vec))
        fail("--stream-wait goes with --device, --microbatches 1 and neither --subset nor --respond-vec");
    if (o.held_stream && (!o.device || o.stream_wait))
        fail("--held-stream goes with --device, without --stream-wait");
    if (o.outage_at >= 0 && (o.hold_down.empty() || o.hold_back.empty()))
        fail("--outage-at goes with --hold-down and --hold-back");
    const afmesh_role role = role_from_env();
    if (o.scenario == "join") {
        afmesh_config config{};
        config.struct_size = sizeof config;
        config.role = role;
        afmesh_node *node = nullptr;
        afmesh_status st = afmesh_node_create(&config, &node);
        printf("join at %lld ns: %s: %s\n", now_ns(), afmesh_strerror(st), afmesh_last_error());
        if (node) afmesh_node_destroy(node);
        // --expect names one status, or several separated by commas.
        return ("," + o.expect + ",").find("," + std::string(afmesh_strerror(st)) + ",") != std::string::npos ? 0 : 1;
    }
    if (o.scenario != "echo") fail("unknown scenario " + o.scenario);
    try {
        // Loaded before the node, so the node's query of the same module is the last (its error reporting wins).
        Memory mem(o.device && role != AFMESH_ROLE_SCHEDULER);
        Node node(role);
        if (role == AFMESH_ROLE_SCHEDULER) return 0;  // serves until every node has stopped (in the destructor)
        try {
            const int rc = role == AFMESH_ROLE_WORKER ? run_worker(node, mem, o) : run_server(node, mem, o);
            if (rc == 0) node.close();  // a node that did its part must also stop cleanly
            return rc;
        } catch (const Error &e) {
            // Any call may be the one that learns of a peer's death; the
            // membership events must have it too.
            if (!o.expect_peer_failure || e.status() != AFMESH_ERR_PEER_FAILED) throw;
            printf("peer failure reported at %lld ns: %s\n", now_ns(), e.what());
            print_peer_down(node);
            return 0;
        }
    } catch (const Error &e) {
        fail(e.what());
    }
}
