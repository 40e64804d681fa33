// SPDX-License-Identifier: Apache-2.0
// The scheduler's bookkeeping of a failed node's replacement: the member
// table (failed -> alive again, what barriers and the stop then report) and
// the barrier numbering a replacement takes over.
#include <gtest/gtest.h>

#include <array>
#include <optional>
#include <string>

#include "control/barrier_tracker.h"
#include "control/member_table.h"

namespace afmesh::control {
namespace {

constexpr NodeId kWorker0{Role::kWorker, 0}, kWorker1{Role::kWorker, 1}, kServer0{Role::kServer, 0};

TEST(MemberTable, AReplacedNodeIsAliveAgainAndNoLongerBlamed) {
    MemberTable members(2, 1);
    EXPECT_EQ(members.first_failed(Role::kWorker), -1);
    EXPECT_FALSE(members.mark_replaced(kWorker1)) << "only a failed node can be replaced";
    ASSERT_TRUE(members.mark_failed(kWorker1, "connection closed"));
    EXPECT_EQ(members.first_failed(Role::kWorker), 1);
    EXPECT_NE(members.unavailable(BarrierGroup::kAll).find("worker 1 failed (connection closed)"), std::string::npos);
    EXPECT_EQ(members.unavailable(BarrierGroup::kServers), "") << "servers' barriers never needed worker 1";

    ASSERT_TRUE(members.mark_replaced(kWorker1));
    EXPECT_EQ(members.state(kWorker1), MemberState::kAlive);
    EXPECT_EQ(members.first_failed(Role::kWorker), -1);
    EXPECT_EQ(members.unavailable(BarrierGroup::kAll), "");
    EXPECT_FALSE(members.stopping());
    for (NodeId node : {kWorker0, kWorker1, kServer0}) ASSERT_TRUE(members.mark_stopped(node));
    EXPECT_TRUE(members.stopping());
    EXPECT_TRUE(members.settled());
    EXPECT_TRUE(members.outcome()) << "the failed incarnation was replaced: " << members.outcome().to_string();
}

TEST(MemberTable, TheEarliestLossIsNamedEvenAfterAnotherIsReplaced) {
    MemberTable members(3, 1);
    ASSERT_TRUE(members.mark_failed(kWorker1, "first"));
    ASSERT_TRUE(members.mark_stopped(kWorker0));
    ASSERT_TRUE(members.mark_replaced(kWorker1));
    EXPECT_EQ(members.unavailable(BarrierGroup::kWorkers), "worker 0 has stopped");
}

Status enter(BarrierTracker &barriers, NodeId node, uint64_t seq, const std::string &unavailable,
             std::optional<BarrierRelease> *released) {
    return barriers.arrive(node, BarrierGroup::kAll, seq, unavailable, released);
}

// While worker 1 was down, worker 0 entered two barriers and the server one,
// each failing at once. The replacement numbers on from 2; the server's
// barrier 2 can never complete and is failed at once; barrier 3 meets.
TEST(BarrierTracker, AReplacementNumbersOnAndALaggingMemberIsNotLeftWaiting) {
    BarrierTracker barriers(2, 1);
    std::optional<BarrierRelease> released;
    const std::string gone = "worker 1 failed (connection closed)";
    ASSERT_TRUE(enter(barriers, kWorker0, 1, gone, &released));
    ASSERT_TRUE(enter(barriers, kWorker0, 2, gone, &released));
    ASSERT_TRUE(enter(barriers, kServer0, 1, gone, &released));
    ASSERT_TRUE(released && released->status.code() == Code::kPeerFailed);

    const std::array<uint64_t, 3> numbers = barriers.adopt(kWorker1);
    EXPECT_EQ(numbers[static_cast<size_t>(BarrierGroup::kAll) - 1], 2u);
    EXPECT_EQ(numbers[static_cast<size_t>(BarrierGroup::kWorkers) - 1], 0u) << "no workers' barrier was entered";
    EXPECT_EQ(numbers[static_cast<size_t>(BarrierGroup::kServers) - 1], 0u) << "a worker is in no servers' barrier";

    ASSERT_TRUE(enter(barriers, kServer0, 2, "", &released));
    ASSERT_TRUE(released) << "the lagging server is released at once";
    EXPECT_EQ(released->status.code(), Code::kPeerFailed);
    EXPECT_NE(released->status.message().find("replaced"), std::string::npos) << released->status.message();

    for (NodeId node : {kWorker0, kWorker1}) {
        ASSERT_TRUE(enter(barriers, node, 3, "", &released));
        EXPECT_FALSE(released) << "barrier 3 waits for the server";
    }
    ASSERT_TRUE(enter(barriers, kServer0, 3, "", &released));
    ASSERT_TRUE(released);
    EXPECT_TRUE(released->status) << released->status.to_string();
    EXPECT_EQ(released->nodes.size(), 3u);
    EXPECT_FALSE(enter(barriers, kWorker1, 2, "", &released)) << "the replacement cannot go back to 2";
}

}  // namespace
}  // namespace afmesh::control
