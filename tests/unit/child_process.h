// SPDX-License-Identifier: Apache-2.0
// Runs a program as a child process and collects what it writes, for tests
// of the `afmesh` command.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

namespace afmesh::test {

struct ChildResult {
    std::string spawn_error;  // non-empty when the child could not be run at all
    int exit_code = -1;       // -1 when the child was killed by a signal
    int signal = 0;           // the signal that killed it, or 0
    std::string out, err;     // everything it wrote to stdout and stderr
};

/**
 * Runs the program at `path` with `argv` (argv[0] included, and free to
 * differ from `path`) and environment `envp`, reads its stdout and stderr to
 * the end and reaps it by pid. Blocks until the child exits.
 */
ChildResult run_child(const std::string &path, const std::vector<std::string> &argv, char **envp);

/**
 * Runs the program at `path` with `args` after argv[0] (`argv0`, or `path`
 * when empty), in this process's environment minus every afmesh and StepMesh
 * variable (sanitizer options and the like pass through), plus `vars`.
 */
ChildResult run_tool(const std::string &path, std::vector<std::string> args, std::initializer_list<std::string> vars,
                     const std::string &argv0 = "");

}  // namespace afmesh::test
