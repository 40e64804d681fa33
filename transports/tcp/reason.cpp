// SPDX-License-Identifier: Apache-2.0
#include "reason.h"

#include <cstdio>

namespace afmesh::tcp {

void Reason::format(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vformat(fmt, ap);
    va_end(ap);
}

void Reason::vformat(const char *fmt, va_list ap) { vsnprintf(text, sizeof text, fmt, ap); }

}  // namespace afmesh::tcp
