// SPDX-License-Identifier: Apache-2.0
#include "bench_worker.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "afmesh/afmesh.hpp"
#include "bench_check.h"
#include "bench_protocol.h"
#include "bench_report.h"
#include "config.h"
#include "cost.h"
#include "engine/clock.h"
#include "floor.h"
#include "latency_stats.h"
#include "sampler.h"

namespace afmesh::bench {
namespace {

using api::host_bytes;

// One measured exchange: `push` bytes to every server, `pull` bytes back from each.
struct Case {
    std::string name;
    CaseKind kind;
    uint64_t push, pull;
    uint64_t push_key, pull_key;  // kAfPipeline: one pair per micro-batch instead
};

// afmesh and the floor are timed in alternating blocks, so that both see
// the same machine: on a shared host the noise drifts over seconds, and one
// long run of each would compare two different machines.
constexpr int kBlocks = 8;

// Untimed iterations before `block` of a case: all of --warmup before the
// first, since the first thousand or so push-pulls after start-up are
// slower (1x1 fabric/shm, 8 B: one in six over 5 us, one in a hundred
// later), and an eighth before each later one, after the other side's.
int warmup_before(int block, int warmup) { return block == 0 ? warmup : (warmup + kBlocks - 1) / kBlocks; }

constexpr size_t kRecordBytes = CaseCost::kEncodedBytes;

// Per server, the samples of each stage of ServerStages, in its order (ns).
using StageSamples = std::vector<std::array<std::vector<uint64_t>, 4>>;

class WorkerBench {
public:
    WorkerBench(afmesh_node *node, const Options &o) : node_(node), o_(o) {
        check(afmesh_node_info(node, nullptr, &rank_, &workers_, &servers_), "node info");
    }

    void run() {
        std::vector<Case> cases;
        for (size_t i = 0; i < o_.sizes.size(); ++i)
            cases.push_back({human(o_.sizes[i]), CaseKind::kSize, o_.sizes[i], o_.sizes[i], 100 + i, 200 + i});
        cases.push_back({std::to_string(o_.tokens) + "x" + std::to_string(o_.hidden) + " " + o_.push_dtype.name,
                         CaseKind::kAfShape, o_.push_bytes(), o_.pull_bytes(), 300, 400});
        cases.push_back({"AF " + std::to_string(o_.microbatches) + " mb x " + std::to_string(o_.layers) + " layers",
                         CaseKind::kAfPipeline, o_.push_bytes(), o_.pull_bytes(), 1000, 2000});
        uint64_t largest = 0;
        for (const Case &c : cases) largest = std::max({largest, c.push, c.pull});
        prepare_buffers(largest);
        connect_floor(largest);
        meter_ = std::make_unique<CostMeter>(node_, *floor_);
        for (const std::string &poll : o_.polls)
            for (const Case &c : cases)
                rows_.push_back(c.kind == CaseKind::kAfPipeline ? measure_pipeline(c, poll) : measure(c, poll));
        stop_servers();
        if (rank_ == 0) report();
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
        mb_push_.assign(o_.microbatches, std::vector<uint8_t>(o_.push_bytes()));
        for (auto &p : mb_push_)
            for (uint64_t i = 0; i < p.size(); ++i) p[i] = pattern_byte(i);
        // Control traffic: the largest part gathered is a cost record.
        control_.resize(16);
        gather_out_.resize(kRecordBytes);
        gather_in_.resize(workers_ * kRecordBytes);
        server_costs_.resize(servers_ * kRecordBytes);
        afmesh_mr *mr = nullptr;
        auto enroll = [&](std::vector<uint8_t> &buffer) {
            check(afmesh_register_buffer(node_, buffer.data(), buffer.size(), AFMESH_MEM_HOST, 0, &mr), "register");
        };
        enroll(push_);
        for (auto &p : pulls_) enroll(p);
        for (auto &p : mb_push_) enroll(p);
        for (auto *control : {&control_, &gather_out_, &gather_in_, &server_costs_}) enroll(*control);
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
        Status st = FloorEndpoint::create(Config::process(), PollMode::kBlocking, largest, servers_,
                                          floor_lanes(largest, o_.microbatches), &floor_);
        if (st) st = floor_->connect(decoded, rank_, std::chrono::seconds(30));
        if (!st) die(st.message());
    }

    Row new_row(const Case &c, const std::string &poll) const {
        fprintf(stderr, "afmesh bench: worker %d: %s, %s polling\n", rank_, c.name.c_str(), poll.c_str());
        Row row;
        row.name = c.name;
        row.poll = poll;
        row.kind = c.kind;
        row.push_bytes = c.push;
        row.pull_bytes = c.pull;
        row.bytes_per_iteration = (c.push + c.pull) * static_cast<uint64_t>(servers_);
        return row;
    }

