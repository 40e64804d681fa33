// SPDX-License-Identifier: Apache-2.0
// The log line's format, the level threshold, and the embedding program's
// handler (afmesh_set_log_handler), swapped while other threads log.
#include <gtest/gtest.h>
#include <unistd.h>

#include <afmesh/afmesh.h>

#include <atomic>
#include <ctime>
#include <latch>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "log.h"

namespace afmesh {
namespace {

struct Received {
    int level;
    std::string line;
};

void collect(int level, const char *line, void *user) {
    static_cast<std::vector<Received> *>(user)->push_back({level, line});
}

// Microseconds since the epoch, as the log line's timestamp truncates them.
int64_t now_us() {
    timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return int64_t{now.tv_sec} * 1000000 + now.tv_nsec / 1000;
}

// The line with its timestamp and the space after it cut off.
std::string without_timestamp(const std::string &line) {
    const size_t at = line.find(" afmesh[");
    return at == std::string::npos ? line : line.substr(at + 1);
}

std::string pid_tag() { return "afmesh[" + std::to_string(getpid()) + "]"; }

// Every test starts at the warn threshold with no identity and a collecting
// handler, and leaves the process-wide log state as it found it.
class LogTest : public ::testing::Test {
protected:
    void SetUp() override {
        saved_level_ = log_level();
        set_log_level(AFMESH_LOG_WARN);
        set_log_identity(nullptr, -1);
        ASSERT_EQ(afmesh_set_log_handler(collect, &received_), AFMESH_OK);
    }

    void TearDown() override {
        afmesh_set_log_handler(nullptr, nullptr);
        set_log_identity(nullptr, -1);
        set_log_level(saved_level_);
    }

    std::vector<Received> received_;

private:
    afmesh_log_level saved_level_ = AFMESH_LOG_WARN;
};

TEST_F(LogTest, HandlerGetsTheWholeLineWithTimestampIdentityAndLevel) {
    set_log_identity("worker", 3);
    const int64_t before = now_us();
    log(AFMESH_LOG_WARN, "test", "hello %d", 42);
    const int64_t after = now_us();

    ASSERT_EQ(received_.size(), 1u);
    EXPECT_EQ(received_[0].level, AFMESH_LOG_WARN);
    const std::string &line = received_[0].line;
    std::smatch m;
    const std::regex format(R"(^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{6})Z afmesh\[(\d+)\] (.*)$)");
    ASSERT_TRUE(std::regex_match(line, m, format)) << line;
    EXPECT_EQ(m[8].str(), std::to_string(getpid()));
    EXPECT_EQ(m[9].str(), "worker 3 warn test: hello 42") << "no newline, identity, level, source, message";

    tm utc{};
    utc.tm_year = std::stoi(m[1].str()) - 1900;
    utc.tm_mon = std::stoi(m[2].str()) - 1;
    utc.tm_mday = std::stoi(m[3].str());
    utc.tm_hour = std::stoi(m[4].str());
    utc.tm_min = std::stoi(m[5].str());
    utc.tm_sec = std::stoi(m[6].str());
    const int64_t stamp = int64_t{timegm(&utc)} * 1000000 + std::stoi(m[7].str());
    EXPECT_LE(before, stamp) << line;
    EXPECT_LE(stamp, after) << line;
}

TEST_F(LogTest, IdentityIsRoleAndRankRoleAloneOrNothing) {
    log(AFMESH_LOG_ERROR, "test", "before any identity");
    set_log_identity("scheduler", -1);
    log(AFMESH_LOG_ERROR, "test", "no rank");
    set_log_identity("server", 1);
    log(AFMESH_LOG_ERROR, nullptr, "from a module without a name");

    ASSERT_EQ(received_.size(), 3u);
    EXPECT_EQ(without_timestamp(received_[0].line), pid_tag() + " error test: before any identity");
    EXPECT_EQ(without_timestamp(received_[1].line), pid_tag() + " scheduler error test: no rank");
    EXPECT_EQ(without_timestamp(received_[2].line), pid_tag() + " server 1 error module: from a module without a name");
    EXPECT_EQ(received_[0].level, AFMESH_LOG_ERROR);
}

int g_evaluated = 0;
int evaluate() { return ++g_evaluated; }

TEST_F(LogTest, LinesAboveTheLevelAreNeitherFormattedNorDelivered) {
    int formatted = -1;
    log(AFMESH_LOG_INFO, "test", "info%n", &formatted);  // %n would store 4 if the line were formatted
    AFMESH_LOG(AFMESH_LOG_DEBUG, "debug %d", evaluate());
    EXPECT_EQ(formatted, -1);
    EXPECT_EQ(g_evaluated, 0) << "the macro evaluates no argument above the level";
    EXPECT_TRUE(received_.empty());

    set_log_level(AFMESH_LOG_DEBUG);
    AFMESH_LOG(AFMESH_LOG_DEBUG, "debug %d", evaluate());
    ASSERT_EQ(received_.size(), 1u);
    EXPECT_EQ(received_[0].level, AFMESH_LOG_DEBUG);
    EXPECT_EQ(without_timestamp(received_[0].line), pid_tag() + " debug core: debug 1");
}

// Points fd 2 at a pipe for its lifetime; text() reads what was written.
class StderrCapture {
public:
    StderrCapture() {
        if (pipe(fds_) != 0) ADD_FAILURE() << "pipe";
        saved_ = dup(STDERR_FILENO);
        dup2(fds_[1], STDERR_FILENO);
    }
    ~StderrCapture() { restore(); }

