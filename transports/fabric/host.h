// SPDX-License-Identifier: Apache-2.0
// The core's services as the fabric module sees them (transports/common/net_module.h).
#pragma once

#include "net_module.h"

namespace afmesh::fabric {
using net_module::EventSink;
using net_module::host_config;
using net_module::host_error;
using net_module::host_log;
}  // namespace afmesh::fabric
