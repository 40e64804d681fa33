// SPDX-License-Identifier: Apache-2.0
// The engine's progress and waiting (core/engine/progress.h) over the tcp
// module on loopback: whichever thread sleeps where (the NetRecv thread on
// the transport, a waiter on the transport while NetRecv is parked, more
// waiters on the condition variable), every arrival and every notify must
// reach the thread that waits for it, and progress must pass back to the
// NetRecv thread when the waiters leave. A lost wake-up shows as a wait
// that runs into its (generous) deadline.
#include <gtest/gtest.h>

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "engine/progress.h"
#include "module_params.h"
#include "transport_fixture.h"

namespace afmesh::test {
namespace {

constexpr int kRounds = 200;

Clock::time_point limit() { return Clock::now() + kPollLimit; }

pid_t this_thread_id() { return static_cast<pid_t>(syscall(SYS_gettid)); }

/** The scheduler state of one of our threads ('R' running, 'S' asleep, ...). */
char thread_state(pid_t tid) {
    std::ifstream stat("/proc/self/task/" + std::to_string(tid) + "/stat");
    std::string line;
    std::getline(stat, line);
    const size_t end_of_name = line.rfind(')');
    return end_of_name == std::string::npos || end_of_name + 2 >= line.size() ? '?' : line[end_of_name + 2];
}

/**
 * A thread that waits kRounds times on `progress`, round i until
 * `reached(i)`; destroyed early (a failed test), it gives up at once.
 */
class RoundWaiter {
public:
    RoundWaiter(Progress &progress, std::function<bool(int)> reached)
        : progress_(progress), thread_([this, reached = std::move(reached)] {
              tid.store(this_thread_id());
              for (int i = 1; i <= kRounds && !abandoned_.load(); ++i) {
                  waiting_for.store(i);
                  if (!progress_.wait_until([&] { return reached(i) || abandoned_.load(); }, limit()))
                      failed.store(true);
                  woken.store(i);
              }
          }) {}
    ~RoundWaiter() {
        abandoned_.store(true);
        progress_.notify_waiters();
        thread_.join();
    }

    std::atomic<int> waiting_for{0}, woken{0};
    std::atomic<pid_t> tid{0};
    std::atomic<bool> failed{false};

private:
    Progress &progress_;
    std::atomic<bool> abandoned_{false};
    std::thread thread_;  // last: starts once the members above exist
};

class ProgressTest : public ::testing::TestWithParam<PollMode> {
protected:
    void SetUp() override {
        ModuleRecord tcp;
        for (ModuleRecord &r : modules_of_kind(AFMESH_MODULE_TRANSPORT))
            if (r.name == "tcp") tcp = r;
        ASSERT_EQ(tcp.name, "tcp") << "the tcp module was not found";
        ASSERT_TRUE(NetEndpoint::open(tcp, &client_));
        ASSERT_TRUE(NetEndpoint::open(tcp, &server_));
        ASSERT_TRUE(server_->caps().flags & AFMESH_NET_CAP_WAIT_FD) << "tcp sleeps on a wait fd";
        ASSERT_TRUE(connect(*client_, *server_, &link_));
        // From here on only the Progress under test polls the server.
        progress_ = std::make_unique<Progress>(server_->module(), GetParam(), std::chrono::microseconds(50),
                                               [this](const afmesh_net_event *events, int count) {
                                                   for (int i = 0; i < count; ++i)
                                                       if (events[i].type == AFMESH_NET_EV_RECV) arrived();
                                               });
        ASSERT_TRUE(progress_->start({}));
    }

    void TearDown() override {
        if (progress_) progress_->stop();
    }

    void arrived() {
        {
            std::lock_guard lock(mu_);
            received_.fetch_add(1);
        }
        arrivals_.notify_all();
        progress_->notify_waiters();
    }

