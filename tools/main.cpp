// SPDX-License-Identifier: Apache-2.0
// The `afmesh` command: dispatches to the subcommand named by argv[1].
#include <cstdio>
#include <string_view>

#include "afmesh/hal/module.h"
#include "command.h"

#ifndef AFMESH_VERSION_STRING
#error "the build must define AFMESH_VERSION_STRING"
#endif

int main(int argc, char **argv) {
    using namespace afmesh::tool;
    if (argc < 2) {
        print_usage(stderr);
        return kExitUsage;
    }
    std::string_view first = argv[1];
    if (is_help_flag(first)) {
        print_usage(stdout);
        return kExitOk;
    }
    if (first == "--version" || first == "-V") {
        printf("afmesh %s (module ABI %d.%d)\n", AFMESH_VERSION_STRING, AFMESH_HAL_ABI_MAJOR, AFMESH_HAL_ABI_MINOR);
        return kExitOk;
    }
    const Command *command = find_command(first);
    if (!command) {
        fprintf(stderr, "afmesh: unknown command '%s'\n\n", argv[1]);
        print_usage(stderr);
        return kExitUsage;
    }
    return command->run(Args(argv + 1, static_cast<size_t>(argc - 1)));
}
