// SPDX-License-Identifier: Apache-2.0
// `afmesh info [--json]`.
#include <cstring>

#include "command.h"
#include "info_report.h"

namespace afmesh::tool {

int run_info(Args args) {
    bool json = false;
    for (size_t i = 1; i < args.size(); ++i) {
        if (strcmp(args[i], "--json") == 0) {
            json = true;
        } else if (is_help_flag(args[i])) {
            fputs(find_command("info")->usage, stdout);
            return kExitOk;
        } else {
            fprintf(stderr, "afmesh info: unknown option '%s'\n\n%s", args[i], find_command("info")->usage);
            return kExitUsage;
        }
    }
    // The process configuration is the one modules see through host services.
    InfoReport report = gather_info(Config::process());
    if (json)
        write_info_json(report, stdout);
    else
        write_info_text(report, stdout);
    fflush(stdout);
    // Errors also go to stderr, so they are seen even when stdout is piped away.
    for (const std::string &error : report.errors) fprintf(stderr, "afmesh info: %s\n", error.c_str());
    return report.ok() ? kExitOk : kExitFailure;
}

}  // namespace afmesh::tool
