// SPDX-License-Identifier: Apache-2.0
#include "bench_options.h"


namespace afmesh::bench {
namespace {

constexpr DType kDTypes[] = {
    {"bf16", {4, 16, 1}, 2}, {"fp16", {2, 16, 1}, 2}, {"fp32", {2, 32, 1}, 4}, {"fp8", {2, 8, 1}, 1},
    {"int8", {0, 8, 1}, 1},
};

// A dtype option: one of kDTypes by name, stored into *out.
void declare_dtype(CLI::App &command, const char *name, const char *help, DType *out) {
    std::vector<std::string> names;
    for (const DType &d : kDTypes) names.emplace_back(d.name);
    command
        .add_option_function<std::string>(
            name,
            [out](const std::string &chosen) {
                for (const DType &d : kDTypes)
                    if (chosen == d.name) *out = d;
            },
            help)
        ->type_name("DTYPE")
        ->default_str(out->name)
        ->check(CLI::IsMember(names));
}

}  // namespace

void declare_options(CLI::App &command, Options &o) {
    cli::add_count(command, "--iters", o.iters, "timed push-pulls per case", 1);
    cli::add_count(command, "--warmup", o.warmup, "untimed push-pulls before each case");
    command.add_option("--seconds", o.seconds, "run each case this long instead of --iters times (0: use --iters)")
        ->capture_default_str()
        ->type_name("S")
        ->check(cli::non_negative_real());
    cli::add_count(command, "--tokens", o.tokens, "tokens per micro-batch: the AF shape is T x H", 1);
    cli::add_count(command, "--hidden", o.hidden, "hidden size", 1);
    declare_dtype(command, "--dtype", "what workers push", &o.push_dtype);
    declare_dtype(command, "--pull-dtype", "what servers answer", &o.pull_dtype);
    cli::add_count(command, "--microbatches", o.microbatches, "micro-batches in flight in the AF pipeline", 1);
    cli::add_count(command, "--layers", o.layers, "layers of the AF pipeline", 1);
    command.add_option("--sizes", o.sizes, "raw sizes (8 B to 4 GiB) measured besides the AF shape")
        ->delimiter(',')
        ->type_name("SIZE,...")
        ->default_str(CLI::detail::join(o.sizes, ","))
        ->transform(cli::byte_size())
        ->check(CLI::Range(uint64_t{8}, (uint64_t{1} << 32) - 1).description(""));
    command.add_option("--poll", o.polls, "the polling modes to measure, each in turn")
        ->delimiter(',')
        ->type_name("MODE,...")
        ->default_str(CLI::detail::join(o.polls, ","))
        ->check(CLI::IsMember({"busy", "adaptive", "blocking"}));
    command
        .add_option_function<std::string>(
            "--batch",
            [&o](const std::string &mode) { o.batch = mode == "any" ? AFMESH_BATCH_ANY : AFMESH_BATCH_ALL_WORKERS; },
            "what a server's get_batch waits for: one request from every worker (all, the AF step) or "
            "whatever has arrived (any, as the floor's servers answer)")
        ->type_name("MODE")
        ->default_str("all")
        ->check(CLI::IsMember({"all", "any"}));
    command.add_option("--json", o.json, "write every number to this file (docs/bench-schema.json)")
        ->type_name("FILE");
    command.add_option("--csv", o.csv, "write the table's rows to this file")->type_name("FILE");
    command.add_flag("--trace", o.trace, "add where the pipeline's time goes, per server");
    command.add_flag("!--no-prepare", o.prepare,
                     "issue each push-pull with afmesh_push_pull instead of starting one prepared per exchange");
}

}  // namespace afmesh::bench
