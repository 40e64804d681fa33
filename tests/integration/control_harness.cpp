// SPDX-License-Identifier: Apache-2.0
#include "control_harness.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>

#include "byte_codec.h"

namespace afmesh::testing {

using control::Clock;
using control::Frame;
using control::MessageType;

ControlOptions test_options(int32_t num_workers, int32_t num_servers) {
    ControlOptions options;
    options.num_workers = num_workers;
    options.num_servers = num_servers;
    options.connect_timeout = 20s;
    // Fast heartbeats keep PROGRESS reports fresh; a patient timeout keeps a
    // loaded CI machine (sanitizers, two cores) from declaring healthy nodes dead.
    options.heartbeat_interval = 50ms;
    options.heartbeat_timeout = 10s;
    return options;
}

std::unique_ptr<Scheduler> start_scheduler(const ControlOptions &options, const std::string &listen) {
    std::unique_ptr<Scheduler> scheduler;
    Status s = Scheduler::start(options, listen, &scheduler);
    EXPECT_TRUE(s) << s.to_string();
    return scheduler;
}

MembershipCallbacks MembershipLog::callbacks(std::string observer) {
    auto record = [this](Notice notice) {
        {
            std::lock_guard lock(mu_);
            notices_.push_back(std::move(notice));
        }
        cv_.notify_all();
    };
    return {[observer, record](Role role, int32_t rank, const std::string &reason) {
                record({observer, role, rank, reason});
            },
            [observer, record](const RosterEntry &entry) {
                record({observer, entry.role, entry.rank, "", true, entry.incarnation});
            }};
}

bool MembershipLog::wait_for_count(size_t count, milliseconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return notices_.size() >= count; });
}

std::vector<MembershipLog::Notice> MembershipLog::notices() const {
    std::lock_guard lock(mu_);
    return notices_;
}

std::vector<uint8_t> address_of(size_t index) {
    std::string text = "address-of-node-" + std::to_string(index);
    return {text.begin(), text.end()};
}

Joiner::~Joiner() {
    for (auto &node : nodes_) {
        if (node->thread.joinable()) node->thread.join();
    }
}

size_t Joiner::start(const NodeSpec &spec) {
    size_t index = nodes_.size();
    nodes_.push_back(std::make_unique<Node>());
    Node *node = nodes_.back().get();
    ControlOptions options = options_;
    if (spec.auth_token) options.auth_token = *spec.auth_token;
    if (spec.num_workers) options.num_workers = *spec.num_workers;
    Hello hello{spec.role, spec.requested_rank, "tcp", address_of(index), "cpu"};
    auto callback = log_ ? log_->callbacks(std::string(role_name(spec.role)) + " node " + std::to_string(index))
                         : MembershipCallbacks{};
    node->thread = std::thread([this, node, index, options, hello, callback] {
        node->status = ControlClient::connect(options, hello, callback, &node->client);
        {
            std::lock_guard lock(mu_);
            done_.push_back(index);
        }
        cv_.notify_all();
    });
    return index;
}

void Joiner::wait(size_t index) {
    Node &node = *nodes_.at(index);
    if (node.thread.joinable()) node.thread.join();
}

const Status &Joiner::status(size_t index) {
    wait(index);
    return nodes_[index]->status;
}

std::unique_ptr<ControlClient> Joiner::take(size_t index) {
    wait(index);
    return std::move(nodes_[index]->client);
}

std::optional<size_t> Joiner::next_done(milliseconds timeout) {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, timeout, [&] { return done_.size() > done_taken_; })) return std::nullopt;
    return done_[done_taken_++];
}

std::vector<std::unique_ptr<ControlClient>> join_cluster(const ControlOptions &options, MembershipLog *log) {
    Joiner joiner(options, log);
    for (int32_t i = 0; i < options.num_workers; ++i) joiner.start({Role::kWorker});
    for (int32_t i = 0; i < options.num_servers; ++i) joiner.start({Role::kServer});
    std::vector<std::unique_ptr<ControlClient>> clients;
    for (size_t i = 0; i < static_cast<size_t>(options.num_workers + options.num_servers); ++i) {
        EXPECT_TRUE(joiner.status(i)) << "node " << i << ": " << joiner.status(i).to_string();
        clients.push_back(joiner.take(i));
    }
    return clients;
}

std::vector<Status> barrier_all(const std::vector<std::unique_ptr<ControlClient>> &clients, milliseconds timeout) {
    return on_each(pointers(clients), [&](ControlClient &c) { return c.barrier(BarrierGroup::kAll, timeout); });
}

