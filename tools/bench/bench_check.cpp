// SPDX-License-Identifier: Apache-2.0
#include "bench_check.h"

#include <unistd.h>

#include <cstdio>

namespace afmesh::bench {

void die(const std::string &what) {
    fprintf(stderr, "afmesh bench: %s\n", what.c_str());
    fflush(stderr);
    // Not exit(): other threads (the engine's, the floor's) are still running.
    _exit(1);
}

void check(afmesh_status st, const char *what) {
    if (st != AFMESH_OK) die(std::string(what) + ": " + afmesh_strerror(st) + ": " + afmesh_last_error());
}

}  // namespace afmesh::bench
