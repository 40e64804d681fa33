// SPDX-License-Identifier: Apache-2.0
// The worker's push-pulls in flight: a fixed table of slots, the handles
// that name them, and the free list that hands slots out again.
//
// A handle is `sequence << 16 | slot` (inflight::handle_of): the sequence
// grows with every push-pull issued, so the handle of an op whose slot has
// since been reused names nothing any more. Immediates and messages carry
// the sequence's low bits only, its generation (imm.h). Free slots are
// handed out first-in first-out, so a waited op's results stay readable
// (pull_bytes, trace) for a while before its slot is reused.
//
// The table holds the ops themselves (WorkerEngine::Op, worker.h); it
// manages three of their fields, which `Op` must have: `in_use` (issued and
// not yet waited), `retired` (waited, results still readable) and
// `sequence`. It has no lock of its own: its owner guards it (the worker's
// ctx.mu).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "afmesh/afmesh.h"
#include "imm.h"
#include "status.h"

namespace afmesh {

/** Slots of the table: push-pulls one worker may have in flight at once. */
constexpr size_t kMaxOpsInFlight = 4096;
/**
 * Waited push-pulls whose results stay readable, the most recent ones
 * (fewer when so many are in flight that no slot is free otherwise).
 */
constexpr size_t kResultsKept = 256;

namespace inflight {

inline uint16_t slot_of(afmesh_handle h) { return static_cast<uint16_t>(h & 0xffff); }
inline uint32_t sequence_of(afmesh_handle h) { return static_cast<uint32_t>(h >> 16); }
inline afmesh_handle handle_of(uint32_t sequence, uint16_t slot) {
    return (static_cast<afmesh_handle>(sequence) << 16) | slot;
}
/** What immediates and messages carry of a sequence (imm.h). */
inline uint16_t generation_of(uint32_t sequence) { return static_cast<uint16_t>(sequence & imm::kGenerationMask); }

}  // namespace inflight

template <typename Op>
class InflightTable {
public:
    InflightTable() : ops_(kMaxOpsInFlight) {
        for (size_t i = kMaxOpsInFlight; i > 0; --i) free_slots_.push_back(static_cast<uint16_t>(i - 1));
    }
    InflightTable(const InflightTable &) = delete;
    InflightTable &operator=(const InflightTable &) = delete;

    /** The op in `slot` (below kMaxOpsInFlight), live, retired or never used. */
    Op &operator[](size_t slot) { return ops_[slot]; }
    const Op &operator[](size_t slot) const { return ops_[slot]; }
    size_t size() const { return ops_.size(); }
    auto begin() { return ops_.begin(); }
    auto end() { return ops_.end(); }

    /** Whether every slot holds an op not yet waited. */
    bool full() const { return free_slots_.empty() && waited_count_ == 0; }
    /** The slot the next take() hands out (not full()): the latest freed, else the oldest waited. */
    uint16_t next_free() const { return free_slots_.empty() ? waited_[waited_first_] : free_slots_.back(); }
    /**
     * The op in next_free(), to be built before take(). Its retired results
     * are forgotten now: building overwrites them, and a build that is
     * refused half-way must not leave them readable under the old handle.
     */
    Op &next_to_build() {
        Op &op = ops_[next_free()];
        op.retired = false;
        return op;
    }
    /** Makes the op in next_free() live under a new sequence; returns its handle. */
    afmesh_handle take() {
        const uint16_t slot = next_free();
        if (free_slots_.empty())
            drop_oldest_waited();
        else
            free_slots_.pop_back();
        Op &op = ops_[slot];
        op.in_use = true;
        op.retired = false;
        op.sequence = next_sequence_++;
        return inflight::handle_of(op.sequence, slot);
    }
    /** Gives a waited op's slot back: its results stay readable until the slot is reused. */
    void retire(uint16_t slot) {
        Op &op = ops_[slot];
        op.in_use = false;
        op.retired = true;
        if (waited_count_ == kResultsKept) {
            free_slots_.push_back(waited_[waited_first_]);
            drop_oldest_waited();
        }
        waited_[(waited_first_ + waited_count_++) % kResultsKept] = slot;
    }
    /** The op of a handle not yet waited (or, with `retired_ok`, waited but not yet reused). */
    Status find(afmesh_handle handle, Op **op, bool retired_ok = false) {
        const uint16_t slot = inflight::slot_of(handle);
        if (slot >= kMaxOpsInFlight || !(ops_[slot].in_use || (retired_ok && ops_[slot].retired)) ||
            ops_[slot].sequence != inflight::sequence_of(handle))
            return {Code::kNotFound, "unknown handle " + std::to_string(handle) +
                                         (retired_ok ? " (never issued, or too old)"
                                                     : " (never issued, or already waited)")};
        *op = &ops_[slot];
        return Status::ok();
    }

private:
    void drop_oldest_waited() {
        waited_first_ = (waited_first_ + 1) % kResultsKept;
        --waited_count_;
    }

    std::vector<Op> ops_;
    std::vector<uint16_t> free_slots_;  // a stack: the top was freed last, its memory is warmest
    // Retired, results readable, the oldest at waited_first_: a ring, so
    // that retiring allocates nothing (a deque took and freed a block every
    // few hundred push-pulls).
    std::array<uint16_t, kResultsKept> waited_{};
    size_t waited_first_ = 0, waited_count_ = 0;
    uint32_t next_sequence_ = 1;
};

}  // namespace afmesh
