// SPDX-License-Identifier: Apache-2.0
// The `afmesh` command: one CLI11 subcommand per job, each defined in its own file.
#include <map>

#include "afmesh/hal/module.h"
#include "command.h"

#ifndef AFMESH_VERSION_STRING
#error "the build must define AFMESH_VERSION_STRING"
#endif

int main(int argc, char **argv) {
    using namespace afmesh::tool;
    CLI::App program{"Tensor communication for Attention-FFN disaggregated inference.", "afmesh"};
    program.set_version_flag("-V,--version", std::string("afmesh ") + AFMESH_VERSION_STRING + " (module ABI " +
                                                 std::to_string(AFMESH_HAL_ABI_MAJOR) + "." +
                                                 std::to_string(AFMESH_HAL_ABI_MINOR) + ")");
    program.require_subcommand(0, 1);
    program.get_formatter()->label("SUBCOMMAND", "COMMAND");
    program.footer("Run 'afmesh <command> --help' for a command's options.");

    struct Subcommand {
        const char *name;
        const char *summary;
        Runner (*define)(CLI::App &);
    };
    const Subcommand table[] = {
        {"info", "show modules, the selected device and transport, and every setting", define_info},
        {"run", "start a local cluster (scheduler, servers, workers) running one program", define_run},
        {"bench", "the AF benchmark: latency table against the raw transport floor", define_bench},
        {"scheduler", "run the rendezvous for one cluster", define_scheduler},
    };
    std::map<const CLI::App *, Runner> runners;
    for (const Subcommand &s : table) {
        CLI::App *command = program.add_subcommand(s.name, s.summary)->group("Commands");
        runners[command] = s.define(*command);
    }
    CLI::App *help = program.add_subcommand("help", "show this help, or a command's help")->group("Commands");
    runners[help] = define_help(*help, program);

    // CLI11 would call an unknown command an unexpected argument.
    auto is_named = [&](const CLI::App *command) { return command->check_name(argv[1]); };
    if (argc > 1 && argv[1][0] != '-' && program.get_subcommands(is_named).empty())
        return afmesh::cli::usage_error(program, std::string("unknown command '") + argv[1] + "'");
    if (std::optional<int> status = afmesh::cli::parse(program, argc, argv)) return *status;
    // Checked here, not by CLI11, whose "subcommand required" would hide an unknown option's name.
    if (program.get_subcommands().empty()) return afmesh::cli::usage_error(program, "a command is required");
    return runners.at(program.get_subcommands().front())();
}