    // One push-pull the bench repeats: a push to every server, a pull from
    // each into pulls_[pull_base + server]. Prepared once (unless
    // --no-prepare), as an AF worker prepares each layer's exchange.
    struct Exchange {
        uint8_t *push;
        size_t pull_base;
        uint64_t push_key, pull_key;
        afmesh_prepared *prepared = nullptr;
    };

    Exchange exchange(const Case &c, uint8_t *push, size_t pull_base, uint64_t push_key, uint64_t pull_key) {
        Exchange e{push, pull_base, push_key, pull_key};
        if (!o_.prepare) return e;
        const afmesh_push p = describe(c, e);
        check(afmesh_prepare_push_pull(node_, &p, 1, pull_specs_.data(), pull_specs_.size(), &e.prepared),
              "prepare push_pull");
        return e;
    }

    void release(std::vector<Exchange> &exchanges) {
        for (Exchange &e : exchanges) check(afmesh_prepared_free(node_, e.prepared), "free prepared push_pull");
        exchanges.clear();
    }

    // The exchange's push; its pulls into pull_specs_ (reused: inside the
    // timed window, as the floor allocates nothing either).
    afmesh_push describe(const Case &c, const Exchange &e) {
        pull_specs_.clear();
        for (int s = 0; s < servers_; ++s)
            pull_specs_.push_back({e.pull_key, host_bytes(pulls_[e.pull_base + s].data(), c.pull), s});
        afmesh_push p{};
        p.key = e.push_key;
        p.tensor = host_bytes(e.push, c.push);
        return p;
    }

    afmesh_handle post(const Case &c, const Exchange &e) {
        afmesh_handle h;
        if (e.prepared) {
            check(afmesh_push_pull_start(node_, e.prepared, nullptr, &h), "push_pull start");
        } else {
            const afmesh_push p = describe(c, e);
            check(afmesh_push_pull(node_, &p, 1, pull_specs_.data(), pull_specs_.size(), &h), "push_pull");
        }
        meter_->count_push_pull();
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
        Row row = new_row(c, poll);
        row.has_floor = true;
        std::vector<uint64_t> ns;
        // Both primitives where messages can carry the case; the faster is the floor.
        std::vector<FloorPrimitive> primitives = {FloorPrimitive::kWrite};
        if (floor_->fits_messages(c.push, c.pull)) primitives.push_back(FloorPrimitive::kMessage);
        std::vector<std::vector<uint64_t>> floor_ns(primitives.size());
        std::vector<Exchange> exchanges = {exchange(c, push_.data(), 0, c.push_key, c.pull_key)};
        for (int block = 0; block < kBlocks; ++block) {
            const int warmup = warmup_before(block, o_.warmup);
            enter_phase(poll, Phase::kAfmesh);
            for (int i = 0; i < warmup; ++i) one(c, exchanges[0], 0, nullptr);
            for (Sampler s = sampler(kBlocks); s.more();) one(c, exchanges[0], static_cast<uint32_t>(s.done()), &ns);
            enter_phase(poll, Phase::kFloor);
            for (size_t p = 0; p < primitives.size(); ++p) {
                for (int i = 0; i < warmup; ++i) floor_once(c, primitives[p], nullptr);
                for (Sampler s = sampler(kBlocks); s.more();) floor_once(c, primitives[p], &floor_ns[p]);
            }
        }
        release(exchanges);
        row.cost = finish_case(poll);
        row.afmesh = summarize(ns);
        for (size_t p = 0; p < primitives.size(); ++p) {
            const Summary floor = summarize(floor_ns[p]);
            if (p > 0 && floor.p50_us >= row.floor.p50_us) continue;
            row.floor = floor;
            row.floor_primitive = floor_primitive_name(primitives[p]);
        }
        return row;
    }

    void one(const Case &c, const Exchange &e, uint32_t iteration, std::vector<uint64_t> *ns) {
        memcpy(push_.data() + 4, &iteration, 4);
        const uint64_t t0 = monotonic_ns();
        afmesh_handle h = post(c, e);
        check(afmesh_wait(node_, h, kTimeoutMs), "wait");
        const uint64_t t1 = monotonic_ns();
        verify(c, 0, iteration);
        if (ns) ns->push_back(t1 - t0);
    }

    void floor_once(const Case &c, FloorPrimitive primitive, std::vector<uint64_t> *ns) {
        uint64_t elapsed = 0;
        if (Status st = floor_->round_trip(primitive, c.push, c.pull, &elapsed); !st) die(st.message());
        meter_->count_push_pull();
        if (ns) ns->push_back(elapsed);
    }

