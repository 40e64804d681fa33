// SPDX-License-Identifier: Apache-2.0
// `afmesh bench`'s tables on stdout: latency, cost and (--trace) where the
// pipeline's time goes.
#include <cstdio>
#include <string>

#include "bench_report.h"

namespace afmesh::bench {
namespace {

// A ratio in a column `width` wide, "-" where there is none.
void print_ratio(std::optional<double> r, int width) {
    if (r)
        printf(" %*.2f", width, *r);
    else
        printf(" %*s", width, "-");
}

void print_latency(const std::vector<Row> &rows) {
    printf("latency per push-pull (us) as seen by worker 0; floor = the same exchange on the raw transport,\n"
           "by write or by message (send), whichever was faster at p50\n\n");
    printf("%-24s %-9s %9s %9s %9s %8s | %-5s %9s %9s | %7s %7s\n", "case", "poll", "p50", "p99", "max", "GB/s",
           "by", "floor p50", "floor p99", "x p50", "x p99");
    for (const Row &r : rows) {
        printf("%-24s %-9s %9.1f %9.1f %9.1f %8.2f | ", r.name.c_str(), r.poll.c_str(), r.afmesh.p50_us,
               r.afmesh.p99_us, r.afmesh.max_us, gb_per_s(r.bytes_per_iteration, r.afmesh.p50_us));
        if (r.has_floor) {
            printf("%-5s %9.1f %9.1f |", r.floor_primitive.c_str(), r.floor.p50_us, r.floor.p99_us);
            print_ratio(ratio(r.afmesh.p50_us, r.floor.p50_us), 7);
            print_ratio(ratio(r.afmesh.p99_us, r.floor.p99_us), 7);
            printf("\n");
        } else {
            printf("%-5s %9s %9s | %7s %7s\n", "-", "-", "-", "-", "-");
        }
    }
}

constexpr const char *kCostColumns = "%8s %6s %6s %8s %6s";

void print_cost_side(const PerPushPull *p) {
    if (p)
        printf("%8.1f %6.2f %6.2f %8.2f %6.2f", p->cpu_us, p->voluntary_switches, p->involuntary_switches, p->syscalls,
               p->operations);
    else
        printf(kCostColumns, "-", "-", "-", "-", "-");
}

void print_cost(const std::vector<Row> &rows) {
    printf("\ncost per push-pull: the whole cluster's CPU time (us, user + system), voluntary and involuntary\n"
           "context switches, system calls and transport operations, over the workers' push-pulls (warm-up\n"
           "included); each side's phases only (the floor's: both primitives)\n\n");
    printf("%-24s %-9s | %-38s | %-38s | %7s\n", "", "", "afmesh", "floor", "");
    printf("%-24s %-9s | ", "case", "poll");
    printf(kCostColumns, "CPU us", "vcsw", "ivcsw", "syscalls", "ops");
    printf(" | ");
    printf(kCostColumns, "CPU us", "vcsw", "ivcsw", "syscalls", "ops");
    printf(" | %7s\n", "x CPU");
    for (const Row &r : rows) {
        const PerPushPull afmesh = per_push_pull(r.cost.afmesh), floor = per_push_pull(r.cost.floor);
        printf("%-24s %-9s | ", r.name.c_str(), r.poll.c_str());
        print_cost_side(&afmesh);
        printf(" | ");
        print_cost_side(r.has_floor ? &floor : nullptr);
        printf(" |");
        print_ratio(r.has_floor ? ratio(afmesh.cpu_us, floor.cpu_us) : std::nullopt, 7);
        printf("\n");
    }
}

void print_stages(const std::vector<Row> &rows) {
    printf("\nwhere the AF pipeline's time goes, per server (p50 us)\n\n");
    printf("%-24s %-9s %-8s %12s %12s %12s %12s\n", "case", "poll", "server", "request net", "batch wait", "compute",
           "response net");
    for (const Row &r : rows)
        for (size_t s = 0; s < r.stages.size(); ++s) {
            const ServerStages &st = r.stages[s];
            printf("%-24s %-9s %-8zu %12.1f %12.1f %12.1f %12.1f\n", r.name.c_str(), r.poll.c_str(), s,
                   st.request_net_us, st.batch_wait_us, st.compute_us, st.response_net_us);
        }
}

}  // namespace

void print_tables(const RunInfo &info, const Options &o, const std::vector<Row> &rows) {
    const std::string amount =
        o.seconds > 0 ? std::to_string(o.seconds) + " s" : std::to_string(o.iters) + " iterations";
    printf("\nafmesh bench: %d worker(s) x %d server(s), transport %s, device %s, %s (+%d warm-up) per case, "
           "push-pulls %s\n",
           info.workers, info.servers, info.transport.c_str(), info.device.c_str(), amount.c_str(), o.warmup,
           o.prepare ? "prepared once, then started" : "posted by afmesh_push_pull");
    print_latency(rows);
    print_cost(rows);
    if (o.trace) print_stages(rows);
    fflush(stdout);
}

}  // namespace afmesh::bench