std::vector<Status> stop_all(const std::vector<std::unique_ptr<ControlClient>> &clients, milliseconds timeout) {
    return on_each(pointers(clients), [&](ControlClient &c) { return c.stop(timeout); });
}

std::unique_ptr<RunningCluster> start_cluster(ControlOptions options) {
    auto cluster = std::make_unique<RunningCluster>();
    cluster->scheduler = start_scheduler(options);
    if (!cluster->scheduler) return nullptr;
    options.scheduler = cluster->scheduler->address();
    cluster->options = options;
    cluster->clients = join_cluster(options, &cluster->log);
    if (pointers(cluster->clients).size() != cluster->clients.size()) return nullptr;  // join_cluster said why
    return cluster;
}

std::vector<Status> on_each(const std::vector<ControlClient *> &clients,
                            const std::function<Status(ControlClient &)> &fn) {
    std::vector<Status> results(clients.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < clients.size(); ++i) {
        threads.emplace_back([&, i] { results[i] = fn(*clients[i]); });
    }
    for (std::thread &t : threads) t.join();
    return results;
}

std::vector<ControlClient *> pointers(const std::vector<std::unique_ptr<ControlClient>> &clients) {
    std::vector<ControlClient *> out;
    for (const auto &c : clients) {
        if (c) out.push_back(c.get());
    }
    return out;
}

RawPeer::RawPeer(const std::string &scheduler) {
    Status s = control::connect_tcp(scheduler, Clock::now() + 5s, &fd_);
    EXPECT_TRUE(s) << s.to_string();
}

bool RawPeer::send_bytes(std::span<const uint8_t> bytes) {
    auto deadline = Clock::now() + 5s;
    size_t sent = 0;
    while (sent < bytes.size()) {
        ssize_t n = send(fd_.get(), bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
        if (n > 0) {
            sent += static_cast<size_t>(n);
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EINTR) return false;
        pollfd p{fd_.get(), POLLOUT, 0};
        if (poll(&p, 1, control::poll_timeout_ms(deadline)) <= 0) return false;
    }
    return true;
}

bool RawPeer::send_frame(MessageType type, std::span<const uint8_t> payload) {
    std::vector<uint8_t> frame;
    control::append_frame(type, payload, &frame);
    return send_bytes(frame);
}

void RawPeer::shutdown_write() { shutdown(fd_.get(), SHUT_WR); }

RawPeer::Event RawPeer::read(Frame *frame, milliseconds timeout) {
    auto deadline = Clock::now() + timeout;
    for (;;) {
        std::optional<Frame> next;
        Status s = reader_.next(&next);
        EXPECT_TRUE(s) << "the scheduler sent a bad frame: " << s.to_string();
        if (!s) return Event::kClosed;
        if (next) {
            *frame = std::move(*next);
            return Event::kFrame;
        }
        pollfd p{fd_.get(), POLLIN, 0};
        int rc = poll(&p, 1, control::poll_timeout_ms(deadline));
        if (rc == 0) return Event::kTimeout;
        if (rc < 0 && errno == EINTR) continue;
        if (rc < 0 || !reader_.fill(fd_.get())) return Event::kClosed;
    }
}

bool RawPeer::wait_closed(milliseconds timeout, std::optional<Status> *error) {
    auto deadline = Clock::now() + timeout;
    for (;;) {
        Frame frame;
        auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
        switch (read(&frame, std::max(left, 0ms))) {
        case Event::kClosed: return true;
        case Event::kTimeout: return false;
        case Event::kFrame:
            if (frame.type == MessageType::kError) {
                control::ErrorMsg m;
                EXPECT_TRUE(control::decode(frame.payload, &m));
                *error = m.status;
            }
            break;
        }
    }
}

std::vector<uint8_t> raw_header(uint32_t magic, uint16_t version, uint16_t type, uint32_t length) {
    std::vector<uint8_t> out;
    ByteWriter w(out);
    w.u32(magic);
    w.u16(version);
    w.u16(type);
    w.u32(length);
    return out;
}

std::vector<uint8_t> hello_payload(const ControlOptions &options, Role role, int32_t rank) {
    control::HelloMsg m;
    m.hello = {role, rank, "tcp", {1, 2, 3}, "cpu"};
    m.num_workers = options.num_workers;
    m.num_servers = options.num_servers;
    m.heartbeat_interval_ms = static_cast<uint32_t>(options.heartbeat_interval.count());
    m.heartbeat_timeout_ms = static_cast<uint32_t>(options.heartbeat_timeout.count());
    m.auth_token = options.auth_token;
    return control::encode(m);
}

}  // namespace afmesh::testing