    // L layers x M micro-batches in flight: the AF pipeline; latency per micro-batch.
    Row measure_pipeline(const Case &c, const std::string &poll) {
        Row row = new_row(c, poll);
        std::vector<uint64_t> ns;
        StageSamples stages(o_.trace ? servers_ : 0);
        std::vector<afmesh_handle> handles(o_.microbatches);
        std::vector<uint64_t> posted(o_.microbatches);
        std::vector<Exchange> exchanges;
        for (int mb = 0; mb < o_.microbatches; ++mb)
            exchanges.push_back(exchange(c, mb_push_[mb].data(), static_cast<size_t>(mb) * servers_, c.push_key + mb,
                                         c.pull_key + mb));
        uint32_t iteration = 0;
        auto layer = [&](bool record) {
            for (int mb = 0; mb < o_.microbatches; ++mb) {
                memcpy(mb_push_[mb].data() + 4, &++iteration, 4);
                posted[mb] = monotonic_ns();
                handles[mb] = post(c, exchanges[mb]);
            }
            for (int mb = 0; mb < o_.microbatches; ++mb) {
                check(afmesh_wait(node_, handles[mb], kTimeoutMs), "wait");
                if (record) ns.push_back(monotonic_ns() - posted[mb]);
                if (record && o_.trace) collect_trace(handles[mb], &stages);
                verify(c, static_cast<size_t>(mb) * servers_, iteration - o_.microbatches + 1 + mb);
            }
        };
        // The floor: the same layers on the raw transport, in alternating blocks as in measure().
        row.has_floor = floor_->pipelines();
        row.floor_primitive = floor_primitive_name(FloorPrimitive::kWrite);
        std::vector<uint64_t> floor_ns;
        auto floor_layer = [&](bool record) {
            if (Status st = floor_->pipeline_layer(c.push, c.pull, record ? &floor_ns : nullptr); !st)
                die(st.message());
            for (int mb = 0; mb < o_.microbatches; ++mb) meter_->count_push_pull();
        };
        const int blocks = row.has_floor ? kBlocks : 1;
        for (int block = 0; block < blocks; ++block) {
            const int warmup = std::max(1, warmup_before(block, o_.warmup) / o_.layers);  // in steps of all layers
            enter_phase(poll, Phase::kAfmesh);
            for (int i = 0; i < warmup; ++i)
                for (int l = 0; l < o_.layers; ++l) layer(false);
            for (Sampler s = sampler(blocks); s.more();)
                for (int l = 0; l < o_.layers; ++l) layer(true);
            if (!row.has_floor) continue;
            enter_phase(poll, Phase::kFloor);
            for (int i = 0; i < warmup; ++i)
                for (int l = 0; l < o_.layers; ++l) floor_layer(false);
            for (Sampler s = sampler(blocks); s.more();)
                for (int l = 0; l < o_.layers; ++l) floor_layer(true);
        }
        release(exchanges);
        row.cost = finish_case(poll);
        row.afmesh = summarize(ns);
        if (row.has_floor) row.floor = summarize(floor_ns);
        for (auto &server : stages) {
            ServerStages st;
            double *out[] = {&st.request_net_us, &st.batch_wait_us, &st.compute_us, &st.response_net_us};
            for (size_t i = 0; i < server.size(); ++i) *out[i] = summarize(server[i]).p50_us;
            row.stages.push_back(st);
        }
        return row;
    }

    void collect_trace(afmesh_handle h, StageSamples *stages) {
        std::vector<afmesh_trace> t(servers_);
        size_t n = 0;
        check(afmesh_trace_get(node_, h, t.data(), t.size(), &n), "trace");
        for (size_t i = 0; i < n && i < t.size(); ++i) {
            auto &st = (*stages)[t[i].server];
            st[0].push_back(t[i].arrived - t[i].posted);
            st[1].push_back(t[i].processed - t[i].arrived);
            st[2].push_back(t[i].responded - t[i].processed);
            st[3].push_back(t[i].completed - t[i].responded);
        }
    }

    Sampler sampler(int share) {
        return Sampler(o_, rank_ == 0, [this](int proposal) { return agree(proposal); }, share);
    }

