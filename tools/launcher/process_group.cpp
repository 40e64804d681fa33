// SPDX-License-Identifier: Apache-2.0
#include "process_group.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
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


// Everything the child needs between fork and exec, prepared before the
// fork: the child of a multi-threaded parent may make async-signal-safe
// calls only (another thread may have held the allocator's lock at the fork).
struct ExecPlan {
    const char *path;
    char *const *argv;
    char *const *envp;
    int output_fd;  // becomes the child's stdout and stderr
    int report_fd;  // close-on-exec; carries errno when the child cannot exec
    pid_t parent;   // the spawning process, recorded before the fork
};

[[noreturn]] void child_failed(int report_fd) {
    const int err = errno;
    if (write(report_fd, &err, sizeof err) < 0) {
        // Nobody to tell: the parent then sees the child exit with 127.
    }
    _exit(127);
}

// Makes `fd` the child's descriptor `target`, open across exec.
bool install_fd(int fd, int target) {
    if (fd == target) return fcntl(fd, F_SETFD, 0) == 0;  // dup2 would keep its close-on-exec flag
    return dup2(fd, target) == target;
}

[[noreturn]] void exec_child(const ExecPlan &plan) {
    // Die with the thread that forked us, even when it is SIGKILLed and can
    // stop no one. Had it died before this call, we were reparented already:
    // getppid() no longer names it, and nobody would ever stop us.
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) child_failed(plan.report_fd);
    if (getppid() != plan.parent) _exit(127);
    // A process group of our own: a terminal's Ctrl-C (sent to the foreground
    // group) reaches the parent only, which forwards it to every child.
    if (setpgid(0, 0) != 0) child_failed(plan.report_fd);
    // The parent stops us with these signals: none may stay blocked or
    // ignored as the parent had them.
    sigset_t none;
    sigemptyset(&none);
    if (sigprocmask(SIG_SETMASK, &none, nullptr) != 0) child_failed(plan.report_fd);
    struct sigaction by_default = {};
    by_default.sa_handler = SIG_DFL;
    for (int sig : kStopSignals)
        if (sigaction(sig, &by_default, nullptr) != 0) child_failed(plan.report_fd);
    const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null_fd < 0 || !install_fd(null_fd, STDIN_FILENO) || !install_fd(plan.output_fd, STDOUT_FILENO) ||
        !install_fd(plan.output_fd, STDERR_FILENO))
        child_failed(plan.report_fd);
    execve(plan.path, plan.argv, plan.envp);
    child_failed(plan.report_fd);
}

// The errno with which a child could not exec, or 0 once it has: its report
// pipe then closes without a word.
int exec_error(int report_fd) {
    int err = 0;
    ssize_t n;
    while ((n = read(report_fd, &err, sizeof err)) < 0 && errno == EINTR) {
    }
    return n == static_cast<ssize_t>(sizeof err) ? err : 0;
}

// Forks a child that runs `plan`, and waits until it has exec'd. Returns its
// pid, or -1 with errno set (a child that could not exec is reaped).
pid_t fork_exec(ExecPlan plan) {
    int report[2];
    if (pipe2(report, O_CLOEXEC) != 0) return -1;
    plan.report_fd = report[1];
    const pid_t pid = fork();
    if (pid == 0) exec_child(plan);
    const int fork_errno = errno;
    close(report[1]);
    const int err = pid < 0 ? fork_errno : exec_error(report[0]);
    close(report[0]);
    if (pid > 0 && err != 0) waitpid(pid, nullptr, 0);
    errno = err;
    return err == 0 ? pid : -1;
}

}  // namespace

std::string describe(const ChildExit &c) {
    const std::string pid = " (pid " + std::to_string(c.pid) + ")";
    if (c.signal) return c.name + " was killed by " + signal_name(c.signal) + pid;
    return c.name + " exited with status " + std::to_string(c.code) + pid;
}

