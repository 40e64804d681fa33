// SPDX-License-Identifier: Apache-2.0
// libfabric's exported entry points, resolved at run time. The module does
// not link libfabric: loading it runs every provider library's constructors
// (psm's calibrates the clock for 200 ms) and its first fi_getinfo
// initialises every provider (verbs reads all of /proc/kallsyms), about
// 0.3 s of a process's start-up even where no provider is usable. Resolving
// it only once a provider may be used keeps probing cheap on hosts without
// a fabric. The rest of libfabric's API is inline calls through the tables
// of the objects these return, so it needs no resolving.
#pragma once

#include <rdma/fabric.h>

#include "failure_reason.h"

namespace afmesh::fabric {

/** The exported functions this module calls, at the symbol versions of the headers it is built with. */
struct LibfabricApi {
    decltype(&::fi_getinfo) getinfo;
    decltype(&::fi_freeinfo) freeinfo;
    decltype(&::fi_dupinfo) dupinfo;
    decltype(&::fi_fabric) fabric;
    decltype(&::fi_strerror) strerror;
    decltype(&::fi_version) version;
};

/**
 * Loads libfabric once per process and resolves its entry points. nullptr,
 * with the reason in `why`, when the library is not installed or lacks one
 * of them; later calls give the same answer without trying again.
 */
const LibfabricApi *load_libfabric(Reason *why);

/** The entry points. Only after load_libfabric() succeeded. */
const LibfabricApi &libfabric();

/** fi_strerror(code); the C library's text for it when libfabric cannot be loaded. */
const char *fabric_strerror(int code);

}  // namespace afmesh::fabric
