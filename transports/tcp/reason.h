// SPDX-License-Identifier: Apache-2.0
// A fixed-size, printf-formatted failure reason. Reasons are recorded where a
// failure is found, often on the progress path, so recording one never
// allocates; a connection keeps its reason for the EV_CONN_ERROR it reports.
#pragma once

#include <cstdarg>

namespace afmesh::tcp {

struct Reason {
    char text[256] = "";

    void format(const char *fmt, ...) __attribute__((format(printf, 2, 3)));
    void vformat(const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
};

/** Why a connection failed: the afmesh_hal_status for EV_CONN_ERROR and its reason. */
struct Failure {
    int status = 0;
    Reason reason;
};

}  // namespace afmesh::tcp
