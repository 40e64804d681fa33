// SPDX-License-Identifier: Apache-2.0
// The `afmesh` command's subcommands, declared on CLI11: each file defines
// one subcommand's options and help text on the CLI::App it is given and
// returns what runs it once the command line has parsed, so the help is
// generated from the same declarations that parse. Adding a subcommand means
// writing its define function in its own file and adding one row to the
// table in main.cpp.
#pragma once

#include <functional>

#include "cli.h"

namespace afmesh::tool {

using cli::kExitFailure;
using cli::kExitOk;
using cli::kExitUsage;

/** What runs a subcommand once its options are parsed: returns the exit status. */
using Runner = std::function<int()>;

Runner define_info(CLI::App &command);
Runner define_run(CLI::App &command);
Runner define_bench(CLI::App &command);
Runner define_scheduler(CLI::App &command);
/** `afmesh help [command]`: prints `program`'s help or one of its subcommands'. */
Runner define_help(CLI::App &command, const CLI::App &program);

}  // namespace afmesh::tool