    // Pushes `bytes` of `part` to server 0 under `key`; returns every worker's
    // part, in rank order, once all have pushed theirs (see GatherDesk).
    const uint8_t *gather(uint64_t key, const void *part, size_t bytes) {
        memcpy(gather_out_.data(), part, bytes);
        const int32_t server0 = 0;
        const uint64_t expected = bytes * static_cast<uint64_t>(workers_);
        afmesh_push p{key, host_bytes(gather_out_.data(), bytes), &server0, 1};
        afmesh_pull q{key, host_bytes(gather_in_.data(), expected), 0};
        afmesh_handle h;
        check(afmesh_push_pull(node_, &p, 1, &q, 1, &h), "gather push_pull");
        check(afmesh_wait(node_, h, kTimeoutMs), "gather wait");
        uint64_t n = 0;
        check(afmesh_pull_bytes(node_, h, 0, &n), "gather length");
        if (n != expected) die("server 0 gathered " + std::to_string(n) + " bytes, not " + std::to_string(expected));
        return gather_in_.data();
    }

    // Every worker proposes; all learn worker 0's proposal.
    int agree(int proposal) {
        const int64_t mine = proposal;
        int64_t decided = 0;
        memcpy(&decided, gather(kAgreeKey, &mine, sizeof mine), sizeof decided);
        return static_cast<int>(decided);
    }

    // Ends a case: every process leaves its timed phases, and worker 0 learns
    // what the whole cluster spent in them. Each worker pushes its own record
    // to server 0, which hands all of them to every worker once all have
    // arrived (so every worker has gone idle, and with it every server); then
    // each worker pulls every server's record.
    CaseCost finish_case(const std::string &poll) {
        enter_phase(poll, Phase::kIdle);
        const std::vector<uint8_t> mine = meter_->take().encode();
        const uint8_t *workers = gather(kGatherCostKey, mine.data(), mine.size());
        std::vector<afmesh_pull> pulls;
        for (int s = 0; s < servers_; ++s)
            pulls.push_back({kServerCostKey, host_bytes(server_costs_.data() + s * kRecordBytes, kRecordBytes), s});
        afmesh_handle h;
        check(afmesh_push_pull(node_, nullptr, 0, pulls.data(), pulls.size(), &h), "cost push_pull");
        check(afmesh_wait(node_, h, kTimeoutMs), "cost wait");
        CaseCost total;
        add_records(workers, workers_, &total);
        add_records(server_costs_.data(), servers_, &total);
        return total;
    }

    static void add_records(const uint8_t *records, int count, CaseCost *total) {
        for (int i = 0; i < count; ++i) {
            CaseCost one;
            if (!CaseCost::decode(records + i * kRecordBytes, kRecordBytes, &one)) die("bad cost record");
            *total += one;
        }
    }

    // Pushes one small control message (key and text) to every server and waits for the answer.
    void tell_servers(uint64_t key, const std::string &text) {
        if (text.size() > control_.size()) die("control message too long: " + text);
        std::fill(control_.begin(), control_.end(), 0);
        std::copy(text.begin(), text.end(), control_.begin());
        afmesh_push p{};
        p.key = key;
        p.tensor = host_bytes(control_.data(), control_.size());
        afmesh_handle h;
        check(afmesh_push_pull(node_, &p, 1, nullptr, 0, &h), "control push");
        check(afmesh_wait(node_, h, kTimeoutMs), "control wait");
    }

    void enter_phase(const std::string &poll, Phase phase) {
        meter_->enter(Phase::kIdle);  // the switch itself is control traffic
        tell_servers(kPhaseKey, phase_message(phase, poll));
        set_phase_modes(node_, *floor_, phase, poll);
        meter_->enter(phase);
    }

    void stop_servers() { tell_servers(kStopKey, "stop"); }

    void report() {
        RunInfo info;
        info.afmesh_version = afmesh_version();
        const char *device = "?", *transport = "?";
        check(afmesh_node_modules(node_, &device, &transport), "node modules");
        info.device = device;
        info.transport = transport;
        if (info.transport == "fabric") info.provider = Config::process().get("AFMESH_FABRIC_PROVIDER");
        info.workers = workers_;
        info.servers = servers_;
        print_tables(info, o_, rows_);
        write_report_files(info, o_, rows_);
    }

    afmesh_node *node_;
    const Options &o_;
    int32_t rank_ = 0, workers_ = 0, servers_ = 0;
    std::vector<uint8_t> push_;
    std::vector<std::vector<uint8_t>> pulls_, mb_push_;
    std::vector<afmesh_pull> pull_specs_;  // post()'s, one per server
    // Control traffic's buffers, registered once: tell_servers()'s message,
    // what gather() pushes and receives, and the servers' cost records.
    std::vector<uint8_t> control_, gather_out_, gather_in_, server_costs_;
    std::unique_ptr<FloorEndpoint> floor_;
    std::unique_ptr<CostMeter> meter_;
    std::vector<Row> rows_;
};

}  // namespace

void run_worker(afmesh_node *node, const Options &o) { WorkerBench(node, o).run(); }

}  // namespace afmesh::bench