    /**
     * Plays `waiter`'s rounds: once it announces round i and (outside busy
     * mode) is asleep, so that what follows must wake it, wake(i) lets it go.
     */
    void play(RoundWaiter &waiter, const std::function<void(int)> &wake) {
        for (int i = 1; i <= kRounds && !waiter.failed.load(); ++i) {
            ASSERT_TRUE(poll_until(
                {client_.get()},
                [&] {
                    return waiter.waiting_for.load() == i &&
                           (GetParam() == PollMode::kBusy || thread_state(waiter.tid.load()) == 'S');
                },
                "the waiter to sleep"));
            wake(i);
            ASSERT_TRUE(poll_until(
                {client_.get()}, [&] { return waiter.woken.load() == i || waiter.failed.load(); }, "the waiter"));
        }
        EXPECT_FALSE(waiter.failed.load()) << "a wait ran into its deadline";
    }

    /** Sends one message to the server, polling the client until `done()`. */
    ::testing::AssertionResult send_until(const std::function<bool()> &done) {
        const uint32_t word = 7;
        const int rc = post_retrying({client_.get()},
                                     [&] { return ops().send(client_->ctx(), link_.client, &word, sizeof word, 0, 0); });
        if (rc != AFMESH_HAL_OK) return ::testing::AssertionFailure() << "send returned " << rc;
        return poll_until({client_.get()}, done, "the waiters");
    }

    const afmesh_net_ops &ops() const { return client_->ops(); }

    std::unique_ptr<NetEndpoint> client_, server_;
    Link link_;
    std::unique_ptr<Progress> progress_;
    std::mutex mu_;
    std::condition_variable arrivals_;
    std::atomic<int> received_{0};
};

TEST_P(ProgressTest, EachArrivalWakesItsWaiterAndNetRecvTakesOverAfter) {
    {
        RoundWaiter waiter(*progress_, [&](int i) { return received_.load() >= i; });
        play(waiter, [&](int) { ASSERT_TRUE(send_until([] { return true; })); });
        if (HasFailure()) return;
    }
    // Nobody waits now: the NetRecv thread must be polling again.
    ASSERT_TRUE(send_until([] { return true; }));
    std::unique_lock lock(mu_);
    EXPECT_TRUE(arrivals_.wait_until(lock, limit(), [&] { return received_.load() == kRounds + 1; }))
        << "the NetRecv thread did not dispatch an arrival after the waiter left";
}

TEST_P(ProgressTest, ANotifyFromAnotherThreadWakesTheWaiter) {
    std::atomic<int> ready{0};
    RoundWaiter waiter(*progress_, [&](int i) { return ready.load() >= i; });
    play(waiter, [&](int i) {
        ready.store(i);
        progress_->notify_waiters();  // no transport traffic at all
    });
}

TEST_P(ProgressTest, TwoWaitersEachGetTheirArrival) {
    // One of them sleeps on the transport, the other on the condition
    // variable, woken by whoever dispatches.
    std::atomic<int> done{0};
    std::atomic<bool> failed{false};
    auto wait_for = [&](int count) {
        return std::thread([&, count] {
            if (!progress_->wait_until([&] { return received_.load() >= count; }, limit())) failed.store(true);
            done.fetch_add(1);
        });
    };
    for (int round = 0; round < kRounds / 10 && !failed.load(); ++round) {
        const int base = received_.load();
        std::thread first = wait_for(base + 1), second = wait_for(base + 2);
        ASSERT_TRUE(send_until([] { return true; }));
        ASSERT_TRUE(send_until([&] { return done.load() == 2 * (round + 1) || failed.load(); }));
        first.join();
        second.join();
    }
    EXPECT_FALSE(failed.load()) << "a wait ran into its deadline";
}

INSTANTIATE_TEST_SUITE_P(Modes, ProgressTest,
                         ::testing::Values(PollMode::kBusy, PollMode::kAdaptive, PollMode::kBlocking),
                         [](const ::testing::TestParamInfo<PollMode> &info) {
                             switch (info.param) {
                             case PollMode::kBusy: return "busy";
                             case PollMode::kAdaptive: return "adaptive";
                             default: return "blocking";
                             }
                         });

}  // namespace
}  // namespace afmesh::test
