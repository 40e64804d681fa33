// The core's services as the fabric module sees them: the logger, the
// per-thread error message and configuration lookup. Set once by
// afmesh_module_query.
#pragma once

#include "afmesh/hal/module.h"

namespace afmesh::fabric {

void set_host(const afmesh_host_services *host);

/** Records why the current call fails (host->set_error) and returns `status`. */
int host_error(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void host_log(afmesh_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/** A configuration value, or nullptr when it is unset or empty. */
const char *host_config(const char *name);

}  // namespace afmesh::fabric
