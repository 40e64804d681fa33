// SPDX-License-Identifier: Apache-2.0
// How `afmesh bench` gives up: on misuse or a failed call it names what
// failed and exits the process; the launcher then stops the rest of the run.
#pragma once

#include <string>

#include "afmesh/afmesh.h"

namespace afmesh::bench {

/** Prints "afmesh bench: <what>" and exits with status 1, without running destructors or atexit handlers. */
[[noreturn]] void die(const std::string &what);
/** die() unless `st` is OK, with the library's own account of the failure. */
void check(afmesh_status st, const char *what);

}  // namespace afmesh::bench
