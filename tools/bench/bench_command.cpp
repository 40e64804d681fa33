// `afmesh bench`: the AF-shaped benchmark. Run one process per node (e.g.
// `afmesh run --workers 2 --servers 2 -- afmesh bench`). Every worker pushes
// to every server and pulls one answer from each; servers stamp their rank
// into the answer, which workers verify on every iteration. For each size
// and polling mode the same exchange is also timed directly on the transport
// (the floor), and worker 0 prints both with their ratio.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "afmesh/afmesh.h"
#include "afmesh/afmesh.hpp"
#include "bench_options.h"
#include "command.h"
#include "config.h"
#include "engine/clock.h"
#include "floor.h"
#include "latency_stats.h"

namespace afmesh::tool {
namespace {

using api::host_bytes;
using bench::FloorCard;
using bench::FloorEndpoint;
using bench::Options;
using bench::Summary;

constexpr uint64_t kSetupKey = uint64_t{1} << 62;
constexpr uint64_t kStopKey = kSetupKey + 1;
// Tells the servers which polling mode the next phase uses, and whether it
// times afmesh or the floor; the part not being timed sleeps ("blocking") so
// it does not compete for the cores.
constexpr uint64_t kPhaseKey = kSetupKey + 2;
// Makes every worker learn a number worker 0 chose (see Sampler), through server 0.
constexpr uint64_t kAgreeKey = kSetupKey + 3;
constexpr uint64_t kCardBytes = 4096;
constexpr int kTimeoutMs = 120000;

// One measured exchange: `push` bytes to every server, `pull` bytes back from each.
struct Case {
    std::string name;
    uint64_t push, pull;
    uint64_t push_key, pull_key;
};

struct Row {
    std::string name, poll;
    uint64_t bytes_per_iter = 0;
    Summary afmesh, floor;
    bool has_floor = false;
};

[[noreturn]] void die(const std::string &what) {
    fprintf(stderr, "afmesh bench: %s\n", what.c_str());
    fflush(stderr);
    _exit(1);
}

void check(afmesh_status st, const char *what) {
    if (st != AFMESH_OK) die(std::string(what) + ": " + afmesh_strerror(st) + ": " + afmesh_last_error());
}

// Answer header: bytes 0..3 the server's rank + 1 (stamped by the server),
// bytes 4..7 the iteration (written by the worker). Beyond the header the
// pushed pattern must come back unchanged.
uint8_t pattern_byte(uint64_t i) { return static_cast<uint8_t>(i * 7 + 3); }

PollMode poll_mode(const std::string &name) {
    PollMode mode = PollMode::kAdaptive;
    parse_poll_mode(name, &mode);
    return mode;
}

// One timed block: `share` of --iters iterations (at least one), or of
// --seconds. Every worker must run a block the same number of times: the
// servers batch over all workers (get_batch's AF step; the floor's servers
// answer once every worker's write has landed), so a worker that ran one
// iteration more than another would wait for its partner forever. With
// --seconds, worker 0's clock decides for everyone: the block runs in
// chunks, each as long as worker 0 proposes and all workers agree on before
// it starts; a chunk at most doubles what ran so far, so the block ends close
// to its time after about log2(iterations) agreements.
class Sampler {
public:
    // `agree`: every worker's proposal goes in, worker 0's comes out.
    using Agree = std::function<int(int)>;
    Sampler(const Options &o, bool decides, Agree agree, int share = 1)
        : o_(o), decides_(decides), agree_(std::move(agree)), share_(share) {}

    /** Whether to run iteration done() + 1; counts it. */
    bool more() {
        ++done_;
        if (o_.seconds <= 0) return done_ <= std::max(1, o_.iters / share_);
        if (done_ > chunk_end_) chunk_end_ += agree_(decides_ ? next_chunk() : 0);
        return done_ <= chunk_end_;
    }
    /** Iterations started so far, this one included: 1 for the first. */
    int done() const { return done_; }

private:
    // Worker 0: how many more iterations, 0 once the block's time is up.
    int next_chunk() const {
        const double budget_ns = o_.seconds / share_ * 1e9;
        const double elapsed_ns = static_cast<double>(monotonic_ns() - start_);
        const int ran = done_ - 1;
        if (elapsed_ns >= budget_ns) return 0;
        if (ran == 0) return 1;
        const double fit = (budget_ns - elapsed_ns) / (elapsed_ns / ran);
        return static_cast<int>(std::clamp(std::ceil(fit), 1.0, static_cast<double>(ran)));
    }