std::string signal_name(int sig) {
    const char *abbrev = sigabbrev_np(sig);
    return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

ProcessGroup::~ProcessGroup() {
    stop(SIGTERM, std::chrono::milliseconds(2000));
    for (Child &c : children_) {
        if (c.pidfd >= 0) close(c.pidfd);
        if (c.out_fd >= 0) close(c.out_fd);
    }
}

Status ProcessGroup::spawn(const ChildSpec &spec, size_t *index) {
    int pipe_fds[2];
    if (pipe2(pipe_fds, O_CLOEXEC) != 0) return {Code::kError, std::string("pipe: ") + strerror(errno)};
    std::vector<std::string> argv = spec.argv, env = spec.env;
    std::vector<char *> argv_c = c_strings(argv), env_c = c_strings(env);
    const pid_t pid = fork_exec({spec.path.c_str(), argv_c.data(), env_c.data(), pipe_fds[1], -1, getpid()});
    const int err = errno;
    close(pipe_fds[1]);
    if (pid < 0) {
        close(pipe_fds[0]);
        return {Code::kError, "cannot start " + spec.path + ": " + strerror(err)};
    }
    fcntl(pipe_fds[0], F_SETFL, O_NONBLOCK);
    Child child;
    child.spec = spec;
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

bool ProcessGroup::pump(int timeout_ms, int interrupt_fd) {
    std::vector<pollfd> fds;
    if (interrupt_fd >= 0) fds.push_back({interrupt_fd, POLLIN, 0});
    {
        std::lock_guard lock(mu_);
        for (Child &c : children_) {
            if (!c.info.running) continue;
            fds.push_back({c.out_fd, POLLIN, 0});
            if (c.pidfd >= 0) fds.push_back({c.pidfd, POLLIN, 0});
        }
    }
    bool interrupted = false;
    if (!fds.empty() && ::poll(fds.data(), fds.size(), timeout_ms) > 0)
        interrupted = interrupt_fd >= 0 && fds[0].revents != 0;
    std::lock_guard lock(mu_);
    for (Child &c : children_) {
        if (!c.info.running) continue;
        drain(c, false);
        reap(c);
    }
    return interrupted;
}

bool ProcessGroup::any_running() {
    std::lock_guard lock(mu_);
    for (const Child &c : children_)
        if (c.info.running) return true;
    return false;
}

namespace {
bool failed(const ChildExit &info) { return !info.running && (info.code != 0 || info.signal != 0); }
}  // namespace

Status ProcessGroup::first_failure() {
    std::lock_guard lock(mu_);
    for (const Child &c : children_)
        if (failed(c.info) && !c.forgiven) return {Code::kError, describe(c.info)};
    return Status::ok();
}

std::vector<size_t> ProcessGroup::take_unoffered_failures() {
    std::lock_guard lock(mu_);
    std::vector<size_t> out;
    for (size_t i = 0; i < children_.size(); ++i) {
        if (!failed(children_[i].info) || children_[i].offered) continue;
        children_[i].offered = true;
        out.push_back(i);
    }
    return out;
}

Status ProcessGroup::respawn(size_t index, size_t *new_index) {
    ChildSpec spec;
    {
        std::lock_guard lock(mu_);
        spec = children_.at(index).spec;
    }
    return spawn(spec, new_index);
}

Status ProcessGroup::wait_all(Clock::time_point deadline, bool stop_on_failure, int interrupt_fd,
                              const FailureHandler &on_failure) {
    for (;;) {
        if (on_failure) {
            for (size_t index : take_unoffered_failures()) {
                const bool dealt_with = on_failure(index, children().at(index));
                std::lock_guard lock(mu_);
                children_[index].forgiven = dealt_with;
            }
        }
        const bool running = any_running();
        Status failure = first_failure();
        if (!running) return failure;
        if (stop_on_failure && !failure) {
            stop(SIGTERM, kStopGrace);
            return failure;
        }
        if (Clock::now() >= deadline) {
            stop(SIGTERM, std::chrono::milliseconds(1000));
            return {Code::kTimeout, "children still running at the deadline were killed"};
        }
        if (pump(ms_until(deadline), interrupt_fd)) return {Code::kClosed, "interrupted"};
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

void ProcessGroup::stop(int sig, std::chrono::milliseconds grace) {
    {
        std::lock_guard lock(mu_);
        for (Child &c : children_)
            if (c.info.running) kill(c.info.pid, sig);
    }
    const auto deadline = Clock::now() + grace;
    while (any_running() && Clock::now() < deadline) pump(ms_until(deadline));
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
