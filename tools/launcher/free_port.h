// SPDX-License-Identifier: Apache-2.0
// Picking a port for a server that others must be told about in advance.
#pragma once

#include <string>

namespace afmesh {

/**
 * "host:0" becomes "host:<port>", a port the kernel just handed out (free a
 * moment ago; the caller's server binds it next). Other addresses, and hosts
 * that do not resolve, come back unchanged.
 */
std::string with_free_port(const std::string &address);

}  // namespace afmesh
