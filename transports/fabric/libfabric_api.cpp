// SPDX-License-Identifier: Apache-2.0
#include "libfabric_api.h"

#include <dlfcn.h>

#include <cstring>

#include "versioned_symbol.h"

namespace afmesh::fabric {
namespace {

// The soname of the ABI the headers describe: 1.x keeps old symbol versions
// working, so any later 1.x library serves.
constexpr const char *kLibrary = "libfabric.so.1";

struct Loaded {
    LibfabricApi api{};
    bool ok = false;
    Reason why;
};

// Binds `*slot` to `name@version` (versioned_symbol.h: e.g. a newer
// fi_info layout under a newer version is not what these headers describe).
template <typename Fn>
bool bind(void *handle, Fn *slot, const char *name, const char *version, Reason *why) {
    if (bind_versioned(handle, slot, name, version)) return true;
    why->format("%s has no %s@%s", kLibrary, name, version);
    return false;
}

Loaded load() {
    Loaded out;
    // RTLD_NODELETE: providers keep threads and atexit handlers of their own.
    void *handle = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!handle) {
        out.why.format("libfabric is not installed: %s", dlerror());
        return out;
    }
    LibfabricApi &api = out.api;
    out.ok = bind(handle, &api.getinfo, "fi_getinfo", "FABRIC_1.3", &out.why) &&
             bind(handle, &api.freeinfo, "fi_freeinfo", "FABRIC_1.3", &out.why) &&
             bind(handle, &api.dupinfo, "fi_dupinfo", "FABRIC_1.3", &out.why) &&
             bind(handle, &api.fabric, "fi_fabric", "FABRIC_1.1", &out.why) &&
             bind(handle, &api.strerror, "fi_strerror", "FABRIC_1.0", &out.why) &&
             bind(handle, &api.version, "fi_version", "FABRIC_1.0", &out.why);
    if (!out.ok) dlclose(handle);  // a library this module cannot use is let go
    return out;
}

const Loaded &loaded() {
    static const Loaded once = load();
    return once;
}

}  // namespace

const LibfabricApi *load_libfabric(Reason *why) {
    const Loaded &state = loaded();
    if (!state.ok) *why = state.why;
    return state.ok ? &state.api : nullptr;
}

const LibfabricApi &libfabric() { return loaded().api; }

const char *fabric_strerror(int code) {
    const Loaded &state = loaded();
    return state.ok ? state.api.strerror(code) : strerror(code);
}

}  // namespace afmesh::fabric
