// SPDX-License-Identifier: Apache-2.0
// The control protocol's message decoders (core/control/messages.cpp): the
// input's first byte is the message type (frame.h's MessageType), the rest
// the payload, as a frame's header and payload would give them.
#include <cstddef>
#include <cstdint>

#include "control_message_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    afmesh::fuzz::Selected in;
    if (!afmesh::fuzz::split_selector(data, size, &in)) return 0;
    afmesh::fuzz::check_control_payload(static_cast<afmesh::control::MessageType>(in.selector), in.rest);
    return 0;
}
