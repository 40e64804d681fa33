// SPDX-License-Identifier: Apache-2.0
#include "sampler.h"

#include <algorithm>
#include <cmath>

#include "engine/clock.h"

namespace afmesh::bench {

Sampler::Sampler(const Options &o, bool decides, Agree agree, int share)
    : o_(o), decides_(decides), agree_(std::move(agree)), share_(share), start_(monotonic_ns()) {}

bool Sampler::more() {
    ++done_;
    if (o_.seconds <= 0) return done_ <= std::max(1, o_.iters / share_);
    if (done_ > chunk_end_) chunk_end_ += agree_(decides_ ? next_chunk() : 0);
    return done_ <= chunk_end_;
}

int Sampler::next_chunk() const {
    const double budget_ns = o_.seconds / share_ * 1e9;
    const double elapsed_ns = static_cast<double>(monotonic_ns() - start_);
    const int ran = done_ - 1;
    if (elapsed_ns >= budget_ns) return 0;
    if (ran == 0) return 1;
    const double fit = (budget_ns - elapsed_ns) / (elapsed_ns / ran);
    return static_cast<int>(std::clamp(std::ceil(fit), 1.0, static_cast<double>(ran)));
}

}  // namespace afmesh::bench
