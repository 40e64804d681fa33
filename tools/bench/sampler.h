// SPDX-License-Identifier: Apache-2.0
// How many iterations a timed block of `afmesh bench` runs.
#pragma once

#include <cstdint>
#include <functional>

#include "bench_options.h"

namespace afmesh::bench {

/**
 * One timed block: `share` of --iters iterations (at least one), or of
 * --seconds. Every worker must run a block the same number of times: the
 * servers batch over all workers (get_batch's AF step; the floor's servers
 * answer once every worker's write has landed), so a worker that ran one
 * iteration more than another would wait for its partner forever. With
 * --seconds, worker 0's clock decides for everyone: the block runs in
 * chunks, each as long as worker 0 proposes and all workers agree on before
 * it starts; a chunk at most doubles what ran so far, so the block ends close
 * to its time after about log2(iterations) agreements.
 */
class Sampler {
public:
    /** `agree`: every worker's proposal goes in, worker 0's comes out. */
    using Agree = std::function<int(int)>;
    Sampler(const Options &o, bool decides, Agree agree, int share = 1);

    /** Whether to run iteration done() + 1; counts it. */
    bool more();
    /** Iterations started so far, this one included: 1 for the first. */
    int done() const { return done_; }

private:
    /** Worker 0: how many more iterations, 0 once the block's time is up. */
    int next_chunk() const;

    const Options &o_;
    const bool decides_;
    const Agree agree_;
    const int share_;
    int done_ = 0, chunk_end_ = 0;
    const uint64_t start_;
};

}  // namespace afmesh::bench
