// SPDX-License-Identifier: Apache-2.0
// A module's binding to the core, for device and transport modules alike:
// keeping the host services its afmesh_module_query was handed, and
// reporting failure reasons, logging and reading configuration through them.
// Header-only: each module is its own shared object with hidden visibility
// and gets a private copy; no module ever links another. The core is the
// host and does not use this.
#pragma once

#include <atomic>
#include <cstdarg>
#include <cstdio>

#include "afmesh/hal/module.h"

namespace afmesh::module {

struct HostBinding {
    // Atomic: contexts on other threads may already be logging when a second
    // copy of the module is queried (the services are the same each time).
    std::atomic<const afmesh_host_services *> services{nullptr};
    std::atomic<const char *> module_name{""};
};

/** This module's binding to the core, filled in by bind_host(). */
inline HostBinding &host_binding() {
    static HostBinding binding;
    return binding;
}

/** Called by afmesh_module_query: the services to report through, and the name to log under. */
inline void bind_host(const afmesh_host_services *services, const char *module_name) {
    host_binding().module_name.store(module_name, std::memory_order_release);
    host_binding().services.store(services, std::memory_order_release);
}

/**
 * Records why the current call fails (host->set_error, read by the core right
 * after the call returns) and returns `status`, so error paths are one line:
 * `return host_error(AFMESH_HAL_INVALID_ARGUMENT, "bad device %d", device);`
 */
__attribute__((format(printf, 2, 3))) inline int host_error(int status, const char *fmt, ...) {
    const afmesh_host_services *host = host_binding().services.load(std::memory_order_acquire);
    if (!host || !host->set_error) return status;
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    host->set_error("%s", text);
    return status;
}

/** Logs through the core's logger (which applies AFMESH_LOG_LEVEL). */
__attribute__((format(printf, 2, 3))) inline void host_log(afmesh_log_level level, const char *fmt, ...) {
    const HostBinding &binding = host_binding();
    const afmesh_host_services *host = binding.services.load(std::memory_order_acquire);
    if (!host || !host->log) return;
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    host->log(level, binding.module_name.load(std::memory_order_acquire), "%s", text);
}

/** A configuration value, or nullptr when it is unset or empty. */
inline const char *host_config(const char *name) {
    const afmesh_host_services *host = host_binding().services.load(std::memory_order_acquire);
    const char *value = host && host->get_config ? host->get_config(name) : nullptr;
    return value && *value ? value : nullptr;
}

}  // namespace afmesh::module
