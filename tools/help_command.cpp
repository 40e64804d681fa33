// SPDX-License-Identifier: Apache-2.0
// `afmesh help [command]`: the same text as `afmesh [command] --help`.
#include <cstdio>
#include <memory>
#include <string>

#include "command.h"

namespace afmesh::tool {

Runner define_help(CLI::App &command, const CLI::App &program) {
    auto topic = std::make_shared<std::string>();
    std::vector<std::string> names;
    for (const CLI::App *sub : program.get_subcommands([](const CLI::App *) { return true; }))
        names.push_back(sub->get_name());
    command.add_option("command", *topic, "the command to explain")->check(CLI::IsMember(names));
    return [topic, &program]() {
        if (topic->empty()) {
            // Not program.help(): that would explain the chosen subcommand, `help` itself.
            fputs(program.get_formatter()->make_help(&program, program.get_name(), CLI::AppFormatMode::Normal).c_str(),
                  stdout);
        } else {
            const CLI::App *sub = program.get_subcommand(*topic);
            fputs(sub->help(program.get_name()).c_str(), stdout);
        }
        return kExitOk;
    };
}

}  // namespace afmesh::tool
