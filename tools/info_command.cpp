// SPDX-License-Identifier: Apache-2.0
// `afmesh info [--json]`.
#include <memory>

#include "command.h"
#include "info_report.h"

namespace afmesh::tool {

Runner define_info(CLI::App &command) {
    auto json = std::make_shared<bool>(false), topology = std::make_shared<bool>(false);
    command.add_flag("--json", *json, "write the same as one JSON object, for scripts");
    command.add_flag("--topology", *topology,
                     "instead, the GPU x NIC matrix (NCCL's PIX/PXB/PHB/NODE/SYS) and the NIC each local rank takes")
        ->excludes("--json");
    command.footer(
        "Lists the module search directories, every module found there and whether\n"
        "it loads (each one is probed), the device and transport that AFMESH_DEVICE\n"
        "and AFMESH_TRANSPORT select, every AFMESH_* variable with its value and\n"
        "meaning (the core's, then those each module declares), and notes about\n"
        "the environment (unknown names, aliases used).\n"
        "\n"
        "Exit status: 0 when a device and a transport were selected and the\n"
        "configuration is valid, 1 otherwise (the reason goes to stderr), 2 for a\n"
        "bad command line.");
    return [json, topology]() {
        // The process configuration is the one modules see through host services.
        const Config &config = Config::process();
        InfoReport report = gather_info(config);
        if (*topology)
            write_topology_text(report, config, stdout);
        else if (*json)
            write_info_json(report, stdout);
        else
            write_info_text(report, stdout);
        fflush(stdout);
        // Errors also go to stderr, so they are seen even when stdout is piped away.
        for (const std::string &error : report.errors) fprintf(stderr, "afmesh info: %s\n", error.c_str());
        return report.ok() ? kExitOk : kExitFailure;
    };
}

}  // namespace afmesh::tool
