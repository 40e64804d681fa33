// SPDX-License-Identifier: Apache-2.0
// Wakes a thread blocked in poll() from another thread: a non-blocking
// self-pipe whose read end sits in the poll set.
#pragma once

#include "control/socket_util.h"
#include "status.h"

namespace afmesh::control {

class Waker {
public:
    /** Creates the pipe; must succeed before fd()/wake() are used. */
    Status open();
    /** The end to poll for POLLIN. */
    int fd() const { return read_end_.get(); }
    /** Makes fd() readable; never blocks (a full pipe is already readable). */
    void wake();
    /** Empties the pipe after poll() reported it readable. */
    void drain();

private:
    UniqueFd read_end_, write_end_;
};

}  // namespace afmesh::control
