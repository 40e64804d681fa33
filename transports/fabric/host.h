// SPDX-License-Identifier: Apache-2.0
// The core's services as the fabric module sees them (common/module_binding.h, transports/common/net_module.h).
#pragma once

#include "net_module.h"

namespace afmesh::fabric {
using net_module::EventSink;
using module::host_config;
using module::host_error;
using module::host_log;
}  // namespace afmesh::fabric
