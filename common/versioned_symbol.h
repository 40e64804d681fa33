// SPDX-License-Identifier: Apache-2.0
// Binding a vendor library's functions at run time, for modules that open
// their library with dlopen instead of linking it (probing must stay cheap:
// backends/README.md). Each function is bound at the symbol version a linked
// module's reference would have recorded against the headers it was built
// with (objdump -T shows them), so a newer library that changed a structure
// under a newer version still hands out the one this module was written for.
#pragma once

#include <dlfcn.h>

namespace afmesh {

/** Binds `*slot` to `name@version` in `handle`; false (and *slot null) when the library lacks it. */
template <typename Fn>
bool bind_versioned(void *handle, Fn *slot, const char *name, const char *version) {
    *slot = reinterpret_cast<Fn>(dlvsym(handle, name, version));
    return *slot != nullptr;
}

}  // namespace afmesh