    const Options &o_;
    const bool decides_;
    const Agree agree_;
    const int share_;
    int done_ = 0, chunk_end_ = 0;
    const uint64_t start_ = monotonic_ns();
};

// afmesh and the floor are timed in alternating blocks, each preceded by its
// share of the warm-up, so that both see the same machine: on a shared host
// the noise drifts over seconds, and one long run of each would compare two
// different machines.
constexpr int kBlocks = 8;

class WorkerBench {
public:
    WorkerBench(afmesh_node *node, const Options &o) : node_(node), o_(o) {
        check(afmesh_node_info(node, nullptr, &rank_, nullptr, &servers_), "node info");
    }

    void run() {
        std::vector<Case> cases;
        for (size_t i = 0; i < o_.sizes.size(); ++i)
            cases.push_back({human(o_.sizes[i]), o_.sizes[i], o_.sizes[i], 100 + i, 200 + i});
        cases.push_back({std::to_string(o_.tokens) + "x" + std::to_string(o_.hidden) + " " + o_.push_dtype.name,
                         o_.push_bytes(), o_.pull_bytes(), 300, 400});
        uint64_t largest = 0;
        for (const Case &c : cases) largest = std::max({largest, c.push, c.pull});
        prepare_buffers(largest);
        connect_floor(largest);
        for (const std::string &poll : o_.polls) {
            enter_phase(poll, false);
            for (const Case &c : cases) rows_.push_back(measure(c, poll));
            rows_.push_back(measure_pipeline(poll));
        }
        stop_servers();
        if (rank_ == 0) print();
    }

private:
    static std::string human(uint64_t bytes) {
        if (bytes % (1 << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
        if (bytes % 1024 == 0) return std::to_string(bytes >> 10) + " KiB";
        return std::to_string(bytes) + " B";
    }

    void prepare_buffers(uint64_t largest) {
        push_.assign(largest, 0);
        for (uint64_t i = 0; i < largest; ++i) push_[i] = pattern_byte(i);
        pulls_.assign(static_cast<size_t>(servers_) * o_.microbatches, std::vector<uint8_t>(largest));
        afmesh_mr *mr = nullptr;
        check(afmesh_register_buffer(node_, push_.data(), push_.size(), AFMESH_MEM_HOST, 0, &mr), "register");
        for (auto &p : pulls_) check(afmesh_register_buffer(node_, p.data(), p.size(), AFMESH_MEM_HOST, 0, &mr), "register");
        check(afmesh_register_buffer(node_, agreed_.data(), sizeof agreed_, AFMESH_MEM_HOST, 0, &mr), "register");
        mb_push_.assign(o_.microbatches, std::vector<uint8_t>(o_.push_bytes()));
        for (auto &p : mb_push_) {
            for (uint64_t i = 0; i < p.size(); ++i) p[i] = pattern_byte(i);
            check(afmesh_register_buffer(node_, p.data(), p.size(), AFMESH_MEM_HOST, 0, &mr), "register");
        }
    }

    // Pulls every server's floor card through afmesh itself, then connects the floor.
    void connect_floor(uint64_t largest) {
        std::vector<std::vector<uint8_t>> cards(servers_, std::vector<uint8_t>(kCardBytes));
        std::vector<afmesh_pull> pulls;
        for (int s = 0; s < servers_; ++s) pulls.push_back({kSetupKey, host_bytes(cards[s].data(), kCardBytes), s});
        afmesh_handle h;
        check(afmesh_push_pull(node_, nullptr, 0, pulls.data(), pulls.size(), &h), "setup push_pull");
        check(afmesh_wait(node_, h, kTimeoutMs), "setup wait");
        std::vector<FloorCard> decoded(servers_);
        for (int s = 0; s < servers_; ++s) {
            uint64_t n = 0;
            check(afmesh_pull_bytes(node_, h, s, &n), "setup length");
            if (!FloorCard::decode(cards[s].data(), n, &decoded[s])) die("bad floor card from a server");
        }
        Status st = FloorEndpoint::create(Config::process(), PollMode::kBlocking, largest, &floor_);
        if (st) st = floor_->connect(decoded, std::chrono::seconds(30));
        if (!st) die(st.message());
    }

    afmesh_handle post(const Case &c, uint8_t *push, size_t pull_base, uint64_t push_key, uint64_t pull_key) {
        afmesh_push p{};
        p.key = push_key;
        p.tensor = host_bytes(push, c.push);
        std::vector<afmesh_pull> pulls;
        for (int s = 0; s < servers_; ++s)
            pulls.push_back({pull_key, host_bytes(pulls_[pull_base + s].data(), c.pull), s});
        afmesh_handle h;
        check(afmesh_push_pull(node_, &p, 1, pulls.data(), pulls.size(), &h), "push_pull");
        return h;
    }

    void verify(const Case &c, size_t pull_base, uint32_t iteration) {
        const uint64_t n = std::min(c.push, c.pull);
        for (int s = 0; s < servers_; ++s) {
            const uint8_t *got = pulls_[pull_base + s].data();
            uint32_t stamp, iter;
            memcpy(&stamp, got, 4);
            memcpy(&iter, got + 4, 4);
            bool ok = stamp == static_cast<uint32_t>(s + 1) && iter == iteration;
            for (uint64_t i = 8; ok && i < n; i += std::max<uint64_t>(1, n / 61)) ok = got[i] == pattern_byte(i);
            if (!ok)
                die("worker " + std::to_string(rank_) + ": wrong answer from server " + std::to_string(s) + " in " +
                    c.name + " iteration " + std::to_string(iteration));
        }
    }

    Row measure(const Case &c, const std::string &poll) {
        fprintf(stderr, "afmesh bench: worker %d: %s, %s polling\n", rank_, c.name.c_str(), poll.c_str());
        Row row{c.name, poll, (c.push + c.pull) * servers_, {}, {}, true};
        std::vector<uint64_t> ns, floor_ns;
        const int warmup = (o_.warmup + kBlocks - 1) / kBlocks;
        for (int block = 0; block < kBlocks; ++block) {
            for (int i = 0; i < warmup; ++i) one(c, 0, nullptr);
            for (Sampler s = sampler(kBlocks); s.more();) one(c, static_cast<uint32_t>(s.done()), &ns);
            enter_phase(poll, true);
            for (int i = 0; i < warmup; ++i) floor_once(c, nullptr);
            for (Sampler s = sampler(kBlocks); s.more();) floor_once(c, &floor_ns);
            enter_phase(poll, false);
        }
        row.afmesh = bench::summarize(ns);
        row.floor = bench::summarize(floor_ns);
        return row;
    }

    void one(const Case &c, uint32_t iteration, std::vector<uint64_t> *ns) {
        memcpy(push_.data() + 4, &iteration, 4);
        const uint64_t t0 = monotonic_ns();
        afmesh_handle h = post(c, push_.data(), 0, c.push_key, c.pull_key);
        check(afmesh_wait(node_, h, kTimeoutMs), "wait");
        const uint64_t t1 = monotonic_ns();
        verify(c, 0, iteration);
        if (ns) ns->push_back(t1 - t0);
    }

    void floor_once(const Case &c, std::vector<uint64_t> *ns) {
        uint64_t elapsed = 0;
        if (Status st = floor_->round_trip(c.push, c.pull, &elapsed); !st) die(st.message());
        if (ns) ns->push_back(elapsed);
    }

    // L layers x M micro-batches in flight: the AF pipeline; latency per micro-batch.
    Row measure_pipeline(const std::string &poll) {
        const Case c{"", o_.push_bytes(), o_.pull_bytes(), 0, 0};
        Row row{"AF " + std::to_string(o_.microbatches) + " mb x " + std::to_string(o_.layers) + " layers", poll,
                (c.push + c.pull) * servers_, {}, {}, false};
        fprintf(stderr, "afmesh bench: worker %d: %s, %s polling\n", rank_, row.name.c_str(), poll.c_str());
        std::vector<uint64_t> ns;
        std::vector<afmesh_handle> handles(o_.microbatches);
        std::vector<uint64_t> posted(o_.microbatches);
        uint32_t iteration = 0;
        auto layer = [&](bool record) {
            for (int mb = 0; mb < o_.microbatches; ++mb) {
                memcpy(mb_push_[mb].data() + 4, &++iteration, 4);
                posted[mb] = monotonic_ns();
                handles[mb] = post(c, mb_push_[mb].data(), static_cast<size_t>(mb) * servers_, 1000 + mb, 2000 + mb);
            }
            for (int mb = 0; mb < o_.microbatches; ++mb) {
                check(afmesh_wait(node_, handles[mb], kTimeoutMs), "wait");
                if (record) ns.push_back(monotonic_ns() - posted[mb]);
                if (record && o_.trace) collect_trace(handles[mb]);
                verify(c, static_cast<size_t>(mb) * servers_, iteration - o_.microbatches + 1 + mb);
            }
        };
        for (int i = 0; i < std::max(1, o_.warmup / o_.layers); ++i)
            for (int l = 0; l < o_.layers; ++l) layer(false);
        for (Sampler s = sampler(1); s.more();)
            for (int l = 0; l < o_.layers; ++l) layer(true);
        row.afmesh = bench::summarize(ns);
        return row;
    }

    void collect_trace(afmesh_handle h) {
        std::vector<afmesh_trace> t(servers_);
        size_t n = 0;
        check(afmesh_trace_get(node_, h, t.data(), t.size(), &n), "trace");
        stages_.resize(servers_);
        for (size_t i = 0; i < n && i < t.size(); ++i) {
            auto &st = stages_[t[i].server];
            st[0].push_back(t[i].arrived - t[i].posted);       // request on the wire
            st[1].push_back(t[i].processed - t[i].arrived);    // waiting for get_batch (the AF barrier)
            st[2].push_back(t[i].responded - t[i].processed);  // server compute
            st[3].push_back(t[i].completed - t[i].responded);  // response on the wire
        }
    }

    Sampler sampler(int share) {
        return Sampler(o_, rank_ == 0, [this](int proposal) { return agree(proposal); }, share);
    }

    // Every worker sends its proposal to server 0, which answers all of them
    // with worker 0's once each has asked (see AgreementDesk).
    int agree(int proposal) {
        agreed_[0] = proposal;
        const int32_t server0 = 0;
        afmesh_push p{kAgreeKey, host_bytes(&agreed_[0], sizeof agreed_[0]), &server0, 1};
        afmesh_pull q{kAgreeKey, host_bytes(&agreed_[1], sizeof agreed_[1]), 0};
        afmesh_handle h;
        check(afmesh_push_pull(node_, &p, 1, &q, 1, &h), "agreement push_pull");
        check(afmesh_wait(node_, h, kTimeoutMs), "agreement wait");
        return static_cast<int>(agreed_[1]);
    }

    // Pushes one small control message (key and text) to every server and waits for the answer.
    void tell_servers(uint64_t key, std::string text) {
        text.resize(16, '\0');
        afmesh_push p{};
        p.key = key;
        p.tensor = host_bytes(text.data(), text.size());
        afmesh_handle h;
        check(afmesh_push_pull(node_, &p, 1, nullptr, 0, &h), "control push");
        check(afmesh_wait(node_, h, kTimeoutMs), "control wait");
    }

    void enter_phase(const std::string &poll, bool floor) {
        tell_servers(kPhaseKey, (floor ? "F" : "A") + poll);
        check(afmesh_set_poll_mode(node_, floor ? "blocking" : poll.c_str()), "set poll mode");
        floor_->set_mode(floor ? poll_mode(poll) : PollMode::kBlocking);
    }

    void stop_servers() { tell_servers(kStopKey, "stop"); }

    void print() {
        int32_t workers = 0;
        check(afmesh_node_info(node_, nullptr, nullptr, &workers, nullptr), "node info");
        const char *device = "?", *transport = "?";
        check(afmesh_node_modules(node_, &device, &transport), "node modules");
        printf("\nafmesh bench: %d worker(s) x %d server(s), transport %s, device %s, %s (+%d warm-up) per case\n",
               workers, servers_, transport, device,
               o_.seconds > 0 ? (std::to_string(o_.seconds) + " s").c_str() : (std::to_string(o_.iters) + " iterations").c_str(),
               o_.warmup);
        printf("latency per push-pull (us) as seen by worker 0; floor = the same exchange on the raw transport\n\n");
        printf("%-24s %-9s %9s %9s %9s %8s | %9s %9s | %7s %7s\n", "case", "poll", "p50", "p99", "max", "GB/s",
               "floor p50", "floor p99", "x p50", "x p99");
        for (const Row &r : rows_) {
            double gbps = r.afmesh.p50_us > 0 ? static_cast<double>(r.bytes_per_iter) / (r.afmesh.p50_us * 1e3) : 0;
            printf("%-24s %-9s %9.1f %9.1f %9.1f %8.2f | ", r.name.c_str(), r.poll.c_str(), r.afmesh.p50_us,
                   r.afmesh.p99_us, r.afmesh.max_us, gbps);
            if (r.has_floor)
                printf("%9.1f %9.1f | %7.2f %7.2f\n", r.floor.p50_us, r.floor.p99_us, r.afmesh.p50_us / r.floor.p50_us,
                       r.afmesh.p99_us / r.floor.p99_us);
            else
                printf("%9s %9s | %7s %7s\n", "-", "-", "-", "-");
        }
        if (o_.trace) print_trace();
        if (!o_.json.empty()) write_json();
        fflush(stdout);
    }

    void print_trace() {
        printf("\nwhere the AF pipeline's time goes, per server (p50 us over all polling modes):\n");
        printf("%-8s %12s %12s %12s %12s\n", "server", "request net", "batch wait", "compute", "response net");
        for (size_t s = 0; s < stages_.size(); ++s) {
            printf("%-8zu", s);
            for (auto &stage : stages_[s]) printf(" %12.1f", bench::summarize(stage).p50_us);
            printf("\n");
        }
    }

    void write_json() {
        FILE *f = fopen(o_.json.c_str(), "w");
        if (!f) die("cannot write " + o_.json);
        fprintf(f, "{\"servers\": %d, \"rows\": [\n", servers_);
        for (size_t i = 0; i < rows_.size(); ++i) {
            const Row &r = rows_[i];
            fprintf(f,
                    "  {\"case\": \"%s\", \"poll\": \"%s\", \"bytes_per_iteration\": %llu, \"p50_us\": %.3f, "
                    "\"p99_us\": %.3f, \"max_us\": %.3f, \"samples\": %zu",
                    r.name.c_str(), r.poll.c_str(), static_cast<unsigned long long>(r.bytes_per_iter), r.afmesh.p50_us,
                    r.afmesh.p99_us, r.afmesh.max_us, r.afmesh.samples);
            if (r.has_floor)
                fprintf(f, ", \"floor_p50_us\": %.3f, \"floor_p99_us\": %.3f", r.floor.p50_us, r.floor.p99_us);
            fprintf(f, "}%s\n", i + 1 < rows_.size() ? "," : "");
        }
        fprintf(f, "]}\n");
        fclose(f);
    }

    afmesh_node *node_;
    const Options &o_;
    int32_t rank_ = 0, servers_ = 0;
    std::vector<uint8_t> push_;
    std::vector<std::vector<uint8_t>> pulls_, mb_push_;
    std::unique_ptr<FloorEndpoint> floor_;
    std::vector<Row> rows_;
    std::vector<std::array<std::vector<uint64_t>, 4>> stages_;
    std::array<int64_t, 2> agreed_{};  // what agree() sends, and what it receives
};

// Server 0's side of WorkerBench::agree: holds each worker's request until
// every worker has asked (with --batch any they come one at a time), then
// answers them all with worker 0's proposal.
class AgreementDesk {
public:
    AgreementDesk(afmesh_node *node, int workers) : node_(node), workers_(workers) {
        afmesh_mr *mr = nullptr;
        check(afmesh_register_buffer(node_, &proposal_, sizeof proposal_, AFMESH_MEM_HOST, 0, &mr), "register");
    }

    void add(afmesh_request *request, const afmesh_tensor &pushed) {
        int32_t worker = -1;
        check(afmesh_request_info(request, &worker, nullptr, nullptr), "request info");
        if (worker == 0 && pushed.bytes >= sizeof proposal_) memcpy(&proposal_, pushed.data, sizeof proposal_);
        held_.push_back(request);
        if (static_cast<int>(held_.size()) < workers_) return;
        afmesh_tensor answer = host_bytes(&proposal_, sizeof proposal_);
        for (afmesh_request *r : held_) check(afmesh_respond(node_, r, &answer, 1), "respond");
        held_.clear();
    }

private:
    afmesh_node *node_;
    const int workers_;
    int64_t proposal_ = 0;
    std::vector<afmesh_request *> held_;
};

// Serves until every worker has sent its stop request.
void serve(afmesh_node *node, const Options &o) {
    int32_t rank = 0, workers = 0;
    check(afmesh_node_info(node, nullptr, &rank, &workers, nullptr), "node info");
    std::unique_ptr<FloorEndpoint> floor;
    FloorCard card;
    const uint64_t largest = std::max({o.push_bytes(), o.pull_bytes(), *std::max_element(o.sizes.begin(), o.sizes.end())});
    Status st = FloorEndpoint::create(Config::process(), PollMode::kBlocking, largest, &floor);
    if (st) st = floor->serve(o.batch == AFMESH_BATCH_ALL_WORKERS ? workers : 1, &card);
    if (!st) die(st.message());
    const std::vector<uint8_t> card_bytes = card.encode();
    std::vector<uint8_t> answer(largest);
    afmesh_mr *mr = nullptr;
    check(afmesh_register_buffer(node, answer.data(), answer.size(), AFMESH_MEM_HOST, 0, &mr), "register");
    const uint32_t stamp = static_cast<uint32_t>(rank + 1);
    std::vector<afmesh_request *> batch(workers);
    AgreementDesk agreements(node, workers);
    for (int stopped = 0; stopped < workers;) {
        size_t count = 0;
        check(afmesh_get_batch(node, o.batch, -1, batch.data(), batch.size(), &count), "get_batch");
        for (size_t r = 0; r < count; ++r) {
            size_t num_push = 0, num_pull = 0;
            check(afmesh_request_info(batch[r], nullptr, &num_push, &num_pull), "request info");
            uint64_t key = 0;
            afmesh_tensor in{}, slot{};
            if (num_push) check(afmesh_request_push(batch[r], 0, &key, &in), "request push");
            if (num_pull) check(afmesh_request_pull(batch[r], 0, num_push ? nullptr : &key, &slot), "request pull");
            if (key == kStopKey || key == kPhaseKey) {
                if (key == kPhaseKey) {
                    // "F<mode>": the floor is timed next; "A<mode>": afmesh is.
                    const std::string text(static_cast<const char *>(in.data), strnlen(static_cast<const char *>(in.data), in.bytes));
                    const bool floor_phase = text[0] == 'F';
                    const std::string mode = text.substr(1);
                    check(afmesh_set_poll_mode(node, floor_phase ? "blocking" : mode.c_str()), "set poll mode");
                    floor->set_mode(floor_phase ? poll_mode(mode) : PollMode::kBlocking);
                }
                stopped += key == kStopKey;
                check(afmesh_respond(node, batch[r], nullptr, 0), "respond");
                continue;
            }
            if (key == kAgreeKey) {
                agreements.add(batch[r], in);
                continue;
            }
            if (key == kSetupKey) {
                afmesh_tensor t = host_bytes(const_cast<uint8_t *>(card_bytes.data()), card_bytes.size());
                check(afmesh_respond(node, batch[r], &t, 1), "respond");
                continue;
            }
            // Stamp our rank into the answer. Answer from the receive slice
            // itself when it is big enough (zero copy), else from a copy.
            uint8_t *data = static_cast<uint8_t *>(in.data);
            if (slot.bytes > in.bytes) {
                memcpy(answer.data(), data, in.bytes);
                data = answer.data();
            }
            memcpy(data, &stamp, 4);
            afmesh_tensor out = host_bytes(data, slot.bytes);
            check(afmesh_respond(node, batch[r], &out, 1), "respond");
        }
    }
}

}  // namespace

int run_bench(Args args) {
    Options o;
    if (!bench::parse_options(static_cast<int>(args.size()), args.data(), &o)) return kExitUsage;
    afmesh_config config{};
    config.struct_size = sizeof config;
    afmesh_node *node = nullptr;
    if (afmesh_node_create(&config, &node) != AFMESH_OK) {
        fprintf(stderr, "afmesh bench: %s\n", afmesh_last_error());
        return kExitFailure;
    }
    afmesh_role role = AFMESH_ROLE_SCHEDULER;
    if (afmesh_node_info(node, &role, nullptr, nullptr, nullptr) != AFMESH_OK) role = AFMESH_ROLE_SCHEDULER;
    if (role == AFMESH_ROLE_WORKER) WorkerBench(node, o).run();
    if (role == AFMESH_ROLE_SERVER) serve(node, o);
    if (afmesh_node_destroy(node) != AFMESH_OK) {
        fprintf(stderr, "afmesh bench: %s\n", afmesh_last_error());
        return kExitFailure;
    }
    return kExitOk;
}

}  // namespace afmesh::tool
