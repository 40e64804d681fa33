#include "process_group.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace afmesh {
namespace {

using Clock = std::chrono::steady_clock;

int pidfd_open(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }

std::vector<char *> c_strings(std::vector<std::string> &strings) {
    std::vector<char *> out;
    for (std::string &s : strings) out.push_back(s.data());
    out.push_back(nullptr);
    return out;
}

int ms_until(Clock::time_point deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return left <= 0 ? 0 : static_cast<int>(std::min<long long>(left, 100));
}

std::string describe(const ChildExit &c) {
    if (c.signal) return c.name + " (pid " + std::to_string(c.pid) + ") was killed by signal " + std::to_string(c.signal);
    return c.name + " (pid " + std::to_string(c.pid) + ") exited with code " + std::to_string(c.code);
}

}  // namespace

ProcessGroup::~ProcessGroup() {
    terminate_running(std::chrono::milliseconds(2000));
    for (Child &c : children_) {
        if (c.pidfd >= 0) close(c.pidfd);
        if (c.out_fd >= 0) close(c.out_fd);
    }
}

Status ProcessGroup::spawn(const ChildSpec &spec, size_t *index) {
    int pipe_fds[2];
    if (pipe2(pipe_fds, O_CLOEXEC) != 0) return {Code::kError, std::string("pipe: ") + strerror(errno)};
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDERR_FILENO);
    std::vector<std::string> argv = spec.argv, env = spec.env;
    pid_t pid = -1;
    int rc = posix_spawn(&pid, spec.path.c_str(), &actions, nullptr, c_strings(argv).data(), c_strings(env).data());
    posix_spawn_file_actions_destroy(&actions);
    close(pipe_fds[1]);
    if (rc != 0) {
        close(pipe_fds[0]);
        return {Code::kError, "cannot start " + spec.path + ": " + strerror(rc)};
    }
    fcntl(pipe_fds[0], F_SETFL, O_NONBLOCK);
    Child child;
    child.info.name = spec.name;
    child.info.pid = pid;
    child.pidfd = pidfd_open(pid);
    child.out_fd = pipe_fds[0];
    std::lock_guard lock(mu_);
    children_.push_back(std::move(child));
    if (index) *index = children_.size() - 1;
    return Status::ok();
}

void ProcessGroup::drain(Child &child, bool final) {
    char buf[4096];
    for (;;) {
        ssize_t n = read(child.out_fd, buf, sizeof buf);
        if (n <= 0) break;
        child.partial_line.append(buf, static_cast<size_t>(n));
    }
    size_t start = 0;
    for (size_t nl; (nl = child.partial_line.find('\n', start)) != std::string::npos; start = nl + 1) {
        std::string line = child.partial_line.substr(start, nl - start + 1);
        child.info.output += line;
        if (relay_) printf("[%s] %s", child.info.name.c_str(), line.c_str());
    }
    child.partial_line.erase(0, start);
    if (final && !child.partial_line.empty()) {
        child.info.output += child.partial_line + "\n";
        if (relay_) printf("[%s] %s\n", child.info.name.c_str(), child.partial_line.c_str());
        child.partial_line.clear();
    }
    if (relay_) fflush(stdout);
}

void ProcessGroup::reap(Child &child) {
    int status = 0;
    if (!child.info.running || waitpid(child.info.pid, &status, WNOHANG) != child.info.pid) return;
    child.info.running = false;
    if (WIFEXITED(status)) child.info.code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) child.info.signal = WTERMSIG(status);
    drain(child, true);
}

void ProcessGroup::pump(int timeout_ms) {
    std::vector<pollfd> fds;
    {
        std::lock_guard lock(mu_);
        for (Child &c : children_) {
            if (!c.info.running) continue;
            fds.push_back({c.out_fd, POLLIN, 0});
            if (c.pidfd >= 0) fds.push_back({c.pidfd, POLLIN, 0});
        }
    }
    if (!fds.empty()) ::poll(fds.data(), fds.size(), timeout_ms);
    std::lock_guard lock(mu_);
    for (Child &c : children_) {
        if (!c.info.running) continue;
        drain(c, false);
        reap(c);
    }
}

Status ProcessGroup::first_failure() {
    std::lock_guard lock(mu_);
    for (const Child &c : children_)
        if (!c.info.running && (c.info.code != 0 || c.info.signal != 0)) return {Code::kError, describe(c.info)};
    return Status::ok();
}

Status ProcessGroup::wait_all(Clock::time_point deadline, bool stop_on_failure) {
    for (;;) {
        bool any_running = false;
        {
            std::lock_guard lock(mu_);
            for (const Child &c : children_) any_running |= c.info.running;
        }
        Status failure = first_failure();
        if (!any_running) return failure;
        if (stop_on_failure && !failure) {
            terminate_running(std::chrono::milliseconds(3000));
            return failure;
        }
        if (Clock::now() >= deadline) {
            terminate_running(std::chrono::milliseconds(1000));
            return {Code::kTimeout, "children still running at the deadline were killed"};
        }
        pump(ms_until(deadline));
    }
}

Status ProcessGroup::wait_one(size_t index, Clock::time_point deadline) {
    for (;;) {
        {
            std::lock_guard lock(mu_);
            const ChildExit &info = children_.at(index).info;
            if (!info.running)
                return info.code == 0 && info.signal == 0 ? Status::ok() : Status(Code::kError, describe(info));
        }
        if (Clock::now() >= deadline) return {Code::kTimeout, children_.at(index).info.name + " is still running"};
        pump(ms_until(deadline));
    }
}

void ProcessGroup::signal(size_t index, int sig) {
    std::lock_guard lock(mu_);
    Child &c = children_.at(index);
    if (c.info.running) kill(c.info.pid, sig);
}

void ProcessGroup::terminate_running(std::chrono::milliseconds grace) {
    {
        std::lock_guard lock(mu_);
        for (Child &c : children_)
            if (c.info.running) kill(c.info.pid, SIGTERM);
    }
    const auto deadline = Clock::now() + grace;
    for (;;) {
        bool any_running = false;
        {
            std::lock_guard lock(mu_);
            for (const Child &c : children_) any_running |= c.info.running;
        }
        if (!any_running) return;
        if (Clock::now() >= deadline) break;
        pump(ms_until(deadline));
    }
    std::lock_guard lock(mu_);
    for (Child &c : children_) {
        if (!c.info.running) continue;
        kill(c.info.pid, SIGKILL);
        int status = 0;
        waitpid(c.info.pid, &status, 0);
        c.info.running = false;
        c.info.signal = SIGKILL;
        drain(c, true);
    }
}

std::vector<ChildExit> ProcessGroup::children() {
    std::lock_guard lock(mu_);
    std::vector<ChildExit> out;
    for (const Child &c : children_) out.push_back(c.info);
    return out;
}

}  // namespace afmesh
