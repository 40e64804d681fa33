// SPDX-License-Identifier: Apache-2.0
// `afmesh run`: starts a local cluster (scheduler, servers, workers) as child
// processes running one program, relays their output with a role prefix,
// stops the rest when one fails, and exits non-zero naming the failure.
// With --only it runs one host's share of a multi-host cluster. SIGINT,
// SIGTERM and SIGHUP stop the whole cluster, and a launcher that dies takes
// its children with it (see process_group.h).
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "command.h"
#include "free_port.h"
#include "process_group.h"

extern char **environ;

namespace afmesh::tool {
namespace {

// More nodes than one host's process and port budget would bear.
constexpr int kMaxNodesPerRole = 4096;

struct RunOptions {
    int workers = 1, servers = 1;
    std::string scheduler = "127.0.0.1:0";
    std::string only = "all";  // all | servers (with the scheduler) | workers
    int timeout_s = 0;         // 0: none
    int restarts = 0;          // times a failed worker or server is started again
    bool timing = false;       // report how long the processes took to start, and the scheduler's phases
    std::vector<std::string> program;
};

// "afmesh" means this very executable, so `afmesh run -- afmesh bench` works
// from a build tree that is not on PATH; other names are looked up on PATH.
std::string resolve(const std::string &program) {
    if (program == "afmesh") {
        char self[4096];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n > 0) return std::string(self, static_cast<size_t>(n));
    }
    if (program.find('/') != std::string::npos) return program;
    const char *path = getenv("PATH");
    for (std::string dirs = path ? path : ""; !dirs.empty();) {
        size_t colon = dirs.find(':');
        std::string candidate = dirs.substr(0, colon) + "/" + program;
        if (access(candidate.c_str(), X_OK) == 0) return candidate;
        dirs = colon == std::string::npos ? "" : dirs.substr(colon + 1);
    }
    return program;
}

// With --timing the scheduler logs its account of the start-up phases, at
// info; a user's more verbose level stays.
bool verbose_enough(const std::string &level) { return level == "info" || level == "debug" || level == "trace"; }

// How long nodes wait for a restarted scheduler under --restart: starting
// one takes milliseconds; a scheduler that fails on start, more than this.
constexpr int kSchedulerRestartWindowMs = 30000;

std::vector<std::string> node_env(const RunOptions &o, const char *role, int rank) {
    std::vector<std::string> env;
    for (char **e = environ; *e; ++e) {
        std::string s = *e;
        for (const char *owned : {"AFMESH_ROLE=", "AFMESH_RANK=", "AFMESH_SCHEDULER=", "AFMESH_NUM_WORKERS=",
                                  "AFMESH_NUM_SERVERS="})
            if (s.rfind(owned, 0) == 0) s.clear();
        if (!s.empty()) env.push_back(s);
    }
    env.push_back(std::string("AFMESH_ROLE=") + role);
    if (rank >= 0) env.push_back("AFMESH_RANK=" + std::to_string(rank));
    env.push_back("AFMESH_SCHEDULER=" + o.scheduler);
    env.push_back("AFMESH_NUM_WORKERS=" + std::to_string(o.workers));
    env.push_back("AFMESH_NUM_SERVERS=" + std::to_string(o.servers));
    // With --restart, a node that loses the scheduler waits for the one
    // started again in its place, unless the user said how long.
    if (o.restarts > 0 && rank >= 0 && !getenv("AFMESH_SCHEDULER_RECONNECT_MS"))
        env.push_back("AFMESH_SCHEDULER_RECONNECT_MS=" + std::to_string(kSchedulerRestartWindowMs));
    if (o.timing && rank < 0) {
        const char *level = getenv("AFMESH_LOG_LEVEL");
        if (!level || !verbose_enough(level)) {
            std::erase_if(env, [](const std::string &s) { return s.rfind("AFMESH_LOG_LEVEL=", 0) == 0; });
            env.push_back("AFMESH_LOG_LEVEL=info");
        }
    }
    return env;
}

// Exit status after a signal stopped the cluster: 128 + its number, as a shell reports it.
constexpr int kExitSignalBase = 128;

int g_stop_pipe = -1;  // the write end, for the handler

extern "C" void on_stop_signal(int sig) {
    const int saved = errno;
    const unsigned char number = static_cast<unsigned char>(sig);
    if (write(g_stop_pipe, &number, 1) < 0) {
        // The pipe is full: enough signals wait to be seen already.
    }
    errno = saved;
}

// The children run in process groups of their own, so a terminal's Ctrl-C
// reaches the launcher only, which must pass it on. The handler only writes
// the signal's number into a pipe, whose read end (*read_fd) the wait for the
// children watches. A signal ignored when the launcher started (nohup, a
// script's background job) stays ignored, as in a shell.
Status catch_stop_signals(int *read_fd) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return {Code::kError, std::string("pipe: ") + strerror(errno)};
    g_stop_pipe = fds[1];
    *read_fd = fds[0];
    struct sigaction action = {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    for (int sig : kStopSignals) {
        struct sigaction before = {};
        if (sigaction(sig, nullptr, &before) == 0 && before.sa_handler == SIG_IGN) continue;
        if (sigaction(sig, &action, nullptr) != 0)
            return {Code::kError, "cannot catch " + signal_name(sig) + ": " + strerror(errno)};
    }
    return Status::ok();
}

// The first stop signal caught and not yet taken, or 0.
int take_stop_signal(int read_fd) {
    unsigned char number = 0;
    return read(read_fd, &number, 1) == 1 ? number : 0;
}

int run(RunOptions &o) {
    if (o.only != "workers") o.scheduler = with_free_port(o.scheduler);
    const std::string program = resolve(o.program[0]);
    int stop_fd = -1;
    if (Status s = catch_stop_signals(&stop_fd); !s) {
        fprintf(stderr, "afmesh run: %s\n", s.message().c_str());
        return kExitFailure;
    }
    // Spawned from this thread, which lives as long as the launcher: the
    // children die when the thread that started them does.
    ProcessGroup group(true);
    int spawned = 0;
    auto start = [&](const std::string &name, const std::string &path, std::vector<std::string> argv,
                     std::vector<std::string> env) {
        Status s = group.spawn({name, path, std::move(argv), std::move(env)});
        if (!s) fprintf(stderr, "afmesh run: %s\n", s.message().c_str());
        spawned += s.is_ok();
        return s.is_ok();
    };
    bool started = true;
    const auto launched = std::chrono::steady_clock::now();
    if (o.only != "workers")
        started &= start("scheduler", resolve("afmesh"), {"afmesh", "scheduler"}, node_env(o, "scheduler", -1));
    if (o.only != "workers")
        for (int s = 0; s < o.servers && started; ++s)
            started &= start("server " + std::to_string(s), program, o.program, node_env(o, "server", s));
    if (o.only != "servers")
        for (int w = 0; w < o.workers && started; ++w)
            started &= start("worker " + std::to_string(w), program, o.program, node_env(o, "worker", w));
    if (o.timing && started)
        fprintf(stderr, "afmesh run: started %d processes in %.3f s; the scheduler reports the start-up phases\n",
                spawned, std::chrono::duration<double>(std::chrono::steady_clock::now() - launched).count());
    auto deadline = o.timeout_s > 0 ? std::chrono::steady_clock::now() + std::chrono::seconds(o.timeout_s)
                                    : std::chrono::steady_clock::time_point::max();
    // A failed worker or server is started again under its rank; the
    // scheduler admits it in the failed node's place. A failed scheduler is
    // started again at its address, and the nodes rejoin it.
    std::map<std::string, int> restarted;
    auto restart = [&](size_t index, const ChildExit &exit) {
        if (restarted[exit.name] >= o.restarts) return false;
        const int n = ++restarted[exit.name];
        fprintf(stderr, "afmesh run: %s; starting it again %s (restart %d of %d)\n", describe(exit).c_str(),
                exit.name == "scheduler" ? "at its address" : "under its rank", n, o.restarts);
        Status s = group.respawn(index);
        if (!s) fprintf(stderr, "afmesh run: %s\n", s.message().c_str());
        return s.is_ok();
    };
    Status result = started ? group.wait_all(deadline, true, stop_fd, restart)
                            : Status(Code::kError, "not every process started");
    // CLOSED: a stop signal came before the cluster ended by itself.
    if (int sig = result.code() == Code::kClosed ? take_stop_signal(stop_fd) : 0) {
        group.stop(sig, kStopGrace);
        fprintf(stderr, "afmesh run: interrupted by %s: the cluster was stopped\n", signal_name(sig).c_str());
        return kExitSignalBase + sig;
    }
    if (!result) {
        fprintf(stderr, "afmesh run: %s\n", result.message().c_str());
        return kExitFailure;
    }
    return kExitOk;
}

}  // namespace

