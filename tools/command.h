// SPDX-License-Identifier: Apache-2.0
// The `afmesh` command's subcommands: one table, one file per subcommand.
// Adding a subcommand (scheduler, run, bench...) means writing its run
// function in its own file and adding one row to the table in commands.cpp.
#pragma once

#include <cstdio>
#include <span>
#include <string_view>

namespace afmesh::tool {

/** Exit statuses shared by every subcommand. */
constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;  // the command ran and found a problem
constexpr int kExitUsage = 2;    // the command line itself is wrong

/** Arguments after the subcommand's name (argv[0] is the first of them). */
using Args = std::span<char *const>;

struct Command {
    const char *name;
    const char *summary;  // one line, for the command list
    const char *usage;    // the full help text, ending in a newline
    int (*run)(Args args);
};

/** Every subcommand, in the order `afmesh help` lists them. */
std::span<const Command> commands();
/** The subcommand called `name`, or nullptr. */
const Command *find_command(std::string_view name);
/** Writes the program's usage: synopsis and the subcommand list. */
void print_usage(FILE *out);
/** Whether `arg` asks for help (-h / --help). */
bool is_help_flag(std::string_view arg);

int run_help(Args args);
int run_info(Args args);
int run_scheduler(Args args);
int run_run(Args args);
int run_bench(Args args);

}  // namespace afmesh::tool
