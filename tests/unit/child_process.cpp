// SPDX-License-Identifier: Apache-2.0
#include "child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

#include "env_block.h"

extern char **environ;

namespace afmesh::test {
namespace {

bool starts_with_any(std::string_view text, std::initializer_list<std::string_view> prefixes) {
    for (std::string_view prefix : prefixes)
        if (text.substr(0, prefix.size()) == prefix) return true;
    return false;
}

std::string errno_text(const char *what, int err) { return std::string(what) + ": " + strerror(err); }

// Drains both pipes until each reaches end of file. Polling both keeps a
// child that fills one pipe while we block on the other from deadlocking.
std::string drain(int out_fd, int err_fd, ChildResult &result) {
    pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
    std::string *sinks[2] = {&result.out, &result.err};
    int open_fds = 2;
    char buf[4096];
    while (open_fds > 0) {
        if (poll(fds, 2, -1) < 0) {
            if (errno == EINTR) continue;
            return errno_text("poll", errno);
        }
        for (int i = 0; i < 2; ++i) {
            if (fds[i].fd < 0 || fds[i].revents == 0) continue;
            ssize_t n = read(fds[i].fd, buf, sizeof buf);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                fds[i].fd = -1;  // poll() ignores negative descriptors
                --open_fds;
                continue;
            }
            sinks[i]->append(buf, static_cast<size_t>(n));
        }
    }
    return "";
}

}  // namespace

ChildResult run_child(const std::string &path, const std::vector<std::string> &argv, char **envp) {
    ChildResult result;
    int out_pipe[2], err_pipe[2];
    if (pipe2(out_pipe, O_CLOEXEC) != 0) {
        result.spawn_error = errno_text("pipe2", errno);
        return result;
    }
    if (pipe2(err_pipe, O_CLOEXEC) != 0) {
        result.spawn_error = errno_text("pipe2", errno);
        close(out_pipe[0]);
        close(out_pipe[1]);
        return result;
    }
    // dup2 clears close-on-exec on the child's 1 and 2; every pipe end
    // itself is closed at exec.
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);

    std::vector<char *> args;
    for (const std::string &arg : argv) args.push_back(const_cast<char *>(arg.c_str()));
    args.push_back(nullptr);
    pid_t pid = -1;
    int rc = posix_spawn(&pid, path.c_str(), &actions, nullptr, args.data(), envp);
    posix_spawn_file_actions_destroy(&actions);
    close(out_pipe[1]);
    close(err_pipe[1]);
    if (rc != 0) {
        result.spawn_error = errno_text(("posix_spawn " + path).c_str(), rc);
    } else {
        result.spawn_error = drain(out_pipe[0], err_pipe[0], result);
    }
    close(out_pipe[0]);
    close(err_pipe[0]);
    if (rc != 0) return result;

    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            result.spawn_error = errno_text("waitpid", errno);
            return result;
        }
    }
    if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
    return result;
}

ChildResult run_tool(const std::string &path, std::vector<std::string> args, std::initializer_list<std::string> vars,
                     const std::string &argv0) {
    EnvBlock env;
    for (char **p = environ; *p; ++p)
        if (!starts_with_any(*p, {"AFMESH_", "DMLC_", "STEPMESH_"})) env.add(*p);
    for (const std::string &var : vars) env.add(var);
    args.insert(args.begin(), argv0.empty() ? path : argv0);
    return run_child(path, args, env.envp());
}

}  // namespace afmesh::test
