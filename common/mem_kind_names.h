// SPDX-License-Identifier: Apache-2.0
// The names of the memory kinds (afmesh_mem_kind): the short ones that
// `afmesh info` and the modules' messages print ("cuda"), and the ones the
// core's messages to users print ("CUDA").
#pragma once

#include <cstdint>
#include <iterator>

#include "afmesh/hal/module.h"

namespace afmesh {
namespace mem_kind_detail {

struct Names {
    const char *name;
    const char *display_name;
};
// Indexed by the kind.
inline constexpr Names kNames[] = {{"host", "host"}, {"cuda", "CUDA"}, {"hip", "HIP"}, {"ze", "Level Zero"}};
static_assert(std::size(kNames) == AFMESH_MEM_KIND_COUNT);
static_assert(AFMESH_MEM_HOST == 0 && AFMESH_MEM_CUDA == 1 && AFMESH_MEM_HIP == 2 && AFMESH_MEM_ZE == 3);

}  // namespace mem_kind_detail

/** "host", "cuda", "hip" or "ze"; "unknown" for a value that is no kind. */
inline const char *mem_kind_name(uint32_t kind) {
    return kind < AFMESH_MEM_KIND_COUNT ? mem_kind_detail::kNames[kind].name : "unknown";
}

/** "host", "CUDA", "HIP" or "Level Zero"; "unknown" for a value that is no kind. */
inline const char *mem_kind_display_name(uint32_t kind) {
    return kind < AFMESH_MEM_KIND_COUNT ? mem_kind_detail::kNames[kind].display_name : "unknown";
}

}  // namespace afmesh
