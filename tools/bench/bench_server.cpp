// SPDX-License-Identifier: Apache-2.0
#include "bench_server.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "afmesh/afmesh.hpp"
#include "bench_check.h"
#include "bench_protocol.h"
#include "config.h"
#include "cost.h"
#include "floor.h"
#include "gather_desk.h"

namespace afmesh::bench {
namespace {

using api::host_bytes;

class BenchServer {
public:
    BenchServer(afmesh_node *node, const Options &o) : node_(node), o_(o) {
        check(afmesh_node_info(node, nullptr, &rank_, &workers_, nullptr), "node info");
        const uint64_t largest =
            std::max({o.push_bytes(), o.pull_bytes(), *std::max_element(o.sizes.begin(), o.sizes.end())});
        FloorCard card;
        Status st = FloorEndpoint::create(Config::process(), PollMode::kBlocking, largest, workers_,
                                          floor_lanes(largest, o.microbatches), &floor_);
        if (st) st = floor_->serve(o.batch == AFMESH_BATCH_ALL_WORKERS ? workers_ : 1, &card);
        if (!st) die(st.message());
        card_ = card.encode();
        answer_.resize(largest);
        record_.resize(CaseCost::kEncodedBytes);
        afmesh_mr *mr = nullptr;
        for (std::vector<uint8_t> *buffer : {&answer_, &record_})
            check(afmesh_register_buffer(node, buffer->data(), buffer->size(), AFMESH_MEM_HOST, 0, &mr), "register");
        meter_ = std::make_unique<CostMeter>(node, *floor_);
        agreements_ = std::make_unique<GatherDesk>(node, workers_, sizeof(int64_t));
        costs_ = std::make_unique<GatherDesk>(node, workers_, CaseCost::kEncodedBytes);
        idle_.assign(workers_, true);
    }

    void run() {
        std::vector<afmesh_request *> batch(workers_);
        for (int stopped = 0; stopped < workers_;) {
            size_t count = 0;
            check(afmesh_get_batch(node_, o_.batch, -1, batch.data(), batch.size(), &count), "get_batch");
            for (size_t r = 0; r < count; ++r) stopped += handle(batch[r]);
        }
    }

private:
    // Answers one request; true when it was a worker's stop.
    bool handle(afmesh_request *request) {
        size_t num_push = 0, num_pull = 0;
        check(afmesh_request_info(request, nullptr, &num_push, &num_pull), "request info");
        uint64_t key = 0;
        afmesh_tensor in{}, slot{};
        if (num_push) check(afmesh_request_push(request, 0, &key, &in), "request push");
        if (num_pull) check(afmesh_request_pull(request, 0, num_push ? nullptr : &key, &slot), "request pull");
        switch (key) {
        case kStopKey:
            respond(request, nullptr, 0);
            return true;
        case kPhaseKey:
            enter_phase(request, in);
            respond(request, nullptr, 0);
            return false;
        case kAgreeKey:
            agreements_->add(request, in);
            return false;
        case kGatherCostKey:
            costs_->add(request, in);
            return false;
        case kSetupKey:
            respond(request, card_.data(), card_.size());
            return false;
        case kServerCostKey:
            respond(request, record_.data(), record_.size());
            return false;
        default:
            answer(request, in, slot);
            return false;
        }
    }

    void respond(afmesh_request *request, const uint8_t *data, size_t bytes) {
        afmesh_tensor t = host_bytes(const_cast<uint8_t *>(data), bytes);
        check(afmesh_respond(node_, request, data ? &t : nullptr, data ? 1 : 0), "respond");
    }

    // Stamps our rank into the answer: from the receive slice itself when it
    // is big enough (zero copy), else from a copy.
    void answer(afmesh_request *request, const afmesh_tensor &in, const afmesh_tensor &slot) {
        const uint32_t stamp = static_cast<uint32_t>(rank_ + 1);
        uint8_t *data = static_cast<uint8_t *>(in.data);
        if (slot.bytes > in.bytes) {
            memcpy(answer_.data(), data, in.bytes);
            data = answer_.data();
        }
        memcpy(data, &stamp, 4);
        respond(request, data, slot.bytes);
    }

    // Every worker announces each phase; the first announcement of a timed
    // phase switches. A case ends when every worker has gone idle: until
    // then, one may still be running its last block (--batch any).
    void enter_phase(afmesh_request *request, const afmesh_tensor &in) {
        int32_t worker = 0;
        check(afmesh_request_info(request, &worker, nullptr, nullptr), "request info");
        const char *text = static_cast<const char *>(in.data);
        Phase phase = Phase::kIdle;
        std::string poll;
        if (!parse_phase_message(std::string(text, strnlen(text, in.bytes)), &phase, &poll)) die("bad phase message");
        if (worker < 0 || worker >= workers_) die("phase message from unknown worker " + std::to_string(worker));
        idle_[worker] = phase == Phase::kIdle;
        if (phase == Phase::kIdle && std::find(idle_.begin(), idle_.end(), false) != idle_.end()) return;
        set_phase_modes(node_, *floor_, phase, poll);
        const bool case_ends = phase == Phase::kIdle && meter_->phase() != Phase::kIdle;
        meter_->enter(phase);
        if (case_ends) {
            const std::vector<uint8_t> record = meter_->take().encode();
            std::copy(record.begin(), record.end(), record_.begin());
        }
    }

    afmesh_node *const node_;
    const Options &o_;
    int32_t rank_ = 0, workers_ = 0;
    std::unique_ptr<FloorEndpoint> floor_;
    std::vector<uint8_t> card_;    // how workers reach our floor
    std::vector<uint8_t> answer_;  // answers longer than what was pushed
    std::vector<uint8_t> record_;  // the cost of the case that ended last
    std::unique_ptr<CostMeter> meter_;
    std::unique_ptr<GatherDesk> agreements_, costs_;  // used on server 0, the one workers gather through
    std::vector<bool> idle_;  // per worker: whether its latest announcement was the idle phase
};

}  // namespace

void serve(afmesh_node *node, const Options &o) { BenchServer(node, o).run(); }

}  // namespace afmesh::bench
