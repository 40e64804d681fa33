// SPDX-License-Identifier: Apache-2.0
// `afmesh bench` options.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "afmesh/afmesh.h"
#include "cli.h"

namespace afmesh::bench {

struct DType {
    const char *name;
    afmesh_dtype dtype;
    uint32_t bytes;
};

struct Options {
    int iters = 200, warmup = 20;
    double seconds = 0;  // > 0: run each case this long instead of `iters` times
    int tokens = 128, hidden = 7168;
    DType push_dtype{"bf16", {4, 16, 1}, 2}, pull_dtype{"bf16", {4, 16, 1}, 2};
    int microbatches = 3, layers = 4;
    std::vector<uint64_t> sizes = {8, 64 * 1024};  // raw byte sizes measured besides the AF shape
    std::vector<std::string> polls = {"busy", "adaptive"};
    // The servers' get_batch mode: one request from every worker (the AF
    // step), or whatever has arrived (as the floor's server answers).
    afmesh_batch_mode batch = AFMESH_BATCH_ALL_WORKERS;
    std::string json, csv;  // where to write the report's files; "" for none
    bool trace = false;
    bool prepare = true;  // repeated push-pulls are prepared once (afmesh_prepare_push_pull)

    uint64_t push_bytes() const { return uint64_t{static_cast<uint64_t>(tokens)} * hidden * push_dtype.bytes; }
    uint64_t pull_bytes() const { return uint64_t{static_cast<uint64_t>(tokens)} * hidden * pull_dtype.bytes; }
};

/** Declares every option of `afmesh bench` on `command`, parsed into `o`. */
void declare_options(CLI::App &command, Options &o);

}  // namespace afmesh::bench
