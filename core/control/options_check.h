// SPDX-License-Identifier: Apache-2.0
// Validation of ControlOptions shared by the scheduler and the client, so a
// bad configuration is refused up front with the name of the bad setting.
#pragma once

#include "control/control_client.h"
#include "status.h"

namespace afmesh::control {

/** INVALID_ARGUMENT naming the setting when counts or timings cannot work. */
Status check_options(const ControlOptions &options);

}  // namespace afmesh::control
