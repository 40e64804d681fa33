// The core's services as the module sees them: the logger, the per-thread
// error message and configuration lookup. Set once by afmesh_module_query.
#pragma once

#include "afmesh/hal/module.h"

namespace afmesh::ibverbs {

void set_host(const afmesh_host_services *host);

/** Records why the current call fails (host->set_error) and returns `status`. */
int host_error(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void host_log(afmesh_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/** A configuration value; nullptr or "" when it is unset. */
const char *host_config(const char *name);

}  // namespace afmesh::ibverbs
