// SPDX-License-Identifier: Apache-2.0
// The worker's table of push-pulls in flight: how long a waited op's
// results stay readable, and which slot the next push-pull is built in.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "engine/inflight_table.h"

namespace afmesh {
namespace {

struct FakeOp {
    bool in_use = false;
    bool retired = false;
    uint32_t sequence = 0;
};

using Table = InflightTable<FakeOp>;

// Issues one op and waits it at once: the way a steady stream of push-pulls
// uses the table.
afmesh_handle issue_and_wait(Table &table) {
    table.next_to_build();
    const afmesh_handle h = table.take();
    table.retire(inflight::slot_of(h));
    return h;
}

bool readable(Table &table, afmesh_handle h) {
    FakeOp *op = nullptr;
    return table.find(h, &op, true).is_ok();
}

TEST(InflightTable, AWaitedOpsResultsStayReadableForTheNextKeptOnes) {
    Table table;
    const afmesh_handle first = issue_and_wait(table);
    FakeOp *op = nullptr;
    EXPECT_EQ(table.find(first, &op).code(), Code::kNotFound) << "a waited handle is not live";
    for (size_t i = 0; i < kResultsKept; ++i) {
        ASSERT_TRUE(readable(table, first)) << "after " << i << " newer push-pulls were waited";
        issue_and_wait(table);
    }
    ASSERT_TRUE(readable(table, first)) << "its slot is free now, but not built in yet";
    issue_and_wait(table);
    EXPECT_FALSE(readable(table, first)) << "its slot was reused once more than kResultsKept were waited";
}

TEST(InflightTable, ASteadyStreamCyclesThroughAFewSlotsOnly) {
    Table table;
    std::set<uint16_t> slots;
    for (size_t i = 0; i < 4 * kMaxOpsInFlight; ++i) slots.insert(inflight::slot_of(issue_and_wait(table)));
    // Slots built in warm memory: the kept results' and one more, not all of the table.
    EXPECT_EQ(slots.size(), kResultsKept + 1);
}

TEST(InflightTable, EverySlotCanBeInFlightAndKeptResultsGiveWayToNewOps) {
    Table table;
    std::vector<afmesh_handle> waited;
    for (size_t i = 0; i < kResultsKept; ++i) waited.push_back(issue_and_wait(table));
    std::set<uint16_t> live;
    while (!table.full()) {
        table.next_to_build();
        live.insert(inflight::slot_of(table.take()));
    }
    EXPECT_EQ(live.size(), kMaxOpsInFlight) << "every slot holds a live op, the kept results' too";
    for (afmesh_handle h : waited) EXPECT_FALSE(readable(table, h)) << "its slot went to a live op";
}

TEST(InflightTable, BuildingInASlotForgetsTheResultsKeptThere) {
    Table table;
    const afmesh_handle first = issue_and_wait(table);
    for (size_t i = 0; i < kResultsKept; ++i) issue_and_wait(table);
    ASSERT_EQ(table.next_free(), inflight::slot_of(first)) << "the oldest kept results give way first";
    ASSERT_TRUE(readable(table, first));
    // A build refused half-way leaves the slot free, but rewritten.
    table.next_to_build();
    EXPECT_FALSE(readable(table, first));
}

}  // namespace
}  // namespace afmesh
