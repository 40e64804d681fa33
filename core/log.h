// Logging to stderr and the per-thread "why did that fail" message that
// modules record through host services.
#pragma once

#include <string>

#include "afmesh/hal/module.h"

namespace afmesh {

/** Current threshold; messages above it are dropped. Default: warn. */
afmesh_log_level log_level();
void set_log_level(afmesh_log_level level);
/** Parses "error|warn|info|debug|trace"; false when the name is unknown. */
bool parse_log_level(const char *name, afmesh_log_level *level);

/** Writes one line "afmesh[pid] LEVEL source: message" with a single write(2). Also the modules' log service. */
void log(int level, const char *source, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/** Records the reason for the failing module call on this thread (host service). */
void set_module_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/** Returns and clears this thread's module error ("" when none was recorded). */
std::string take_module_error();

}  // namespace afmesh

#define AFMESH_LOG(level, ...)                                          \
    do {                                                                \
        if ((level) <= ::afmesh::log_level()) ::afmesh::log((level), "core", __VA_ARGS__); \
    } while (0)
