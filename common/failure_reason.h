// SPDX-License-Identifier: Apache-2.0
// Why something failed, as the transport modules record it: a fixed-size,
// printf-formatted reason, and a failure that pairs one with an
// afmesh_hal_status. Reasons are recorded where a failure is found, often on
// the progress path, so recording one never allocates; a connection keeps its
// failure for the EV_CONN_ERROR it reports, whose reason points into it.
#pragma once

#include <cstdarg>
#include <cstdio>

namespace afmesh {

/** A reason of at most 319 characters; a longer one is cut there. */
struct Reason {
    // Room for a module's words and then a provider's (fabric's CQ errors:
    // "<what>: <error> (provider error <n>: <detail>)").
    char text[320] = "";

    __attribute__((format(printf, 2, 3))) void format(const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        vformat(fmt, ap);
        va_end(ap);
    }
    __attribute__((format(printf, 2, 0))) void vformat(const char *fmt, va_list ap) {
        vsnprintf(text, sizeof text, fmt, ap);
    }
};

/** Why a connection failed: the afmesh_hal_status for EV_CONN_ERROR and its reason. */
struct Failure {
    int status = 0;
    Reason reason;
};

}  // namespace afmesh
