// SPDX-License-Identifier: Apache-2.0
#include "command.h"

#include <algorithm>

namespace afmesh::tool {
namespace {

constexpr Command kCommands[] = {
    {"info", "show modules, the selected device and transport, and every setting",
     "usage: afmesh info [--json]\n"
     "\n"
     "Lists the module search directories, every module found there and whether\n"
     "it loads (each one is probed), the device and transport that AFMESH_DEVICE\n"
     "and AFMESH_TRANSPORT select, every AFMESH_* variable with its value and\n"
     "meaning, and notes about the environment (unknown names, aliases used).\n"
     "\n"
     "  --json   write the same as one JSON object, for scripts\n"
     "\n"
     "Exit status: 0 when a device and a transport were selected and the\n"
     "configuration is valid, 1 otherwise (the reason goes to stderr), 2 for a\n"
     "bad command line.\n",
     run_info},
    {"run", "start a local cluster (scheduler, servers, workers) running one program",
     "usage: afmesh run [--workers W] [--servers S] [--scheduler HOST:PORT] [--only all|servers|workers]\n"
     "                  [--timeout SECONDS] -- PROGRAM [ARGS...]\n"
     "\n"
     "Starts the scheduler, S servers and W workers as child processes, each\n"
     "running PROGRAM with AFMESH_ROLE, AFMESH_RANK, AFMESH_SCHEDULER,\n"
     "AFMESH_NUM_WORKERS and AFMESH_NUM_SERVERS set, and relays their output\n"
     "prefixed with their role. If one fails the others are stopped and the exit\n"
     "status is 1, naming the one that failed. PROGRAM 'afmesh' means this program.\n"
     "\n"
     "  --scheduler   address the scheduler listens on (default 127.0.0.1:0, a free port)\n"
     "  --only        run one host's share of a multi-host cluster:\n"
     "                'servers' = the scheduler and the servers (host A),\n"
     "                'workers' = the workers, pointed at host A's --scheduler (host B)\n"
     "  --timeout     stop everything after this many seconds (exit 1)\n",
     run_run},
    {"bench", "the AF benchmark: latency table against the raw transport floor",
     "usage: afmesh bench [--iters N] [--warmup N] [--seconds S] [--tokens T] [--hidden H]\n"
     "                    [--dtype bf16|fp16|fp32|fp8|int8] [--pull-dtype ...] [--microbatches M]\n"
     "                    [--layers L] [--sizes 8,65536] [--poll busy,adaptive] [--batch all|any]\n"
     "                    [--json FILE] [--csv FILE] [--trace]\n"
     "\n"
     "Run one per node, e.g. 'afmesh run --workers 2 --servers 2 -- afmesh bench'.\n"
     "Each worker pushes to every server and pulls one answer from each; servers\n"
     "stamp their rank into the answer and workers verify every iteration.\n"
     "Measures each raw size and the T x H AF shape (default 128 x 7168 bf16) one\n"
     "push-pull at a time, next to the same exchange timed on the raw transport\n"
     "(the floor), then the AF pipeline: L layers of M micro-batches in flight.\n"
     "Worker 0 prints p50/p99/max (us), bandwidth and afmesh/floor ratios for\n"
     "every polling mode given. Servers take one request from every worker per\n"
     "batch (--batch all, the AF step) or whatever has arrived (--batch any, as\n"
     "the floor's servers answer). --trace adds where the pipeline's time goes\n"
     "per server; --json writes every number.\n",
     run_bench},
    {"scheduler", "run the rendezvous for one cluster",
     "usage: afmesh scheduler [--listen HOST:PORT]\n"
     "\n"
     "Serves HELLO, the roster, barriers, heartbeats and stop for one cluster\n"
     "(AFMESH_SCHEDULER gives the address when --listen is absent), and exits\n"
     "once every node has stopped.\n",
     run_scheduler},
    {"help", "show this help, or a command's help",
     "usage: afmesh help [command]\n", run_help},
};

}  // namespace

std::span<const Command> commands() { return kCommands; }

const Command *find_command(std::string_view name) {
    auto it = std::find_if(std::begin(kCommands), std::end(kCommands),
                           [name](const Command &c) { return name == c.name; });
    return it == std::end(kCommands) ? nullptr : it;
}

void print_usage(FILE *out) {
    fprintf(out,
            "usage: afmesh <command> [options]\n"
            "       afmesh --help | --version\n"
            "\n"
            "commands:\n");
    for (const Command &c : kCommands) fprintf(out, "  %-10s %s\n", c.name, c.summary);
    fprintf(out, "\nRun 'afmesh help <command>' for a command's options.\n");
}

bool is_help_flag(std::string_view arg) { return arg == "-h" || arg == "--help"; }

}  // namespace afmesh::tool
