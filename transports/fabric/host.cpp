#include "host.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>

namespace afmesh::fabric {
namespace {

// Every query call passes the same services; atomic because contexts on other
// threads may already be logging when a second copy of the module is queried.
std::atomic<const afmesh_host_services *> g_host{nullptr};

constexpr const char *kModuleName = "fabric";

}  // namespace

void set_host(const afmesh_host_services *host) { g_host.store(host, std::memory_order_release); }

int host_error(int status, const char *fmt, ...) {
    const afmesh_host_services *host = g_host.load(std::memory_order_acquire);
    if (host && host->set_error) {
        char text[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(text, sizeof text, fmt, ap);
        va_end(ap);
        host->set_error("%s", text);
    }
    return status;
}

void host_log(afmesh_log_level level, const char *fmt, ...) {
    const afmesh_host_services *host = g_host.load(std::memory_order_acquire);
    if (!host || !host->log) return;
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    host->log(level, kModuleName, "%s", text);
}

const char *host_config(const char *name) {
    const afmesh_host_services *host = g_host.load(std::memory_order_acquire);
    const char *value = host && host->get_config ? host->get_config(name) : nullptr;
    return value && *value ? value : nullptr;
}

}  // namespace afmesh::fabric