    // Restores fd 2 and returns everything written meanwhile (one line fits in the pipe).
    std::string text() {
        restore();
        std::string out;
        char buf[4096];
        for (ssize_t n; (n = read(fds_[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
        close(fds_[0]);
        fds_[0] = -1;
        return out;
    }

private:
    void restore() {
        if (saved_ < 0) return;
        dup2(saved_, STDERR_FILENO);
        close(saved_);
        close(fds_[1]);  // with fd 2 restored, the read end sees end of file
        saved_ = -1;
    }

    int fds_[2] = {-1, -1};
    int saved_ = -1;
};

TEST_F(LogTest, NullHandlerRestoresStderr) {
    set_log_identity("worker", 0);
    ASSERT_EQ(afmesh_set_log_handler(nullptr, nullptr), AFMESH_OK);
    StderrCapture capture;
    log(AFMESH_LOG_WARN, "test", "to stderr");
    const std::string text = capture.text();

    EXPECT_TRUE(received_.empty());
    EXPECT_EQ(without_timestamp(text), pid_tag() + " worker 0 warn test: to stderr\n");
}

// ---- handler swaps while other threads log ----

// One installed handler's user data. `parity` is written before the sink is
// installed and read by whichever thread logs: under tsan, a pair published
// without release/acquire, or a handler seen with another's user pointer,
// shows up here.
struct Sink {
    int parity;
    std::atomic<long> lines{0};
};

std::atomic<long> g_torn{0};       // a handler called with the other handler's user pointer
std::atomic<long> g_malformed{0};  // a line not of the expected shape

template <int Parity>
void count_into_sink(int level, const char *line, void *user) {
    auto *sink = static_cast<Sink *>(user);
    if (sink->parity != Parity) g_torn.fetch_add(1, std::memory_order_relaxed);
    const std::string text = without_timestamp(line);
    if (level != AFMESH_LOG_WARN || text.find("] worker ") == std::string::npos ||
        text.find(" warn test: line from ") == std::string::npos)
        g_malformed.fetch_add(1, std::memory_order_relaxed);
    sink->lines.fetch_add(1, std::memory_order_relaxed);
}

TEST_F(LogTest, ConcurrentLinesWhileTheHandlerAndIdentityAreSwapped) {
    constexpr int kLoggers = 4;
    constexpr int kSwaps = 1000;
    std::vector<std::unique_ptr<Sink>> sinks;
    auto install = [&](int i) {
        sinks.push_back(std::make_unique<Sink>());
        sinks.back()->parity = i % 2;
        set_log_identity("worker", i);
        ASSERT_EQ(afmesh_set_log_handler(i % 2 ? count_into_sink<1> : count_into_sink<0>, sinks.back().get()),
                  AFMESH_OK);
    };
    install(0);

    std::latch start(kLoggers + 1);
    std::atomic<bool> swaps_done{false};
    std::atomic<long> sent{0};
    std::vector<std::thread> loggers;
    for (int t = 0; t < kLoggers; ++t) {
        loggers.emplace_back([&, t] {
            start.arrive_and_wait();
            // Log until the swaps are over, so the two overlap however threads are scheduled.
            do {
                log(AFMESH_LOG_WARN, "test", "line from %d", t);
                sent.fetch_add(1, std::memory_order_relaxed);
            } while (!swaps_done.load(std::memory_order_relaxed));
        });
    }
    start.arrive_and_wait();
    for (int i = 1; i <= kSwaps; ++i) install(i);
    swaps_done.store(true, std::memory_order_relaxed);
    for (std::thread &t : loggers) t.join();

    long delivered = 0;
    for (const auto &sink : sinks) delivered += sink->lines.load();
    EXPECT_EQ(delivered, sent.load()) << "every line reaches exactly one handler";
    EXPECT_EQ(g_torn.load(), 0);
    EXPECT_EQ(g_malformed.load(), 0);
}

}  // namespace
}  // namespace afmesh
