// SPDX-License-Identifier: Apache-2.0
// `afmesh help [command]`.
#include "command.h"

namespace afmesh::tool {

int run_help(Args args) {
    if (args.size() > 2) {
        fprintf(stderr, "afmesh help: expected at most one command name\n\n");
        print_usage(stderr);
        return kExitUsage;
    }
    if (args.size() == 1) {
        print_usage(stdout);
        return kExitOk;
    }
    const Command *command = find_command(args[1]);
    if (!command) {
        fprintf(stderr, "afmesh help: unknown command '%s'\n\n", args[1]);
        print_usage(stderr);
        return kExitUsage;
    }
    fputs(command->usage, stdout);
    return kExitOk;
}

}  // namespace afmesh::tool
