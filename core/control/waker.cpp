// SPDX-License-Identifier: Apache-2.0
#include "control/waker.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace afmesh::control {

Status Waker::open() {
    int fds[2];
    if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) return {Code::kError, "pipe2: " + errno_text(errno)};
    read_end_.reset(fds[0]);
    write_end_.reset(fds[1]);
    return Status::ok();
}

void Waker::wake() {
    const char byte = 1;
    // EAGAIN means the pipe is full, hence already readable: nothing to do.
    ssize_t ignored = write(write_end_.get(), &byte, 1);
    (void)ignored;
}

void Waker::drain() {
    char buf[64];
    while (read(read_end_.get(), buf, sizeof buf) > 0) {
    }
}

}  // namespace afmesh::control
