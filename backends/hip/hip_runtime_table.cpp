// SPDX-License-Identifier: Apache-2.0
#include "hip_runtime_table.h"

#include <dlfcn.h>

#include <string>

#include "afmesh/hal/device.h"
#include "module_binding.h"
#include "versioned_symbol.h"

namespace afmesh::hip {
namespace {

// Where the runtime is looked for, in order. First the soname a linked
// module would have had as NEEDED, searched as the dynamic linker searches
// (LD_LIBRARY_PATH, which is how tests substitute a fake runtime, then
// ld.so.cache). Then that file in the library directory of the SDK the
// module was built against, for ROCm installs outside that search path
// (/opt/rocm/lib), where a linked module found it through its RUNPATH.
constexpr const char *kCandidates[] = {AFMESH_HIP_RUNTIME_SONAME,
                                       AFMESH_HIP_RUNTIME_DIR "/" AFMESH_HIP_RUNTIME_SONAME};

struct Loaded {
    HipRuntimeApi api{};
    int status = AFMESH_HAL_OK;
    std::string why;
};

// Binds `*slot` to `name@version`, the binding a linked module's reference had (versioned_symbol.h).
template <typename Fn>
bool bind(void *handle, const char *library, Fn *slot, const char *name, const char *version, Loaded *out) {
    if (bind_versioned(handle, slot, name, version)) return true;
    out->status = AFMESH_HAL_ERROR;
    out->why = std::string(library) + " has no " + name + "@" + version;
    return false;
}

Loaded load() {
    Loaded out;
    void *handle = nullptr;
    const char *library = nullptr;
    std::string errors;
    for (const char *candidate : kCandidates) {
        handle = dlopen(candidate, RTLD_NOW | RTLD_LOCAL);
        if (handle) {
            library = candidate;
            break;
        }
        const char *error = dlerror();
        errors += (errors.empty() ? "" : "; ") + std::string(error ? error : candidate);
    }
    if (!handle) {
        out.status = AFMESH_HAL_NOT_PRESENT;
        out.why = "the HIP runtime library is not installed: " + errors;
        return out;
    }
    // On success the handle stays open for the process: the table points
    // into the library, and the core never unloads a module (RTLD_NODELETE).
#define AFMESH_HIP_RUNTIME_BIND(name, version)                                \
    if (!bind(handle, library, &out.api.name, #name, version, &out)) {        \
        dlclose(handle); /* a library this module cannot use is let go */      \
        return out;                                                           \
    }
    AFMESH_HIP_RUNTIME_FUNCTIONS(AFMESH_HIP_RUNTIME_BIND)
#undef AFMESH_HIP_RUNTIME_BIND
    return out;
}

const Loaded &loaded() {
    static const Loaded once = load();
    return once;
}

}  // namespace

int load_runtime() {
    const Loaded &state = loaded();
    if (state.status != AFMESH_HAL_OK) return module::host_error(state.status, "%s", state.why.c_str());
    return AFMESH_HAL_OK;
}

const HipRuntimeApi &runtime() { return loaded().api; }

}  // namespace afmesh::hip
