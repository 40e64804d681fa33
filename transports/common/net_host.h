// SPDX-License-Identifier: Apache-2.0
// The core's services under the short names every transport's code uses
// (common/module_binding.h, net_module.h). Declared in afmesh, the namespace
// enclosing afmesh::tcp, afmesh::fabric and afmesh::ibverbs, so each module
// finds them unqualified; only transport modules include this header.
#pragma once

#include "net_module.h"

namespace afmesh {
using net_module::EventSink;
using module::host_config;
using module::host_error;
using module::host_log;
}  // namespace afmesh