Runner define_run(CLI::App &command) {
    auto o = std::make_shared<RunOptions>();
    cli::add_count(command, "--workers", o->workers, "how many workers", 1, kMaxNodesPerRole);
    cli::add_count(command, "--servers", o->servers, "how many servers", 1, kMaxNodesPerRole);
    command.add_option("--scheduler", o->scheduler, "the address the scheduler listens on (port 0: a free one)")
        ->capture_default_str()
        ->type_name("HOST:PORT");
    command
        .add_option("--only", o->only,
                    "one host's share of a multi-host cluster: 'servers' = the scheduler and the servers (host A), "
                    "'workers' = the workers, pointed at host A's --scheduler (host B)")
        ->capture_default_str()
        ->check(CLI::IsMember({"all", "servers", "workers"}));
    command.add_flag("--timing", o->timing,
                     "say how long starting the processes took, and have the scheduler log when every node had "
                     "joined, when the roster went out and when every node was connected to its peers");
    cli::add_count(command, "--timeout", o->timeout_s, "stop everything after this many seconds (exit 1); 0: never")
        ->type_name("SECONDS");
    cli::add_count(command, "--restart", o->restarts,
                   "start a node that fails again, up to N times each: a worker or server under its rank (the "
                   "scheduler admits it in the failed node's place), the scheduler at its address (the nodes "
                   "rejoin it; AFMESH_SCHEDULER_RECONNECT_MS defaults to 30000) (0: a failure stops the cluster)")
        ->type_name("N");
    command.add_option("program", o->program, "the program each node runs, and its arguments (after --)")
        ->required()
        ->type_name("-- PROGRAM [ARGS...]");
    command.footer(
        "Starts the scheduler, the servers and the workers as child processes, each\n"
        "running PROGRAM with AFMESH_ROLE, AFMESH_RANK, AFMESH_SCHEDULER,\n"
        "AFMESH_NUM_WORKERS and AFMESH_NUM_SERVERS set, and relays their output\n"
        "prefixed with their role. If one fails the others are stopped and the exit\n"
        "status is 1, naming the one that failed (with --restart N, it is first\n"
        "started again, up to N times). PROGRAM 'afmesh' means this program:\n"
        "  afmesh run --workers 2 --servers 2 -- afmesh bench");
    return [o]() { return run(*o); };
}

}  // namespace afmesh::tool
