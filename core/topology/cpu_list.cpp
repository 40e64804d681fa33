// SPDX-License-Identifier: Apache-2.0
#include "cpu_list.h"

#include <algorithm>
#include <charconv>

namespace afmesh::topology {
namespace {

// Bounds a typo ("0-4000000") before it allocates.
constexpr int kMaxCpu = 1 << 16;

std::optional<int> cpu_number(std::string_view text) {
    int value = -1;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || end != text.data() + text.size() || value < 0 || value > kMaxCpu) return std::nullopt;
    return value;
}

}  // namespace

std::optional<std::vector<int>> parse_cpu_list(std::string_view list) {
    std::vector<int> cpus;
    while (!list.empty()) {
        const size_t comma = std::min(list.find(','), list.size());
        const std::string_view item = list.substr(0, comma);
        list.remove_prefix(std::min(comma + 1, list.size()));
        const size_t dash = item.find('-');
        const std::optional<int> first = cpu_number(item.substr(0, dash));
        const std::optional<int> last = dash == std::string_view::npos ? first : cpu_number(item.substr(dash + 1));
        if (!first || !last || *first > *last) return std::nullopt;
        for (int cpu = *first; cpu <= *last; ++cpu) cpus.push_back(cpu);
    }
    std::sort(cpus.begin(), cpus.end());
    cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
    return cpus;
}

}  // namespace afmesh::topology
