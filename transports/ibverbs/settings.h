// SPDX-License-Identifier: Apache-2.0
// The settings the ibverbs module reads besides the core's (AFMESH_NET_DEVICES
// is the core's: its placement chooses the NIC), declared to the core (ABI 1.4)
// so that `afmesh info` lists them and typos of them are caught.
#pragma once

#include "afmesh/hal/module.h"

namespace afmesh::ibverbs {

inline constexpr afmesh_module_setting kSettings[] = {
    {"AFMESH_IBVERBS_LIBRARY", AFMESH_SETTING_STRING, nullptr, nullptr, 0, 0,
     "verbs library the ibverbs transport dlopen()s (unset: libibverbs.so.1; tests name an emulation)"},
};

}  // namespace afmesh::ibverbs
