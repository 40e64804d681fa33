// SPDX-License-Identifier: Apache-2.0
// Logging to stderr (or to the embedding program's afmesh_log_handler) and
// the per-thread "why did that fail" message that modules record through host
// services.
#pragma once

#include <cstdint>
#include <string>

#include "afmesh/afmesh.h"
#include "afmesh/hal/module.h"

namespace afmesh {

/** Current threshold; messages above it are dropped. Default: warn. */
afmesh_log_level log_level();
void set_log_level(afmesh_log_level level);
/** Parses "error|warn|info|debug|trace"; false when the name is unknown. */
bool parse_log_level(const char *name, afmesh_log_level *level);

/**
 * Names this process in every later line: "worker 0", or the role alone when
 * `rank` < 0 ("scheduler"). A null or empty `role` drops the identity again.
 * Process-wide; the last call wins.
 */
void set_log_identity(const char *role, int32_t rank);

/** Hands every line to `handler` (null: stderr again); false when out of memory (nothing changes). */
bool set_log_handler(afmesh_log_handler handler, void *user);

/**
 * Writes one line
 * "2026-12-06T17:52:27.123456Z afmesh[pid] worker 0 warn source: message"
 * (UTC; the identity part only once set_log_identity named one) to the
 * afmesh_set_log_handler handler, or to stderr with a single write(2). Also
 * the modules' log service.
 */
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
