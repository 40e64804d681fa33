// SPDX-License-Identifier: Apache-2.0
// The counters a transport module reports through the ABI 1.3 counters()
// entry: a fixed table of named relaxed atomics per context, bumped where the
// thing happens (a system call, a post, a retry), plus the reserved total
// "syscalls" that the core adds to its own. Header-only, like net_module.h.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "afmesh/hal/transport.h"

namespace afmesh::net_module {

/** What one counter is called and whether it counts system calls (and so goes into "syscalls"). */
struct CounterSpec {
    const char *name;
    const char *help;
    bool system_call;
};

/** N counters described by `specs` (a table with static storage), indexed by the module's own enum. */
template <size_t N>
class ModuleCounters {
public:
    explicit ModuleCounters(const std::array<CounterSpec, N> &specs) : specs_(specs) {}

    void add(size_t which, uint64_t n = 1) { values_[which].fetch_add(n, std::memory_order_relaxed); }

    /** counters(): every counter, then "syscalls"; returns how many there are, whatever fits. */
    int report(afmesh_net_counter *out, uint32_t capacity) const {
        uint64_t syscalls = 0;
        uint32_t n = 0;
        for (size_t i = 0; i < N; ++i, ++n) {
            const uint64_t value = values_[i].load(std::memory_order_relaxed);
            if (specs_[i].system_call) syscalls += value;
            if (n < capacity) out[n] = {specs_[i].name, specs_[i].help, value};
        }
        if (n < capacity) out[n] = {"syscalls", "system calls this context made itself (the sum of its *_calls)", syscalls};
        return static_cast<int>(n + 1);
    }

private:
    const std::array<CounterSpec, N> &specs_;
    std::array<std::atomic<uint64_t>, N> values_{};
};

}  // namespace afmesh::net_module
