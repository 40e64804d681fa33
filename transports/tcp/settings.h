// SPDX-License-Identifier: Apache-2.0
// The settings the tcp module reads besides the core's, declared to the core
// (ABI 1.4) so that `afmesh info` lists them and typos of them are caught.
#pragma once

#include "afmesh/hal/module.h"

namespace afmesh::tcp {

/**
 * Where a listener binds unless AFMESH_TCP_BIND says otherwise. Also what the
 * module falls back on where get_config gives nothing (the variable set
 * empty, or a host older than ABI 1.4 that knows no module defaults).
 */
inline constexpr const char *kDefaultBind = "127.0.0.1";

inline constexpr afmesh_module_setting kSettings[] = {
    {"AFMESH_TCP_BIND", AFMESH_SETTING_STRING, kDefaultBind, nullptr, 0, 0,
     "address the tcp transport listens on (IPv4 or IPv6 literal or host name)"},
};

}  // namespace afmesh::tcp
